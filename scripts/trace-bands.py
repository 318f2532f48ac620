#!/usr/bin/env python3
"""Reads the bands of an `mk-bench --trace` file (Chrome/Perfetto trace JSON,
optionally gzipped) as text: for every band that starts with a phase whose
name contains START, the percentiles over the blocks of each of its phases'
start, end and work (us from the band's first block start), and the blocks
that end the band last, with each phase's end on them.

    scripts/trace-bands.py build-gpu/measure/trace.json --start moe_norm

A band runs from a START phase to the phase before the next phase whose
name ends in `_norm` or is `final_residual` (the next band of any kind), or
`--phases N` phases. What perf notes #203 read off the MoE bands.
Standard library only.
"""

import argparse
import sys

from trace_io import load


def pct(xs):
    xs = sorted(xs)
    n = len(xs)
    return "%6.1f %6.1f %6.1f %6.1f %6.1f" % (xs[0], xs[n // 10], xs[n // 2],
                                             xs[(9 * n) // 10], xs[-1])


def band_starts_next(name):
    return name.endswith("_norm") or name == "final_residual"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--start", default="moe_norm",
                    help="a band starts at each phase whose name contains this")
    ap.add_argument("--phases", type=int, default=0,
                    help="phases per band (0: up to the next band's first phase)")
    ap.add_argument("--last", type=int, default=8,
                    help="how many of the blocks that end each band last to list")
    args = ap.parse_args()

    phases = {}  # phase index -> {block: event}
    names = {}
    for e in load(args.trace):
        if e.get("ph") != "X" or e.get("cat") != "phase":
            continue
        i = e["args"]["phase_index"]
        phases.setdefault(i, {})[e["tid"]] = e
        names[i] = e["name"]
    if not phases:
        sys.exit("trace-bands: no phase events in %s" % args.trace)
    order = sorted(phases)
    starts = [i for i in order if args.start in names[i]]
    if not starts:
        sys.exit("trace-bands: no phase name contains '%s'" % args.start)
    print("%d bands starting at a phase named *%s*, %d blocks" %
          (len(starts), args.start, len(phases[starts[0]])))
    for s in starts:
        band = [s]
        for i in order[order.index(s) + 1:]:
            if (args.phases and len(band) == args.phases) or \
                    (not args.phases and band_starts_next(names[i])):
                break
            band.append(i)
        blocks = sorted(phases[s])
        t0 = min(phases[s][b]["ts"] for b in blocks)
        print("\nband %s (phases %d-%d); us from its first block's start"
              % (names[s], band[0], band[-1]))
        print("  %-36s %-34s %-34s %s" % ("phase", "start: min p10 med p90 max",
                                          "end: min p10 med p90 max",
                                          "work: min p10 med p90 max"))
        for i in band:
            ev = phases[i]
            bs = [b for b in blocks if b in ev]
            print("  %-36s %-34s %-34s %s" % (
                names[i][-36:], pct([ev[b]["ts"] - t0 for b in bs]),
                pct([ev[b]["ts"] + ev[b]["dur"] - t0 for b in bs]),
                pct([ev[b]["args"]["work_us"] for b in bs])))
        last = phases[band[-1]]
        ends = sorted(((last[b]["ts"] + last[b]["dur"] - t0, b) for b in blocks if b in last),
                      reverse=True)[:args.last]
        print("  last blocks (each phase's end):")
        for _, b in ends:
            print("    block %3d: %s" % (b, " ".join(
                "%5.1f" % (phases[i][b]["ts"] + phases[i][b]["dur"] - t0)
                for i in band if b in phases[i])))


if __name__ == "__main__":
    main()
