#!/usr/bin/env python3
"""An independent NumPy reference of one Kimi-Linear-48B-A3B decode step.

Written from docs/semantics-kimi-linear-48b.md, sharing no code with the C++
oracle (only the safetensors reader and the bf16 rounding of reference.py):
`mk-oracle kimi48b-step` writes seeded weights (Hugging Face names), a seeded
state and a token together with the oracle's logits, next token and state
after the step into one safetensors file; this recomputes the step from that
file alone and checks the oracle: logits at cosine >= 0.99999, the same next
token, and every state tensor after the step (KDA S and conv windows, the
MLA caches with their new row) at cosine >= 0.99999 with the right shape.

It then reruns the recomputation with deliberate mistakes (the decay gate's
sign flipped, the router's correction bias ignored in the selection, a silu
instead of a sigmoid output gate, the routing weights gathered from the
biased scores as the authors' remote code does) and requires each of them to
fail the same comparison, so that the check is known to be sensitive to them.
(kv_a_layernorm's eps 1e-5 instead of 1e-6 is below this tolerance.)

    reference_kimi48b.py --mk-oracle BUILD/oracle/mk-oracle --workdir DIR CONFIG.json...

Exits non-zero on any mismatch, and loudly if NumPy is missing.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import check_configs, F32, bf16, cosine, np, read_safetensors  # noqa: E402

TOL = 0.99999
MUTATIONS = ("decay_sign", "router_bias_ignored", "silu_output_gate", "biased_route_weights")


def sigm(x):
    x = np.asarray(x, dtype=F32)
    return (F32(1) / (F32(1) + np.exp(-x))).astype(F32)


def swish(x):
    x = np.asarray(x, dtype=F32)
    return (x * sigm(x)).astype(F32)


def softplus20(x):
    x = np.asarray(x, dtype=F32)
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, F32(20))))).astype(F32)


def proj(W, x):
    """An HF linear (out, in), no bias: fp32 products, one bf16 rounding."""
    return bf16(W.astype(F32) @ np.asarray(x, dtype=F32))


def rms_norm(x, w, eps):
    """Two roundings: the normalized value, then its product with the weight."""
    x = np.asarray(x, dtype=F32)
    inv = F32(1) / np.sqrt(np.mean(x * x, dtype=F32) + F32(eps))
    return bf16(bf16(x * inv) * w)


class Model:
    def __init__(self, cfg, T, mutation=None):
        self.cfg, self.T, self.mut = cfg, T, mutation
        lin = cfg["linear_attn_config"]
        self.kda_set = set(lin["kda_layers"])  # 1-based
        self.H, self.D = lin["num_heads"], lin["head_dim"]
        self.eps = cfg["rms_norm_eps"]

    def w(self, name):
        return self.T[name]

    # --- KDA: short convs, L2-normalized q/k, low-rank decay, delta rule,
    # gated RMSNorm.
    def kda(self, i, u, state):
        P = "model.layers.%d.self_attn." % i
        S = "state.%d." % i
        H, D = self.H, self.D
        pre = {x: proj(self.w(P + x + "_proj.weight"), u) for x in "qkv"}
        f = proj(self.w(P + "f_b_proj.weight"), proj(self.w(P + "f_a_proj.weight"), u))
        gate = proj(self.w(P + "g_b_proj.weight"), proj(self.w(P + "g_a_proj.weight"), u))
        b = proj(self.w(P + "b_proj.weight"), u)
        post = {}
        for x in "qkv":
            rows = np.concatenate([state[S + x + "_conv"], pre[x][None, :]], axis=0)
            kern = self.w(P + x + "_conv1d.weight")[:, 0, :]  # [C, taps], last = newest
            acc = np.zeros(rows.shape[1], dtype=F32)
            for j in range(rows.shape[0]):
                acc = (acc + kern[:, j] * rows[j]).astype(F32)
            post[x] = bf16(swish(acc))
            state[S + x + "_conv"] = rows[1:].copy()
        q = post["q"].reshape(H, D)
        k = post["k"].reshape(H, D)
        v = post["v"].reshape(H, D)
        q = q / np.sqrt(np.sum(q * q, axis=1, dtype=F32) + F32(1e-6))[:, None]
        q = (q * F32(D ** -0.5)).astype(F32)
        k = (k / np.sqrt(np.sum(k * k, axis=1, dtype=F32) + F32(1e-6))[:, None]).astype(F32)
        A = np.exp(self.w(P + "A_log").reshape(H).astype(F32))
        g = -A[:, None] * softplus20(f.reshape(H, D) + self.w(P + "dt_bias").reshape(H, D))
        if self.mut == "decay_sign":
            g = -g
        beta = sigm(b)
        St = state[S + "S"].astype(F32) * np.exp(g.astype(F32))[:, :, None]
        pred = np.einsum("hkv,hk->hv", St, k)
        delta = beta[:, None] * (v - pred)
        St = (St + k[:, :, None] * delta[:, None, :]).astype(F32)
        o = bf16(np.einsum("hkv,hk->hv", St, q))
        state[S + "S"] = St
        gt = gate.reshape(H, D)
        act = swish(gt) if self.mut == "silu_output_gate" else sigm(gt)
        inv = F32(1) / np.sqrt(np.mean(o * o, axis=1, dtype=F32) + F32(self.eps))
        z = bf16(o * inv[:, None] * self.w(P + "o_norm.weight")[None, :] * act)
        return proj(self.w(P + "o_proj.weight"), z.reshape(-1))

    # --- MLA without any rotary embedding, latent cache.
    def mla(self, i, u, state):
        c = self.cfg
        P = "model.layers.%d.self_attn." % i
        S = "state.%d." % i
        Hm, nope, rope, vd, r = (c["num_attention_heads"], c["qk_nope_head_dim"],
                                 c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"])
        q = proj(self.w(P + "q_proj.weight"), u).reshape(Hm, nope + rope)
        a = proj(self.w(P + "kv_a_proj_with_mqa.weight"), u)
        latent = rms_norm(a[:r], self.w(P + "kv_a_layernorm.weight"), 1e-6)
        lat = np.concatenate([state[S + "c_kv"], latent[None]], axis=0)
        kr = np.concatenate([state[S + "k_rope"], a[r:][None]], axis=0)
        state[S + "c_kv"], state[S + "k_rope"] = lat, kr
        L = lat.shape[0]
        kv = bf16(lat @ self.w(P + "kv_b_proj.weight").T).reshape(L, Hm, nope + vd)
        kn, val = kv[:, :, :nope], kv[:, :, nope:]
        s = (np.einsum("lhd,hd->lh", kn, q[:, :nope]) + kr @ q[:, nope:].T).astype(F32)
        s = (s * F32((nope + rope) ** -0.5)).astype(F32)
        e = np.exp(s - s.max(axis=0, keepdims=True))
        p = (e / e.sum(axis=0, keepdims=True)).astype(F32)
        o = bf16(np.einsum("lh,lhd->hd", p, val))
        return proj(self.w(P + "o_proj.weight"), o.reshape(-1))

    def mlp(self, prefix, names, u):
        gname, uname, dname = names
        h = bf16(bf16(swish(proj(self.w(prefix + gname), u))) * proj(self.w(prefix + uname), u))
        return proj(self.w(prefix + dname), h)

    def moe(self, i, u):
        c = self.cfg
        P = "model.layers.%d.block_sparse_moe." % i
        logits = (self.w(P + "gate.weight") @ u.astype(F32)).astype(F32)
        s = sigm(logits)
        choose = s if self.mut == "router_bias_ignored" else (
            s + self.w(P + "gate.e_score_correction_bias")).astype(F32)
        top = np.argsort(-choose, kind="stable")[:c["num_experts_per_token"]]
        wts = choose[top] if self.mut == "biased_route_weights" else s[top]
        if c["moe_renormalize"]:
            wts = wts / (np.sum(wts, dtype=F32) + F32(1e-20))
        wts = (wts * F32(c["routed_scaling_factor"])).astype(F32)
        acc = np.zeros_like(u, dtype=F32)
        for e, we in zip(top, wts):
            y = self.mlp(P + "experts.%d." % e, ("w1.weight", "w3.weight", "w2.weight"), u)
            acc = (acc + y * we).astype(F32)
        out = bf16(acc)
        if c["num_shared_experts"] > 0:
            out = bf16(out + self.mlp(P + "shared_experts.",
                                      ("gate_proj.weight", "up_proj.weight",
                                       "down_proj.weight"), u))
        return out

    def step(self, token, state):
        c = self.cfg
        x = self.w("model.embed_tokens.weight")[token].astype(F32)
        for i in range(c["num_hidden_layers"]):
            L = "model.layers.%d." % i
            u = rms_norm(x, self.w(L + "input_layernorm.weight"), self.eps)
            a = self.kda(i, u, state) if (i + 1) in self.kda_set else self.mla(i, u, state)
            x = bf16(x + a)
            u = rms_norm(x, self.w(L + "post_attention_layernorm.weight"), self.eps)
            if i >= c["first_k_dense_replace"] and i % c["moe_layer_freq"] == 0:
                f = self.moe(i, u)
            else:
                f = self.mlp(L + "mlp.", ("gate_proj.weight", "up_proj.weight",
                                          "down_proj.weight"), u)
            x = bf16(x + f)
        y = rms_norm(x, self.w("model.norm.weight"), self.eps)
        logits = proj(self.w("lm_head.weight"), y)
        return logits, int(np.argmax(logits))


def compare(T, logits, nxt, state, label):
    """The problems between this recomputation and the oracle's file."""
    bad = []
    c = cosine(logits, T["logits"])
    if not c >= TOL:
        bad.append("%s: logits cosine %.7f" % (label, c))
    theirs = int(T["next_token"][0])
    if nxt != theirs:
        bad.append("%s: next token %d, oracle %d" % (label, nxt, theirs))
    for name, mine in state.items():
        other = T["state_out." + name[len("state."):]]
        if mine.shape != other.shape:
            bad.append("%s: %s shape %s, oracle %s" % (label, name, mine.shape, other.shape))
            continue
        c = cosine(mine, other)
        if not c >= TOL:
            bad.append("%s: %s after the step: cosine %.7f" % (label, name, c))
    return bad


def check(args, config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    name = os.path.splitext(os.path.basename(config_path))[0]
    failures = []
    caught = {m: 0 for m in MUTATIONS}
    for ctx, token in ((0, 17), (9, 300)):
        out = os.path.join(args.workdir, "%s.ctx%d.safetensors" % (name, ctx))
        subprocess.run([args.mk_oracle, "kimi48b-step", config_path, out, "--ctx", str(ctx),
                        "--seed", "3", "--token", str(token)], check=True,
                       stdout=subprocess.DEVNULL)
        T = read_safetensors(out)
        assert int(T["token"][0]) == token
        state0 = {k: v for k, v in T.items() if k.startswith("state.")}
        for k, v in state0.items():
            if k.endswith(".c_kv") and v.shape[0] != ctx:
                failures.append("%s: %s holds %d rows, not %d" % (name, k, v.shape[0], ctx))
        label = "%s ctx %d" % (name, ctx)
        state = {k: v.copy() for k, v in state0.items()}
        logits, nxt = Model(cfg, T).step(token, state)
        bad = compare(T, logits, nxt, state, label)
        print("%s: logits cosine %.8f, next token %d (oracle %d)"
              % (label, cosine(logits, T["logits"]), nxt, int(T["next_token"][0])))
        failures += bad
        for m in MUTATIONS:
            state = {k: v.copy() for k, v in state0.items()}
            with np.errstate(all="ignore"):
                ml, mn = Model(cfg, T, m).step(token, state)
                mbad = compare(T, ml, mn, state, label + " [" + m + "]")
            print("  mutation %-20s -> %d mismatches (logits cosine %.6f)"
                  % (m, len(mbad), cosine(ml, T["logits"])))
            caught[m] += bool(mbad)
    for m, n in caught.items():
        if n == 0:
            failures.append("%s: the mutation '%s' went unnoticed" % (name, m))
    return failures


if __name__ == "__main__":
    check_configs(check)
