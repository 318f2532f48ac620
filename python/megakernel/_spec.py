"""Block specs (docs/spec-format.md) from config objects; no torch needed."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

_CONFIG_KEYS = ["hidden", "kda_heads", "kda_head_dim", "short_conv",
                "mla_heads", "kv_lora", "qk_nope", "qk_rope", "v_head",
                "rope_theta", "n_experts", "n_active", "n_shared", "moe_inter",
                "routed_scaling", "group"]


def _pattern(cfg: Any) -> List[str]:
    out = []
    for p in cfg.pattern:
        s = str(p).strip().upper()
        if s in ("K", "KDA"):
            out.append("K")
        elif s in ("M", "MLA"):
            out.append("M")
        else:
            raise ValueError("pattern entry %r is neither KDA nor MLA" % (p,))
    return out


def spec_from_config(cfg: Any, name: Optional[str] = None) -> Dict[str, Any]:
    """The block spec of `cfg` (any object with the spec's configuration
    fields as attributes: `hidden`, `kda_heads`, ..., `pattern`, optionally
    `eps` and `name`) as a dict."""
    conf = {}
    for k in _CONFIG_KEYS:
        v = getattr(cfg, k)
        conf[k] = float(v) if k in ("rope_theta", "routed_scaling") else int(v)
    if hasattr(cfg, "eps"):
        conf["eps"] = float(cfg.eps)
    return {"name": name or getattr(cfg, "name", None) or "unit",
            "config": conf, "pattern": _pattern(cfg)}
