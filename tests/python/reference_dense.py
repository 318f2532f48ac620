#!/usr/bin/env python3
"""An independent NumPy reference of the dense GQA W4A16 decode step.

Written from docs/semantics-dense-gqa.md, sharing no code with the C++
oracle (only the file and bf16 helpers of reference.py, which computes the
Kimi-Linear unit): `mk-oracle dense-step` writes seeded weights, caches and a
token together with the oracle's output hidden and caches into one
safetensors file; this recomputes the step and checks the oracle
(cosine >= 0.9999 for the output hidden and every cache, the new rows
included).

    reference_dense.py --mk-oracle BUILD/oracle/mk-oracle --workdir DIR CONFIG.json...

Exits non-zero on any mismatch, and loudly if NumPy is missing.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import check_configs, F32, bf16, cosine, np, read_safetensors, rmsnorm, silu, w4a16  # noqa: E402


def rope_rotate_half(x, pos, theta):
    """Element i pairs with i + d/2: the angle pos * theta^(-2i/d) in double,
    its cos and sin rounded to fp32, the rotation in fp32, rounded to bf16."""
    d = x.shape[-1]
    half = d // 2
    i = np.arange(half, dtype=np.float64)
    a = float(pos) * np.power(float(theta), -2.0 * i / float(d))
    c, s = np.cos(a).astype(F32), np.sin(a).astype(F32)
    x0, x1 = x[..., :half].astype(F32), x[..., half:].astype(F32)
    return np.concatenate([bf16(x0 * c - x1 * s), bf16(x1 * c + x0 * s)], axis=-1)


def attention(q, kc, vc, kv_heads):
    """q [Hq, hd]; caches [rows, Hkv, hd]: head h reads kv head h // rep."""
    hq, hd = q.shape
    rep = hq // kv_heads
    o = np.empty((hq, hd), dtype=F32)
    scale = F32(1.0) / np.sqrt(F32(hd))
    for h in range(hq):
        g = h // rep
        scores = (kc[:, g, :].astype(F32) @ q[h].astype(F32)) * scale
        e = np.exp(scores - np.max(scores))
        p = (e / np.sum(e)).astype(F32)
        o[h] = bf16(p @ vc[:, g, :].astype(F32))
    return o


def layer(cfg, W, i, x, kc, vc, pos):
    p = "blocks.%d." % i
    g, eps = cfg["group"], cfg.get("eps", 1e-6)
    hq, hkv, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    u = rmsnorm(x, W[p + "attn_norm"], eps)
    q = w4a16(u, W, p + "attn.q_proj", g).reshape(hq, hd)
    k = w4a16(u, W, p + "attn.k_proj", g).reshape(hkv, hd)
    v = w4a16(u, W, p + "attn.v_proj", g).reshape(hkv, hd)
    q = np.stack([rmsnorm(q[h], W[p + "attn.q_norm"], eps) for h in range(hq)])
    k = np.stack([rmsnorm(k[h], W[p + "attn.k_norm"], eps) for h in range(hkv)])
    q = rope_rotate_half(q, pos, cfg["rope_theta"])
    k = rope_rotate_half(k, pos, cfg["rope_theta"])
    kc = np.concatenate([kc, k[None]], axis=0)
    vc = np.concatenate([vc, v[None]], axis=0)
    o = attention(q, kc, vc, hkv).reshape(-1)
    h1 = bf16(x + w4a16(o, W, p + "attn.o_proj", g))
    u2 = rmsnorm(h1, W[p + "mlp_norm"], eps)
    hmid = silu(w4a16(u2, W, p + "mlp.gate", g, round_out=False)) * w4a16(
        u2, W, p + "mlp.up", g, round_out=False)
    y = w4a16(hmid.astype(F32), W, p + "mlp.down", g)
    return bf16(h1 + y), kc, vc


def check(args, config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    name = os.path.splitext(os.path.basename(config_path))[0]
    failures = []
    for ctx in (0, 37):
        out = os.path.join(args.workdir, "%s.ctx%d.safetensors" % (name, ctx))
        subprocess.run([args.mk_oracle, "dense-step", config_path, out, "--ctx", str(ctx),
                        "--seed", "3"], check=True, stdout=subprocess.DEVNULL)
        T = read_safetensors(out)
        x = T["hidden"]
        for i in range(cfg["layers"]):
            kc, vc = T["state.%d.k_cache" % i], T["state.%d.v_cache" % i]
            x, kc, vc = layer(cfg, T, i, x, kc, vc, ctx)
            for what, mine in (("k_cache", kc), ("v_cache", vc)):
                theirs = T["state_out.%d.%s" % (i, what)]
                c = cosine(mine, theirs)
                if not c >= 0.9999 or mine.shape != theirs.shape:
                    failures.append("%s ctx %d layer %d %s: cosine %.6f" % (name, ctx, i, what, c))
                # The new row (normed, rotated keys; values as projected).
                c = cosine(mine[-1], theirs[-1])
                if not c >= 0.9999:
                    failures.append("%s ctx %d layer %d new %s row: cosine %.6f"
                                    % (name, ctx, i, what, c))
        c = cosine(x, T["hidden_out"])
        print("%s ctx %d: output cosine %.7f" % (name, ctx, c))
        if not c >= 0.9999:
            failures.append("%s ctx %d: output cosine %.6f" % (name, ctx, c))
    return failures


if __name__ == "__main__":
    check_configs(check)
