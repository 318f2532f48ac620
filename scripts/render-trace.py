#!/usr/bin/env python3
"""Renders an `mk-bench --trace` file (Chrome/Perfetto trace JSON, optionally
gzipped) as an SVG timeline: one row per block, one bar per phase colored by
what the phase does, its counter waits in gray over them, a time axis in us.

    scripts/render-trace.py docs/bench/h200-step-ctx16384.trace.json.gz \
        -o docs/bench/h200-step-ctx16384.svg --title "..."

Standard library only. Bars of one color share one SVG path, so a step of
264 blocks x 27 phases stays a few hundred KB.
"""

import argparse
import sys

from trace_io import load

# Phase name fragment -> (legend label, color); first match wins.
KINDS = [
    ("moe.experts.down", "MoE down", "#8e44ad"),
    ("moe.experts.gate_up", "MoE gate/up", "#e74c3c"),
    ("moe_norm", "MoE norm, router, shared gate/up", "#f39c12"),
    ("attn.gated_delta", "KDA gated delta", "#27ae60"),
    ("attn.conv_commit", "KDA conv commit + o_proj", "#16a085"),
    ("attn.rope_append", "MLA rope, cache append, q absorb", "#a0522d"),
    ("attn.attention", "MLA attention", "#d35400"),
    ("attn.combine_wv", "MLA combine + W_v", "#c0392b"),
    ("attn.o_proj", "MLA o_proj", "#7f8c8d"),
    ("attn_norm", "attention norm + projections", "#2980b9"),
    ("final_residual", "final residual", "#2c3e50"),
]
WAIT = "#bdc3c7"


def kind_of(name):
    for frag, label, color in KINDS:
        if frag in name:
            return label, color
    return "other", "#95a5a6"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--width", type=int, default=1200, help="plot width, px")
    ap.add_argument("--row", type=float, default=2.0, help="px per block")
    args = ap.parse_args()

    events = [e for e in load(args.trace) if e.get("ph") == "X"]
    if not events:
        sys.exit("render-trace: no complete ('X') events in %s" % args.trace)
    blocks = sorted({e["tid"] for e in events})
    row_of = {b: i for i, b in enumerate(blocks)}
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    left, top, legend_h = 60, 40, 22 * ((len(KINDS) + 2) // 3) + 10
    plot_h = len(blocks) * args.row
    scale = args.width / (t1 - t0)
    paths = {}  # color -> path data
    used = {}
    for e in events:
        if e.get("cat") == "wait":
            color = WAIT
            used["counter wait"] = WAIT
        else:
            label, color = kind_of(e["name"])
            used[label] = color
        x = left + (e["ts"] - t0) * scale
        y = top + row_of[e["tid"]] * args.row
        w = max(e["dur"] * scale, 0.3)
        paths.setdefault(color, []).append(
            "M%.1f %.1fh%.2fv%.1fh-%.2fz" % (x, y, w, args.row, w))
    H = top + plot_h + 40 + legend_h
    W = left + args.width + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (left, args.title)]
    # A phase's bar spans its waits too: the waits are drawn over it.
    order = [c for c in paths if c != WAIT] + [WAIT]
    for color in order:
        if color in paths:
            out.append('<path fill="%s" d="%s"/>' % (color, "".join(paths[color])))
    # Time axis.
    ay = top + plot_h + 4
    out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>'
               % (left, ay, left + args.width, ay))
    span = t1 - t0
    step = next(s for s in (5, 10, 20, 25, 50, 100, 200, 500, 1000)
                if span / s <= 12)
    t = 0.0
    while t <= span + 1e-9:
        x = left + t * scale
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>'
                   % (x, ay, x, ay + 5))
        out.append('<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>'
                   % (x, ay + 18, t))
        t += step
    out.append('<text x="%d" y="%.1f" text-anchor="end">us</text>'
               % (left + args.width, ay + 32))
    out.append('<text x="%d" y="%.1f" text-anchor="end" transform="rotate(-90 %d %.1f)">'
               'blocks 0-%d</text>' % (left - 8, top + plot_h / 2, left - 8,
                                       top + plot_h / 2, len(blocks) - 1))
    # Legend.
    ly = ay + 44
    items = [(l, c) for l, c in used.items()]
    for i, (label, color) in enumerate(items):
        x = left + (i % 3) * 380
        y = ly + (i // 3) * 22
        out.append('<rect x="%d" y="%.1f" width="14" height="14" fill="%s"/>'
                   % (x, y, color))
        out.append('<text x="%d" y="%.1f">%s</text>' % (x + 20, y + 12, label))
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d blocks, %d bars, %.1f us" % (args.output, len(blocks),
                                                len(events), span))


if __name__ == "__main__":
    main()
