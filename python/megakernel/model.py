"""A PyTorch drop-in for one decode unit, or a whole model, running the
generated megakernel.

    model = megakernel.Model(cfg, kernel_dir="kernels/kimi_linear_w4a16")
    model.load_state_dict(reference.state_dict())
    hidden, state = model.step(hidden, state)

A whole model (a spec with `vocab`: embedding, layers, final norm, LM head,
greedy argmax) steps token ids instead, one launch per token:

    model = megakernel.Model(cfg, kernel_dir="kernels/kimi_linear_model")
    next_token, state = model.step_token(token, model.new_state())
    logits = model.logits()
    ids, state = model.generate([1, 2, 3], max_new_tokens=16)

`cfg` is a config object of either block family: the Kimi-Linear unit's
(`pattern` of KDA, MLA and GQA layers) or the dense GQA decoder's (`family`
"dense_gqa", `layers` GQA layers each with a dense SwiGLU FFN).

`model.state_dict()` has exactly the spec's names and shapes (nested modules
hold the buffers, so `blocks.0.attn.q_proj.w_q` is a real path). The kernel
reads most buffers in place (zero copy); the weights it stores in its own
tile layout are repacked into runtime memory when bound, and bound again
when the buffer is replaced or changed in place. `state` is the spec's list of
per-layer dicts: {"S", "cq", "ck", "cv"} for KDA layers, {"c_kv", "k_rope"}
for MLA layers, {"k_cache", "v_cache"} for GQA layers (every layer of a dense
GQA spec); caches (the states whose leading dim is the context) hold ctx_len
rows.

Every step is ONE kernel launch on the current CUDA stream:
- the state the model returned last is updated in place;
- any other state (a fresh one, another sequence's) is *adopted*: the same
  launch reads it and writes the new state into the model's storage;
- when the caches are full the model allocates larger storage (no copy) and
  adopts its own old storage into it, again in the one launch.
The returned state is a view of the model's storage: it stays valid until the
model steps another state. Clone it to keep it.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch

from . import _capi, _jit
from ._capi import MegakernelError, check
from ._spec import _FORM_KEYS, _spec_kinds, spec_from_config

_DTYPES = {"u8": torch.uint8, "bf16": torch.bfloat16, "f32": torch.float32,
           "i32": torch.int32}

# Each layer kind's state, in the catalogue's order.
_STATE_KEYS = {"K": ("S", "cq", "ck", "cv"), "M": ("c_kv", "k_rope"),
               "G": ("k_cache", "v_cache")}


def _manifest_config(manifest):
    """The family, flat config dict and per-layer kinds ("K", "M", "G") of a
    manifest (any accepted form). A dense GQA spec has no pattern: each of
    its `layers` is "G"."""
    if "spec" in manifest:
        spec = manifest["spec"]
    elif "config" in manifest["config"]:
        spec = manifest["config"]
    else:
        conf = manifest["config"]
        spec = {"config": {k: v for k, v in conf.items()
                           if k not in ("pattern", "name", "family")},
                "pattern": conf.get("pattern", manifest.get("pattern"))}
        if "family" in conf:
            spec["family"] = conf["family"]
    return (spec.get("family", "kimi_linear"), spec["config"],
            _spec_kinds(spec))


def _has_manifest(d):
    return os.path.isdir(d) and any(f.endswith(".manifest.json")
                                    for f in os.listdir(d))


def find_kernel_dir(cfg: Mapping[str, Any], kernel_dir: Optional[str] = None,
                    name: Optional[str] = None) -> str:
    """Where the kernel for `cfg` is: `kernel_dir`, else $MK_KERNEL_DIR, else
    compiled (megakernel.compile: the embedded JIT's library, or `mkc`) into
    the cache directory. A directory without a manifest but with a
    subdirectory named after the spec (the layout of $MK_KERNELS_DIR)
    resolves to that subdirectory."""
    spec = spec_from_config(cfg, name)
    d = kernel_dir or os.environ.get("MK_KERNEL_DIR")
    if d:
        if _has_manifest(d):
            return d
        sub = os.path.join(d, spec["name"])
        if _has_manifest(sub):
            return sub
        raise FileNotFoundError("no *.manifest.json in %s (nor in %s)" % (d, sub))
    if _jit.load_jit() is None and not shutil.which("mkc"):
        raise FileNotFoundError(
            "no kernel: pass kernel_dir=, set MK_KERNEL_DIR, or install the "
            "compiler (libmk_jit_c.so via MK_JIT_LIB, or `mkc` on PATH) so the "
            "kernel can be generated")
    return _jit.compile(spec)


class Model(torch.nn.Module):
    """One decode unit on the GPU: see the module docstring."""

    def __init__(self, cfg: Mapping[str, Any], kernel_dir: Optional[str] = None,
                 device: Union[None, str, torch.device] = None, capacity: int = 4096,
                 name: Optional[str] = None) -> None:
        super().__init__()
        import ctypes
        self._lib = lib = _capi.load_library()
        self.cfg = cfg
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError("Model runs on a CUDA device, got %s" % device)
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self._device = device
        # PyTorch's context first: the runtime then shares the primary one.
        torch.empty(1, device=device)
        self._dev = ctypes.c_void_p()
        self._kernel = ctypes.c_void_p()
        self._session = ctypes.c_void_p()
        check(lib.mk_device_open(device.index, ctypes.byref(self._dev)))
        self.kernel_dir = find_kernel_dir(cfg, kernel_dir, name)
        check(lib.mk_kernel_load_dir(self._dev, self.kernel_dir.encode(), None,
                                     None, None, 1, ctypes.byref(self._kernel)))
        self.manifest = json.loads(lib.mk_kernel_manifest(self._kernel).decode())
        self._check_config()
        check(lib.mk_session_create(self._dev, self._kernel, int(capacity),
                                    ctypes.byref(self._session)))

        params = self.manifest["params"]
        self._weight_names = []
        for p in params:
            if p["role"] == "weight":
                self._register_weight(p["name"], p["shape"], p["dtype"])
                self._weight_names.append(p["name"])
        # Where each weight lives (its module's buffer dict and key): step()
        # re-reads the tensors there to notice replaced buffers without
        # walking the module tree for every weight of every step.
        self._weight_slots = [self._slot(n) for n in self._weight_names]
        self._state_desc = [(p["name"], p["dtype"], p["shape"]) for p in params
                            if p["role"] == "state_in"]
        # The caches: every state whose leading dim is the context (-1).
        self._cache_names = {n for n, _, shape in self._state_desc
                             if shape and shape[0] < 0}
        self._layer_kinds = _spec_kinds(spec_from_config(cfg))
        # A whole model (a vocabulary): step_token / generate, not step.
        self.vocab = int(_manifest_config(self.manifest)[1].get("vocab", 0) or 0)
        self._bound = None
        self._storage = {}
        self._capacity = 0
        self._ctx = 0
        self._alloc_storage(int(capacity), zero=True)

    # -- construction ------------------------------------------------------
    def _check_config(self):
        family, conf, got = _manifest_config(self.manifest)
        want = spec_from_config(self.cfg)
        if family != want.get("family", "kimi_linear"):
            raise ValueError("kernel in %s is of the %s family, cfg of %s"
                             % (self.kernel_dir, family,
                                want.get("family", "kimi_linear")))
        for k, v in want["config"].items():
            if k in conf and not isinstance(v, str) and float(conf[k]) != float(v):
                raise ValueError("kernel in %s was generated for %s=%s, cfg has %s"
                                 % (self.kernel_dir, k, conf[k], v))
        if family == "kimi_linear":  # the forms: written only where not the unit's
            forms = [(k, unit) for k, (unit, _) in _FORM_KEYS.items()]
            for key, unit in forms + [("mla_rotary", True), ("mla_latent_norm", False),
                                      ("vocab", 0), ("dense_layers", 0)]:
                got_v = conf.get(key, unit)
                want_v = want["config"].get(key, unit)
                if got_v != want_v:
                    raise ValueError("kernel in %s was generated for %s=%s, cfg has %s"
                                     % (self.kernel_dir, key, got_v, want_v))
        kinds = _spec_kinds(want)
        if got != kinds:
            raise ValueError("kernel in %s has pattern %s, cfg has %s"
                             % (self.kernel_dir, got, kinds))

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The spec's weights, in the spec's (the manifest's) order.

        PyTorch would list a module's own buffers before its children's
        (blocks.0.attn_norm, blocks.0.moe_norm, then blocks.0.attn.*); the
        names are the same either way, the order here is the catalogue's.
        """
        sd = super().state_dict(*args, prefix=prefix, keep_vars=keep_vars)
        ordered = collections.OrderedDict()
        for name in self._weight_names:
            if prefix + name in sd:
                ordered[prefix + name] = sd[prefix + name]
        for k, v in sd.items():
            if k not in ordered:
                ordered[k] = v
        if hasattr(sd, "_metadata"):
            ordered._metadata = sd._metadata
        if destination is not None:
            destination.update(ordered)
            return destination
        return ordered

    def _register_weight(self, name, shape, dtype):
        parts = name.split(".")
        mod = self
        for part in parts[:-1]:
            child = mod._modules.get(part)
            if child is None:
                child = torch.nn.Module()
                mod.add_module(part, child)
            mod = child
        mod.register_buffer(parts[-1], torch.zeros(
            shape, dtype=_DTYPES[dtype], device=self._device))

    def _slot(self, name):
        mod = self
        parts = name.split(".")
        for part in parts[:-1]:
            mod = mod._modules[part]
        return mod._buffers, parts[-1]


    def _state_shape(self, shape, rows):
        return [rows if d < 0 else d for d in shape]

    def _alloc_storage(self, capacity, zero):
        make = torch.zeros if zero else torch.empty
        storage = {}
        for name, dtype, shape in self._state_desc:
            storage[name] = make(self._state_shape(shape, capacity),
                                 dtype=_DTYPES[dtype], device=self._device)
        arrays = _capi.tensor_arrays(
            [(n, t.data_ptr(), d, list(t.shape))
             for (n, d, _), t in zip(self._state_desc, storage.values())])
        check(self._lib.mk_session_set_state_storage(
            self._session, *arrays[:6], int(capacity)))
        self._storage = storage
        self._capacity = capacity

    # -- weights -------------------------------------------------------------
    def _bind_weights(self):
        # A buffer is (re)bound when it was replaced (new pointer) or changed
        # in place (torch's version counter): the kernel reads most weights
        # in place, but those it stores in its own tile layout are copied
        # (repacked) at bind, and a stale copy must not survive an update.
        tensors = [buffers[key] for buffers, key in self._weight_slots]
        keys = tuple((t.data_ptr(), t._version) for t in tensors)
        if keys == self._bound:
            return
        import ctypes
        old = self._bound or (None,) * len(keys)
        for name, t, key, was in zip(self._weight_names, tensors, keys, old):
            if key == was:
                continue
            if t.device != self._device or not t.is_contiguous():
                raise ValueError("weight %s must be a contiguous tensor on %s"
                                 % (name, self._device))
            dtype = [k for k, v in _DTYPES.items() if v == t.dtype]
            shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
            check(self._lib.mk_session_bind_weight_device(
                self._session, name.encode(), t.data_ptr(),
                (dtype[0] if dtype else str(t.dtype)).encode(), shape, t.dim()))
        self._bound = keys

    # -- state ---------------------------------------------------------------
    def new_state(self, ctx_len: int = 0) -> List[Dict[str, torch.Tensor]]:
        """A zero state of `ctx_len` cached tokens (foreign to the model)."""
        state = []
        for i, kind in enumerate(self._layer_kinds):
            layer = {}
            for k in _STATE_KEYS[kind]:
                name, dtype, shape = self._desc("state.%d.%s" % (i, k))
                layer[k] = torch.zeros(self._state_shape(shape, ctx_len),
                                       dtype=_DTYPES[dtype], device=self._device)
            state.append(layer)
        return state

    def _desc(self, name):
        for d in self._state_desc:
            if d[0] == name:
                return d
        raise KeyError(name)

    def _flatten(self, state):
        if len(state) != len(self._layer_kinds):
            raise ValueError("state has %d layers, the unit has %d"
                             % (len(state), len(self._layer_kinds)))
        flat = []
        for i, (layer, kind) in enumerate(zip(state, self._layer_kinds)):
            for k in _STATE_KEYS[kind]:
                if k not in layer:
                    raise KeyError("state[%d] lacks %r" % (i, k))
                flat.append(("state.%d.%s" % (i, k), layer[k]))
        return flat

    def _views(self, rows):
        state = []
        for i, kind in enumerate(self._layer_kinds):
            layer = {}
            for k in _STATE_KEYS[kind]:
                name = "state.%d.%s" % (i, k)
                t = self._storage[name]
                layer[k] = t[:rows] if name in self._cache_names else t
            state.append(layer)
        return state

    # -- the step ------------------------------------------------------------
    def _prepare(self, state: List[Dict[str, torch.Tensor]]
                 ) -> Tuple[int, List[torch.Tensor]]:
        """Binds changed weights and makes `state` the next launch's (in
        place when it is the model's own, else adopted by that launch; larger
        storage first when the caches are full); returns its context and the
        contiguous copies the launch reads, which the caller keeps alive
        until the launch is issued (freed earlier, their memory could be
        handed to the launch's output)."""
        flat = self._flatten(state)
        caches = [t for n, t in flat if n in self._cache_names]
        ctx = int(caches[0].shape[0]) if caches else self._ctx
        for t in caches:
            if int(t.shape[0]) != ctx:
                raise ValueError("the caches disagree on the context length")
        self._bind_weights()
        check(self._lib.mk_session_set_stream(
            self._session, torch.cuda.current_stream(self._device).cuda_stream))
        ours = ctx == self._ctx and all(
            t.data_ptr() == self._storage[n].data_ptr() for n, t in flat)
        keep: List[torch.Tensor] = []
        if not ours or ctx + 1 > self._capacity:
            foreign = []
            for n, t in flat:
                if t.device != self._device:
                    raise ValueError("%s is on %s, the model on %s"
                                     % (n, t.device, self._device))
                if not t.is_contiguous():
                    t = t.contiguous()
                    keep.append(t)
                dt = [k for k, v in _DTYPES.items() if v == t.dtype]
                foreign.append((n, t.data_ptr(), dt[0] if dt else str(t.dtype),
                                list(t.shape)))
            if ctx + 1 > self._capacity:
                # No copy: the launch moves the rows into the new storage.
                self._alloc_storage(max(ctx + 1, 2 * self._capacity), zero=False)
            arrays = _capi.tensor_arrays(foreign)
            check(self._lib.mk_session_adopt_state(self._session, *arrays[:6],
                                                   ctx))
        else:
            check(self._lib.mk_session_set_context_length(self._session, ctx))
        return ctx, keep

    def step(self, hidden: torch.Tensor, state: List[Dict[str, torch.Tensor]]
             ) -> Tuple[torch.Tensor, List[Dict[str, torch.Tensor]]]:
        """One token: returns (hidden', state'), one kernel launch."""
        if self.vocab:
            raise ValueError("the kernel in %s is a whole model (vocab %d): it steps "
                             "tokens (step_token, generate), not hidden vectors"
                             % (self.kernel_dir, self.vocab))
        if hidden.dtype != torch.bfloat16 or hidden.device != self._device:
            raise ValueError("hidden must be bf16 on %s" % self._device)
        h = hidden.reshape(-1)
        if h.numel() != self.cfg.hidden:
            raise ValueError("hidden has %d elements, the unit's width is %d"
                             % (h.numel(), self.cfg.hidden))
        if not h.is_contiguous():
            h = h.contiguous()
        ctx, keep = self._prepare(state)
        out = torch.empty_like(h)
        check(self._lib.mk_session_step(self._session, h.data_ptr(),
                                        out.data_ptr()))
        del keep  # issued: the stream orders any reuse of their memory after it
        self._ctx = ctx + 1
        return out.view(hidden.shape), self._views(ctx + 1)

    # -- the whole model -------------------------------------------------------
    def _check_token(self, token) -> int:
        if not self.vocab:
            raise ValueError("the kernel in %s is a block (no vocabulary): it steps "
                             "hidden vectors (step), not tokens" % self.kernel_dir)
        if isinstance(token, torch.Tensor):
            if token.numel() != 1:
                raise ValueError("token must be one id, got a tensor of %d"
                                 % token.numel())
            token = token.item()
        if isinstance(token, bool) or int(token) != token:
            raise ValueError("token must be an integer id, got %r" % (token,))
        token = int(token)
        if not 0 <= token < self.vocab:
            raise ValueError("token %d is not in the vocabulary 0..%d"
                             % (token, self.vocab - 1))
        return token

    def step_token(self, token, state: List[Dict[str, torch.Tensor]]
                   ) -> Tuple[torch.Tensor, List[Dict[str, torch.Tensor]]]:
        """A whole model's step, one kernel launch: token id in (an int, or a
        one-element tensor, read on the host: the kernel takes the id as an
        argument), (next token, state') out; the next token is an int32
        tensor [1] on the device, the greedy argmax of the step's logits
        (logits()). Asynchronous on the current stream."""
        token = self._check_token(token)
        ctx, keep = self._prepare(state)
        nxt = torch.empty(1, dtype=torch.int32, device=self._device)
        check(self._lib.mk_session_step_token(self._session, token, nxt.data_ptr()))
        del keep  # issued: the stream orders any reuse of their memory after it
        self._ctx = ctx + 1
        return nxt, self._views(ctx + 1)

    def logits(self) -> torch.Tensor:
        """A copy of the last step_token's bf16 logits [vocab] (on the device,
        ordered after that step on the current stream)."""
        import ctypes
        if not self.vocab:
            raise ValueError("the kernel in %s is a block: it has no logits" % self.kernel_dir)
        ptr, count = ctypes.c_uint64(), ctypes.c_int64()
        check(self._lib.mk_session_logits(self._session, ctypes.byref(ptr),
                                          ctypes.byref(count)))

        class _View:  # the runtime's buffer, seen through the CUDA array interface
            __cuda_array_interface__ = {"shape": (int(count.value),), "typestr": "<i2",
                                        "data": (int(ptr.value), False), "version": 3,
                                        "strides": None, "stream": None}

        raw = torch.as_tensor(_View(), device=self._device)
        return raw.view(torch.bfloat16).clone()

    def generate(self, prompt, max_new_tokens: int,
                 state: Optional[List[Dict[str, torch.Tensor]]] = None
                 ) -> Tuple[List[int], List[Dict[str, torch.Tensor]]]:
        """Greedy decoding: the prompt's ids one launch each (from `state`,
        else an empty sequence), then `max_new_tokens` more, each the argmax
        after the previous; returns (the new ids, state'). Each generated id
        is read on the host before the next launch (the kernel takes it as an
        argument). The returned state holds the prompt and every new id but
        the last (it was not stepped): continue with `prompt=[ids[-1]]` and
        that state. No stop token: exactly `max_new_tokens` ids."""
        ids = [self._check_token(t) for t in prompt]
        if not ids:
            raise ValueError("generate needs a prompt of at least one token")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
                or max_new_tokens < 0:
            raise ValueError("max_new_tokens must be an integer >= 0, got %r"
                             % (max_new_tokens,))
        if state is None:
            state = self.new_state(0)
        out: List[int] = []
        nxt = None
        for t in ids:
            nxt, state = self.step_token(t, state)
        while len(out) < max_new_tokens:
            tok = int(nxt.item())
            out.append(tok)
            if len(out) < max_new_tokens:
                nxt, state = self.step_token(tok, state)
        return out, state

    forward = step

    @property
    def capacity(self) -> int:
        return self._capacity

    def launch_count(self) -> int:
        return int(self._lib.mk_session_launch_count(self._session))

    def __del__(self):
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        for attr, fn in (("_session", lib.mk_session_destroy),
                         ("_kernel", lib.mk_kernel_destroy),
                         ("_dev", lib.mk_device_destroy)):
            h = getattr(self, attr, None)
            if h is not None and h.value:
                fn(h)
                h.value = None
