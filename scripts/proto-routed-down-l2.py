#!/usr/bin/env python3
"""A prototype to measure, not a compiler form: copies an emitted Kimi-family
kernel directory and patches its kernel so that every block, right after its
router top-k in each MoE gate/up phase, asks L2 (mk::l2_prefetch_range) for
the weights, scales and zero points of its own routed down tile of the next
phase (docs/perf-notes.md, "Next (after session 51)", item 1). Fails where
the emitted phases are not of the form it knows (the unit's schedule).

  scripts/proto-routed-down-l2.py .carry/kernels/kimi_linear_w4a16 \
      .carry/kernels/kimi_linear_w4a16_pdownl2
  scripts/gpu-measure.sh kimi_linear_w4a16 kimi_linear_w4a16_pdownl2
"""
import re, sys, shutil, pathlib
src_dir, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
shutil.rmtree(out_dir, ignore_errors=True)
shutil.copytree(src_dir, out_dir)
cu = next(out_dir.glob('*.cu'))
s = cu.read_text()
n = 0
for L in range(64):
    down_hdr = f'// ---- phase "blocks.{L}.moe.experts.down"'
    gu_hdr = f'// ---- phase "blocks.{L}.moe.experts.gate_up"'
    if down_hdr not in s or gu_hdr not in s:
        continue
    d0 = s.index(down_hdr)
    deal = re.search(r'deal_first_task\((\d+)u\)', s[d0:]).group(1)
    body = s[d0:d0 + 6000]
    routed = re.search(r'if \(t < (\d+)\) \{ // blocks\.%d\.moe\.experts\.down\n' % L, body)
    call = re.search(r'moe_down_task_waiting<[^>]*>>\(reinterpret_cast<float \*>\(wsp \+ \d+\) \+ slot \* \d+, (\d+), (\w+) \+ \(size_t\)e \* (\d+) \+ \(size_t\)\(\(n0\) / (\d+)\) \* (\d+), (\w+) \+ \(size_t\)e \* (\d+) \+ \(size_t\)\(\(n0\) / \d+\) \* (\d+), (\w+) \+', body)
    tiles = re.search(r'const int slot = i / (\d+), r = i % \d+;', body)
    if not (routed and call and tiles):
        sys.exit(f'layer {L}: the down phase is not the expected form')
    inter, wq, wstride, tn, tbytes, sc, sstride, sper, zr = call.groups()
    per = int(tiles.group(1))
    ins = (f'\n        {{ // prototype: this block\'s routed down tile of the next phase into L2\n'
           f'        const int td = mk::deal_first_task({deal}u);\n'
           f'        if (td < {routed.group(1)}) {{\n'
           f'          const int e2 = tk_idx[td / {per}], t2 = td % {per};\n'
           f'          mk::l2_prefetch_range({wq} + (size_t)e2 * {wstride} + (size_t)t2 * {tbytes}, {tbytes}u);\n'
           f'          mk::l2_prefetch_range({sc} + (size_t)e2 * {sstride} + (size_t)t2 * {sper}, {int(sper) * 2}u);\n'
           f'          mk::l2_prefetch_range({zr} + (size_t)e2 * {sstride} + (size_t)t2 * {sper}, {int(sper) * 2}u);\n'
           f'        }} }}')
    g0 = s.index(gu_hdr)
    m = re.compile(r'MK_STAGE_END\(mk::kStageTopk\);\n\s*tk_key = \d+;').search(s, g0)
    if not m or m.start() > d0:
        sys.exit(f'layer {L}: no top-k in the gate/up phase')
    s = s[:m.end()] + ins + s[m.end():]
    n += 1
if n == 0:
    sys.exit(f'{cu}: no MoE gate/up and down phases to patch')
cu.write_text(s)
print(f'{cu}: {n} MoE layers patched')
