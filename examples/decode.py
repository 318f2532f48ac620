#!/usr/bin/env python3
"""Decode tokens with the PyTorch drop-in (python/megakernel).

    MK_RUNTIME_LIB=build/runtime/libmk_runtime_c.so \
    MK_KERNEL_DIR=kernels/kimi_linear_w4a16 python3 examples/decode.py \
        [--spec examples/kimi_linear_w4a16.json] [--tokens 64] [--ctx 2048]

(MK_RUNTIME_LIB: the checkout's package has no runtime library of its own;
an installed package, `pip install ./python`, needs none.)

Random weights (the spec's distributions are not reproduced here: a quick
N(0, 0.02) int4 stand-in) and a random state; each step feeds its output
back. Prints the median ms/token from CUDA events and the HBM floor.
"""

import argparse
import json
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import megakernel  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=os.path.join(here, "kimi_linear_w4a16.json"))
    ap.add_argument("--kernel-dir", default=None)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--bandwidth", type=float, default=4.3e12)
    args = ap.parse_args()

    spec = json.load(open(args.spec))
    if spec.get("family") == "dense_gqa":  # no pattern: `layers` GQA layers
        cfg = types.SimpleNamespace(**spec["config"], family="dense_gqa",
                                    name=spec["name"])
    else:
        cfg = types.SimpleNamespace(**spec["config"], pattern=spec["pattern"],
                                    name=spec["name"])
    model = megakernel.Model(cfg, kernel_dir=args.kernel_dir,
                             capacity=args.ctx + args.tokens + 16)
    gen = torch.Generator(device="cuda").manual_seed(0)
    bytes_per_token = 0.0
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.dtype == torch.uint8:
                t.copy_(torch.randint(0, 256, t.shape, device="cuda", generator=gen,
                                      dtype=torch.int32).to(torch.uint8))
            elif name.endswith(".scales"):
                t.fill_(0.02 / 8)
            elif name.endswith(".zeros"):
                t.fill_(8)
            elif name.endswith("norm"):
                t.fill_(1)
            else:
                t.normal_(0, 0.02, generator=gen)
            routed = any(s in name for s in (".moe.gate.", ".moe.up.", ".moe.down."))
            frac = cfg.n_active / cfg.n_experts if routed else 1.0  # dense: never routed
            bytes_per_token += t.numel() * t.element_size() * frac

    state = model.new_state(args.ctx)
    for layer in state:
        for k, t in layer.items():
            t.normal_(0, 0.05 if k == "S" else 0.1, generator=gen)
    caches = ("c_kv", "k_rope", "k_cache", "v_cache")  # read once; the rest read and written
    for layer in state:
        for k, t in layer.items():
            bytes_per_token += t.numel() * t.element_size() * (1 if k in caches else 2)
    hidden = (torch.randn(cfg.hidden, device="cuda", generator=gen) * 0.25).bfloat16()

    for _ in range(8):  # warm-up (the first step adopts the fresh state)
        hidden, state = model.step(hidden, state)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(args.tokens + 1)]
    events[0].record()
    for i in range(args.tokens):
        hidden, state = model.step(hidden, state)
        events[i + 1].record()
    torch.cuda.synchronize()
    ms = sorted(events[i].elapsed_time(events[i + 1]) for i in range(args.tokens))
    med = ms[len(ms) // 2]
    floor = bytes_per_token / args.bandwidth * 1e3
    rows = [t.shape[0] for layer in state for k, t in layer.items() if k in caches]
    print("%s: %d tokens from context %d, context now %d" %
          (spec["name"], args.tokens, args.ctx, rows[0] if rows else -1))
    print("median %.4f ms/token (min %.4f), %.1f GB/s" %
          (med, ms[0], bytes_per_token / (med * 1e-3) / 1e9))
    print("roofline: %.1f MB/token at %.2f TB/s -> %.4f ms floor (%.1f%%)" %
          (bytes_per_token / 1e6, args.bandwidth / 1e12, floor, 100 * floor / med))
    print("finite:", bool(torch.isfinite(hidden.float()).all()))


if __name__ == "__main__":
    main()
