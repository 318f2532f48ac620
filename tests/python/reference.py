#!/usr/bin/env python3
"""An independent NumPy reference of the Kimi-Linear W4A16 decode step.

Written straight from docs/semantics-kimi-linear.md, sharing no code
with the C++ oracle: it reads the weights, state and token that `mk-oracle`
wrote (safetensors), runs the same steps and checks the oracle's outputs
(cosine >= 0.9999 for the output hidden and every state tensor).

    reference.py --mk-oracle BUILD/oracle/mk-oracle --workdir DIR SPEC.json...

For each spec: writes weights and inputs with mk-oracle, runs `mk-oracle run
--dump`, recomputes here, compares. Exits non-zero on any mismatch, and
loudly if NumPy is missing (this check must not be skipped).
"""

import argparse
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    sys.stderr.write("reference.py: FAILED: NumPy is not installed for %s "
                     "(install python3-numpy)\n" % sys.executable)
    sys.exit(3)

F32 = np.float32

# ---------------------------------------------------------------- safetensors

DTYPES = {"U8": np.uint8, "BF16": np.uint16, "F32": np.float32, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        arr = np.frombuffer(data[base + b:base + en], dtype=DTYPES[e["dtype"]])
        arr = arr.reshape(e["shape"]).copy()
        if e["dtype"] == "BF16":
            arr = bf16_bits_to_f32(arr)
        out[name] = arr
    return out


# ---------------------------------------------------------------- bf16


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16(x):
    """Round float32 values to the nearest bf16 (ties to even), as float32."""
    x = np.ascontiguousarray(x, dtype=F32)
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).reshape(x.shape)


# ---------------------------------------------------------------- the spec


def dequant(W, prefix, group, expert=None):
    wq, s, z = W[prefix + ".w_q"], W[prefix + ".scales"], W[prefix + ".zeros"]
    if expert is not None:
        wq, s, z = wq[expert], s[expert], z[expert]
    half, out = wq.shape
    q = np.empty((2 * half, out), dtype=F32)
    q[0::2] = (wq & 15).astype(F32)
    q[1::2] = (wq >> 4).astype(F32)
    s = np.repeat(s, group, axis=0)
    z = np.repeat(z, group, axis=0)
    return bf16((q - z) * s)


def w4a16(x, W, prefix, group, expert=None, round_out=True):
    y = np.asarray(x, dtype=F32) @ dequant(W, prefix, group, expert)
    return bf16(y) if round_out else y.astype(F32)


def rmsnorm(x, w, eps, twice=False):
    x = x.astype(F32)
    r = F32(1.0) / np.sqrt(np.mean(x * x, dtype=F32) + F32(eps))
    return bf16(bf16(x * r) * w) if twice else bf16(x * r * w)


def twice(cfg):
    """Whether the spec's norms round twice (rmsnorm_rounding)."""
    return cfg.get("rmsnorm_rounding", "once") == "twice"


def silu(x):
    return x / (F32(1) + np.exp(-x))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).astype(F32)


def softmax(x):
    e = np.exp(x - np.max(x))
    return (e / np.sum(e)).astype(F32)


def kda(cfg, W, S, p, sp, u):
    d, H, Dk = cfg["hidden"], cfg["kda_heads"], cfg["kda_head_dim"]
    C, g = H * Dk, cfg["group"]
    q = w4a16(u, W, p + "q_proj", g)
    k = w4a16(u, W, p + "k_proj", g)
    v = w4a16(u, W, p + "v_proj", g)
    released = cfg.get("kda_form", "unit") == "released"
    if released:
        # The decay and the output gate through head_dim-wide bottlenecks,
        # each rounded to bf16.
        gr = w4a16(w4a16(u, W, p + "f_a_proj", g), W, p + "f_b_proj", g)
        gate = w4a16(w4a16(u, W, p + "g_a_proj", g), W, p + "g_b_proj", g)
    else:
        gr = w4a16(u, W, p + "g_proj", g)
    b = bf16(W[p + "beta_proj.weight"] @ u)
    conv_w = W[p + "conv_w"]  # [3, C, taps]
    outs = []
    for i, (name, new) in enumerate((("cq", q), ("ck", k), ("cv", v))):
        win = np.concatenate([S[sp + name], new[None, :]], axis=0)  # [taps, C]
        acc = np.sum(win.T * conv_w[i], axis=1, dtype=F32)
        outs.append(bf16(silu(acc)))
        S[sp + name] = win[1:].copy()
    qc, kc, vc = outs
    qf, kf, vf = qc.reshape(H, Dk), kc.reshape(H, Dk), vc.reshape(H, Dk)
    if released:
        # q and k L2-normalized per head (eps 1e-6 on the sum of squares).
        qf = qf / np.sqrt(np.sum(qf * qf, axis=1, dtype=F32) + F32(1e-6))[:, None]
        kf = kf / np.sqrt(np.sum(kf * kf, axis=1, dtype=F32) + F32(1e-6))[:, None]
        gf = (-np.exp(W[p + "A_log"])[:, None] *
              softplus(gr + W[p + "dt_bias"]).reshape(H, Dk)).astype(F32)
    else:
        gf = -softplus(gr).reshape(H, Dk)
    qf = (qf * F32(Dk ** -0.5)).astype(F32)
    beta = (F32(1) / (F32(1) + np.exp(-b))).astype(F32)
    St = S[sp + "S"]
    St = St * np.exp(gf)[:, :, None]
    pred = np.einsum("hij,hi->hj", St, kf)
    St = St + (beta[:, None] * kf)[:, :, None] * (vf - pred)[:, None, :]
    o = np.einsum("hij,hi->hj", St, qf).reshape(C)
    S[sp + "S"] = St.astype(F32)
    if not released:
        return w4a16(bf16(o), W, p + "o_proj", g)
    # The gated output norm per head: fp32 until one rounding.
    ob = bf16(o).reshape(H, Dk)
    r = F32(1) / np.sqrt(np.mean(ob * ob, axis=1, dtype=F32) + F32(cfg["eps"]))
    sig = F32(1) / (F32(1) + np.exp(-gate.reshape(H, Dk)))
    z = bf16(ob * r[:, None] * W[p + "o_norm"][None, :] * sig)
    return w4a16(z.reshape(C), W, p + "o_proj", g)


def rope(x, pos, theta):
    n = x.shape[-1]
    i = np.arange(n // 2, dtype=np.float64)
    a = pos * theta ** (-2.0 * i / n)
    c, s = np.cos(a).astype(F32), np.sin(a).astype(F32)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y = np.empty_like(x)
    y[..., 0::2] = x0 * c - x1 * s
    y[..., 1::2] = x1 * c + x0 * s
    return bf16(y)


def mla(cfg, W, S, p, sp, u, pos):
    Hm, nope, rp, vh = (cfg["mla_heads"], cfg["qk_nope"], cfg["qk_rope"],
                        cfg["v_head"])
    lora, g = cfg["kv_lora"], cfg["group"]
    q = w4a16(u, W, p + "q_proj", g).reshape(Hm, nope + rp)
    kv = w4a16(u, W, p + "kv_a", g)
    c, kr = kv[:lora], kv[lora:]
    # RoPE unless the layers use the rope parts as projected; the latent
    # normalized before caching where the spec says so (eps 1e-6).
    if cfg.get("mla_rotary", True):
        q[:, nope:] = rope(q[:, nope:], pos, cfg["rope_theta"])
        kr = rope(kr, pos, cfg["rope_theta"])
    if cfg.get("mla_latent_norm", False):
        c = rmsnorm(c, W[p + "kv_a_norm"], 1e-6, twice(cfg))
    S[sp + "c_kv"] = np.concatenate([S[sp + "c_kv"], c[None]], axis=0)
    S[sp + "k_rope"] = np.concatenate([S[sp + "k_rope"], kr[None]], axis=0)
    ckv, krope = S[sp + "c_kv"], S[sp + "k_rope"]
    L = ckv.shape[0]
    kvb = bf16(ckv @ dequant(W, p + "kv_b", g)).reshape(L, Hm, nope + vh)
    k_nope, val = kvb[..., :nope], kvb[..., nope:]
    score = (np.einsum("hi,lhi->lh", q[:, :nope], k_nope) +
             (krope @ q[:, nope:].T)) / F32(np.sqrt(nope + rp))
    e = np.exp(score - score.max(axis=0))
    prob = e / e.sum(axis=0)
    o = np.einsum("lh,lhj->hj", prob, val).reshape(Hm * vh).astype(F32)
    return w4a16(bf16(o), W, p + "o_proj", g)


def moe(cfg, W, p, u):
    g = cfg["group"]
    sigmoid = cfg.get("router", "softmax") == "sigmoid"
    # fp32 sums; rounded to bf16 but for the sigmoid router.
    logits = (W[p + "router.weight"] @ u).astype(F32)
    if not sigmoid:
        logits = bf16(logits)
    if sigmoid:
        # The released model's router: sigmoid scores weigh, the scores plus
        # the correction bias choose.
        prob = (F32(1) / (F32(1) + np.exp(-logits))).astype(F32)
        choose = (prob + W[p + "router.bias"]).astype(F32)
        eps = F32(1e-20)
    else:
        prob = softmax(logits)
        choose, eps = prob, F32(1e-9)
    # Top-k, descending; equal scores: the lower index wins.
    idx = sorted(range(len(prob)), key=lambda e: (-choose[e], e))[:cfg["n_active"]]
    w = prob[idx]
    w = w / (np.sum(w, dtype=F32) + eps) * F32(cfg["routed_scaling"])

    each = ffn_each(cfg)

    def expert(gn, un, dn, e):
        return w4a16(swiglu_hidden(cfg, u, W, p + gn, p + un, g, e), W, p + dn, g, e, False)

    acc = np.zeros(cfg["hidden"], dtype=F32)
    for j, e in enumerate(idx):
        y = expert("gate", "up", "down", e)
        acc = acc + F32(w[j]) * (bf16(y) if each else y)
    shared = np.zeros(cfg["hidden"], dtype=F32)
    for s in range(cfg["n_shared"]):
        y = expert("s_gate", "s_up", "s_down", s)
        if each:
            shared = shared + y
        else:
            acc = acc + y
    if each and cfg["n_shared"] > 0:
        # ffn_rounding "each": the routed and shared sums rounded apart.
        return bf16(bf16(acc) + bf16(shared))
    return bf16(acc)


# --mutate ffn-steps: the reference leaves the FFNs' bf16 steps out (to
# show that the check notices them).
MUTATIONS = set()


def ffn_each(cfg):
    """Whether the FFNs round each step to bf16 (ffn_rounding "each")."""
    return cfg.get("ffn_rounding", "once") == "each" and "ffn-steps" not in MUTATIONS


def swiglu_hidden(cfg, u, W, gate, up, g, e):
    """silu(u @ gate) * (u @ up) in fp32, or with ffn_rounding "each" in
    bf16 steps: bf16(bf16(silu(bf16(u @ gate))) * bf16(u @ up))."""
    a = w4a16(u, W, gate, g, e, False)
    b = w4a16(u, W, up, g, e, False)
    if ffn_each(cfg):
        return bf16(bf16(silu(bf16(a))) * bf16(b))
    return silu(a) * b


def dense_ffn(cfg, W, p, u):
    """A dense-FFN layer's SwiGLU (layers below dense_layers), as a shared
    expert: the plain [in, out] linears at blocks.i.mlp, fp32 sums (the
    intermediate in bf16 steps with ffn_rounding "each"), one rounding."""
    g = cfg["group"]
    h = swiglu_hidden(cfg, u, W, p + "gate", p + "up", g, None)
    return bf16(w4a16(h, W, p + "down", g, None, False))


def step(spec, W, S, x):
    cfg = spec["config"]
    eps = cfg.get("eps", 1e-6)
    pos = None
    for i, kind in enumerate(spec["pattern"]):
        if kind in ("M", "mla"):
            pos = S["state.%d.c_kv" % i].shape[0] if pos is None else pos
    for i, kind in enumerate(spec["pattern"]):
        p, sp = "blocks.%d." % i, "state.%d." % i
        u = rmsnorm(x, W[p + "attn_norm"], eps, twice(cfg))
        if kind in ("K", "kda"):
            a = kda(cfg, W, S, p + "attn.", sp, u)
        else:
            a = mla(cfg, W, S, p + "attn.", sp, u, pos)
        h = bf16(x + a)
        if i < cfg.get("dense_layers", 0):
            x = bf16(h + dense_ffn(cfg, W, p + "mlp.", rmsnorm(h, W[p + "mlp_norm"], eps, twice(cfg))))
        else:
            x = bf16(h + moe(cfg, W, p + "moe.", rmsnorm(h, W[p + "moe_norm"], eps, twice(cfg))))
    return x


def model_step(spec, W, S, token):
    """The whole model (config `vocab`): the token's embedding row through
    the layers, the final norm, the LM head, the first index of the largest
    logit."""
    cfg = spec["config"]
    h = step(spec, W, S, W["embed.weight"][token])
    y = rmsnorm(h, W["final_norm"], cfg.get("eps", 1e-6), twice(cfg))
    if cfg.get("lm_head", "w4a16") == "bf16":
        logits = bf16(W["lm_head.weight"] @ y)
    else:
        logits = w4a16(y, W, "lm_head", cfg["group"])
    # The first index of the largest; NaN never chosen (-0 equals +0 here).
    return logits, int(np.nanargmax(logits))


# ---------------------------------------------------------------- driver


def cosine(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    return float(a @ b / (na * nb)) if na and nb else 0.0


def check_spec(args, spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    name = spec["name"]
    wdir = os.path.join(args.workdir, name)
    os.makedirs(wdir, exist_ok=True)
    wpath, ipath, opath = (os.path.join(wdir, n) for n in
                           ("weights.safetensors", "inputs.safetensors",
                            "outputs.safetensors"))
    run = lambda *a: subprocess.run([args.mk_oracle, *a], check=True,
                                    stdout=subprocess.DEVNULL)
    run("write-weights", spec_path, wpath, "--seed", str(args.seed))
    run("write-inputs", spec_path, ipath, "--ctx", str(args.ctx),
        "--state-seed", str(args.seed + 1), "--hidden-seed", str(args.seed + 2))
    run("run", spec_path, "--weights", wpath, "--inputs", ipath, "--steps",
        str(args.steps), "--dump", opath)

    W = read_safetensors(wpath)
    S = read_safetensors(ipath)
    got = read_safetensors(opath)
    ok = True
    if spec["config"].get("vocab", 0) > 0:
        # The whole model decodes greedily from the token.
        token = int(S.pop("token")[0])
        for _ in range(args.steps):
            logits, token = model_step(spec, W, S, token)
        checks = [("logits", logits, got["logits"])]
        have = int(got["next_token"][0])
        same = have == token
        ok = ok and same
        print("%s: %-16s %d, reference %d %s" % (name, "next_token", have, token,
                                                 "ok" if same else "FAILED"))
    else:
        x = S.pop("hidden")
        for _ in range(args.steps):
            x = step(spec, W, S, x)
        checks = [("hidden_out", x, got["hidden_out"])]
    checks += [(n, S[n], got[n]) for n in sorted(S)]
    for n, want, have in checks:
        if want.shape != have.shape:
            print("%s: %s: shape %s, reference %s" % (name, n, have.shape,
                                                       want.shape))
            ok = False
            continue
        c = cosine(want, have)
        good = c >= args.min_cosine
        ok = ok and good
        print("%s: %-16s cosine %.7f %s" % (name, n, c, "ok" if good else
                                            "FAILED"))
    return ok


def check_configs(check):
    """The command line of the other families' references
    (reference_dense.py, reference_kimi48b.py): --mk-oracle, --workdir and
    config files; check(args, config) returns a list of failures. Prints
    them and exits 1 if there are any."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mk-oracle", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("configs", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    failures = []
    for c in args.configs:
        failures += check(args, c)
    for f in failures:
        print("FAILED: " + f)
    sys.exit(1 if failures else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mk-oracle", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--ctx", type=int, default=9)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--min-cosine", type=float, default=0.9999)
    ap.add_argument("--mutate", action="append", default=[], choices=["ffn-steps"],
                    help="a deliberate mistake in the reference, which must then fail")
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    MUTATIONS.update(args.mutate)
    ok = True
    for s in args.specs:
        ok = check_spec(args, s) and ok
    if not ok:
        print("reference.py: FAILED: the oracle disagrees with the NumPy "
              "reference")
        return 1
    print("reference.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
