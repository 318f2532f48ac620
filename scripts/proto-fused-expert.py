#!/usr/bin/env python3
"""A prototype, not a compiler feature: rewrites the unit's emitted kernel
(mkc --emit=cuda of examples/kimi_linear_w4a16.json; the released 48B's too,
for timing only: its routed experts' bf16 steps, which round each expert's
output before its weight, become the unit's fp32 form) so that each MoE layer's
routed experts run as one-stream tasks (mk::moe_fused_expert_task,
templates/moe.cuh) instead of gate/up tiles -> counter -> down tiles: task i
of the gate/up phase takes intermediate columns [32 (i % 32), +32) of the
expert in slot i / 32, its gate and up slices out of the 128-wide packed
tiles, then its 32 rows of W_down into the MoE sums. The down phase keeps
the shared expert's tiles only. Same weights and manifest, so mk-bench can
time it against the default in one process and gpu-measure.sh oracle-check
it (perf notes, session 39).

usage: proto-fused-expert.py SRC_KERNEL_DIR DST_KERNEL_DIR
"""
import pathlib
import re
import shutil
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    cus = list(src.glob("*.cu"))
    if len(cus) != 1:
        sys.exit(f"{src}: expected one .cu, found {len(cus)}")
    text = cus[0].read_text()
    # Each MoE layer's routed gate/up tile -> the one-stream task.
    tile = re.compile(
        r"const int mat = r / 16, rr = r % 16;\n"
        r"\s*const int k0 = \(rr / 8\) \* 1152, n0 = \(rr % 8\) \* 128;\n"
        r"\s*const uint8_t \*const wq = mat \? (?P<p>blocks_\d+_moe)_up_w_q : (?P=p)_gate_w_q;\n"
        r"\s*const mk::bf16 \*const sc = .*\n"
        r"\s*const mk::bf16 \*const zr = .*\n"
        r"\s*mkgen::call<&mk::w4a16_gemv_tile<256, 128, 128, mk::EpiAtomicAddF32, false, "
        r"mk::kOrderMmaFolded>>\(.*\);\n"
        r"(?P<tail>\s*\}\n\s*\{\n\s*MK_STAGE_BEGIN\(\);\n)"
        r"\s*mk::counter_signal\(sync, \d+ \+ i / 32\);\n\s*mk::counter_signal_tail\(\);\n")
    # The routed down branch: its accumulator, then the branch removed.
    down = re.compile(
        r"for \(int t = t0; t < 216; t \+= gridDim.x\) \{\n"
        r"\s*if \(t < 144\) \{ // (?P<layer>blocks\.\d+)\.moe\.experts\.down\n"
        r"(?P<body>(?:.*\n)*?)\s*continue;\n\s*\}\n"
        r"(?P<shared>\s*if \(t < 216\) \{ // (?P=layer)\.moe\.shared_experts\.down\n"
        r"\s*const int i = t - 144;\n)")
    accs = {}

    def fix_down(m):
        acc = re.search(r"tk_w\[slot\], (reinterpret_cast<float \*>\(wsp \+ \d+\))", m["body"])
        if not acc:
            sys.exit(f"{m['layer']}: no routed down accumulator")
        accs[m["layer"].replace(".", "_")] = acc[1]
        shared = m["shared"].replace("if (t < 216)", "if (t < 72)").replace("t - 144", "t - 0")
        return "for (int t = t0; t < 72; t += gridDim.x) {\n" + shared

    text, nd = down.subn(fix_down, text)

    def fix_tile(m):
        p = m["p"]
        acc = accs.get(p.replace("_moe", ""))
        if acc is None:
            sys.exit(f"{p}: its down phase was not found")
        off = "(size_t)e * 1179648 + (size_t)n * 147456"
        soff = "(size_t)e * 18432 + (size_t)n * 2304"
        eoff = "(size_t)e * 1179648"
        esoff = "(size_t)e * 18432"
        call = (
            "const int n = r / 4, c0 = (r % 4) * 32;\n"
            "      mkgen::call<&mk::moe_fused_expert_task<256, 128, 2304>>(xs, "
            f"{p}_gate_w_q + {off}, {p}_gate_scales + {soff}, {p}_gate_zeros + {soff}, "
            f"{p}_up_w_q + {off}, {p}_up_scales + {soff}, {p}_up_zeros + {soff}, c0, 32 * r, "
            f"{p}_down_w_q + {eoff}, {p}_down_scales + {esoff}, {p}_down_zeros + {esoff}, 1024, "
            f"tk_w[slot], {acc}, work);\n")
        return call + m["tail"] + "      __syncthreads();\n"

    text, nt = tile.subn(fix_tile, text)
    if nt != nd or nt == 0:
        sys.exit(f"rewrote {nt} gate/up phases and {nd} down phases: not the unit's kernel?")
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.suffix != ".cu":
            shutil.copy(f, dst / f.name)
    (dst / cus[0].name).write_text(
        "// Rewritten by scripts/proto-fused-expert.py (one-stream routed experts).\n" + text)
    print(f"{dst}: {nt} MoE layers with one-stream routed experts")


if __name__ == "__main__":
    main()
