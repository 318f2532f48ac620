"""Block specs (docs/spec-format.md) from config objects; no torch needed."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

_CONFIG_KEYS = ["hidden", "kda_heads", "kda_head_dim", "short_conv",
                "mla_heads", "kv_lora", "qk_nope", "qk_rope", "v_head",
                "rope_theta", "n_experts", "n_active", "n_shared", "moe_inter",
                "routed_scaling", "group"]
# Optional: the sizes of the unit's GQA ("G") layers.
_GQA_KEYS = ["gqa_heads", "gqa_kv_heads", "gqa_head_dim"]
# The Kimi family's two-valued form keys: (the unit's value, the released
# model's), the spec carrying a key only at the second.
_FORM_KEYS = {"router": ("softmax", "sigmoid"), "rmsnorm_rounding": ("once", "twice"),
              "kda_form": ("unit", "released"), "ffn_rounding": ("once", "each"),
              "lm_head": ("w4a16", "bf16")}
# The dense GQA family's config, in the spec's order ("eps" optional).
_DENSE_KEYS = ["hidden", "heads", "kv_heads", "head_dim", "inter",
               "rope_theta", "eps", "group", "layers"]
_DENSE_FIELDS = ("heads", "kv_heads", "head_dim", "inter", "layers")


def _kind(p: Any) -> str:
    s = str(p).strip().upper()
    if s in ("K", "KDA"):
        return "K"
    if s in ("M", "MLA"):
        return "M"
    if s in ("G", "GQA"):
        return "G"
    raise ValueError("pattern entry %r is neither KDA, MLA nor GQA" % (p,))


def _pattern(cfg: Any) -> List[str]:
    return [_kind(p) for p in cfg.pattern]


def _is_dense(cfg: Any) -> bool:
    """Whether `cfg` is a dense GQA config: its `family` says so, or it has
    none, the dense fields and no `pattern`."""
    family = getattr(cfg, "family", None)
    if family is not None:
        if family not in ("dense_gqa", "kimi_linear"):
            raise ValueError("family %r is neither \"kimi_linear\" nor "
                             "\"dense_gqa\"" % (family,))
        return family == "dense_gqa"
    return (not hasattr(cfg, "pattern")
            and all(hasattr(cfg, k) for k in _DENSE_FIELDS))


def _spec_kinds(spec: Mapping[str, Any]) -> List[str]:
    """The per-layer kinds of a spec dict: its pattern, or "G" for each of a
    dense GQA spec's `layers`."""
    if spec.get("family") == "dense_gqa":
        return ["G"] * int(spec["config"]["layers"])
    return [_kind(p) for p in spec["pattern"]]


def _dense_spec(cfg: Any, name: Optional[str]) -> Dict[str, Any]:
    conf = {}
    for k in _DENSE_KEYS:
        if k == "eps" and not hasattr(cfg, "eps"):
            continue
        v = getattr(cfg, k)
        conf[k] = float(v) if k in ("rope_theta", "eps") else int(v)
    return {"name": name or getattr(cfg, "name", None) or "dense_gqa_w4a16",
            "family": "dense_gqa", "config": conf}


def spec_from_config(cfg: Any, name: Optional[str] = None) -> Dict[str, Any]:
    """The block spec of `cfg` (any object with the spec's configuration
    fields as attributes) as a dict. The unit's: `hidden`, `kda_heads`, ...,
    `pattern` ("K", "M" and "G" layers), optionally `eps`, `name`, the
    dense-FFN layers' `dense_layers` and `dense_inter`, the GQA layers'
    `gqa_heads`, `gqa_kv_heads` and `gqa_head_dim`, `router`: "softmax"
    or the released model's "sigmoid", the MLA form's `mla_rotary`
    (default True) and `mla_latent_norm` (default False),
    `rmsnorm_rounding` ("once", or the released model's "twice"),
    `kda_form` ("unit", or the released model's "released"), `ffn_rounding`
    ("once", or the released model's "each": the FFNs' bf16 steps), and the whole
    model's `vocab` with `lm_head` ("w4a16" or "bf16"). The dense GQA family's (`family`
    "dense_gqa", or no `family`, no `pattern` and the fields `heads`,
    `kv_heads`, `head_dim`, `inter`, `layers`): `hidden`, `heads`,
    `kv_heads`, `head_dim`, `inter`, `rope_theta`, `group`, `layers`,
    optionally `eps` and `name`."""
    if _is_dense(cfg):
        return _dense_spec(cfg, name)
    conf = {}
    for k in _CONFIG_KEYS:
        v = getattr(cfg, k)
        conf[k] = float(v) if k in ("rope_theta", "routed_scaling") else int(v)
    if int(getattr(cfg, "dense_layers", 0) or 0) > 0:
        conf["dense_layers"] = int(cfg.dense_layers)
        conf["dense_inter"] = int(getattr(cfg, "dense_inter", 0) or 0)
    for k in _GQA_KEYS:
        if getattr(cfg, k, None) is not None:
            conf[k] = int(getattr(cfg, k))
    # The two-valued form keys, written only at the released model's value.
    for k, (unit, released) in _FORM_KEYS.items():
        if k == "lm_head":
            continue  # with the vocabulary, below
        v = str(getattr(cfg, k, unit) or unit)
        if v not in (unit, released):
            raise ValueError("%s %r is neither \"%s\" nor \"%s\"" % (k, v, unit, released))
        if v == released:
            conf[k] = v
    # The whole model: a vocabulary (embedding, LM head, argmax).
    vocab = int(getattr(cfg, "vocab", 0) or 0)
    if vocab < 0:
        raise ValueError("vocab must be >= 0 (0: a block), got %d" % vocab)
    lm_head = str(getattr(cfg, "lm_head", "w4a16") or "w4a16")
    if lm_head not in ("w4a16", "bf16"):
        raise ValueError("lm_head %r is neither \"w4a16\" nor \"bf16\"" % (lm_head,))
    if vocab > 0:
        conf["vocab"] = vocab
        if lm_head == "bf16":
            conf["lm_head"] = lm_head
    elif lm_head == "bf16":
        raise ValueError("lm_head \"bf16\" needs vocab (a model with an LM head)")
    # The MLA form, written only where it is not the unit's.
    for k, unit in (("mla_rotary", True), ("mla_latent_norm", False)):
        v = getattr(cfg, k, unit)
        if not isinstance(v, bool):
            raise ValueError("%s must be True or False, got %r" % (k, v))
        if v != unit:
            conf[k] = v
    if hasattr(cfg, "eps"):
        conf["eps"] = float(cfg.eps)
    return {"name": name or getattr(cfg, "name", None) or "unit",
            "config": conf, "pattern": _pattern(cfg)}


def spec_from_hf(config: Union[str, "os.PathLike[str]", Dict[str, Any]],
                 as_unit: bool = False, group: int = 0,
                 name: Optional[str] = None,
                 notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """The block spec of a Hugging Face `config.json` (its path, a checkpoint
    directory holding it, or the parsed dict) as a dict, mapped key by key as `mkc --from-hf` does (the same code,
    in the runtime library; docs/spec-format.md). A key whose value asks for
    semantics the unit family lacks is a MegakernelError naming it, unless
    `as_unit`, which takes the model's dimensions into the family anyway.
    `group`: the quantization group (0: the config's, else 128). The
    import's notes are appended to `notes` when given."""
    import ctypes
    from ._capi import check, load_library
    if isinstance(config, dict):
        text = json.dumps(config)
    else:
        path = os.fspath(config)
        if os.path.isdir(path):  # a checkpoint directory: its config.json
            path = os.path.join(path, "config.json")
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    if group < 0:
        raise ValueError("group must be > 0 (0: from the config), got %d" % group)
    lib = load_library()
    spec = ctypes.c_char_p()
    got = ctypes.c_char_p()
    check(lib.mk_spec_from_hf_config(text.encode("utf-8"), int(bool(as_unit)),
                                     int(group),
                                     name.encode("utf-8") if name else None,
                                     ctypes.byref(spec), ctypes.byref(got)))
    if notes is not None:
        notes.extend(n for n in got.value.decode("utf-8").split("\n") if n)
    return json.loads(spec.value.decode("utf-8"))
