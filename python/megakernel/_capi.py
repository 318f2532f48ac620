"""ctypes bindings of the runtime's C API (runtime/include/mk/runtime/mk.h).

The shared library is $MK_RUNTIME_LIB when set (the one override); else the
package's own copy (installed with it by `pip install ./python`); else the
system loader's search path. A package used straight from a source checkout
has no copy of its own: point MK_RUNTIME_LIB at the build's
runtime/libmk_runtime_c.so (the package never guesses among build trees).
"""

from __future__ import annotations

import ctypes
import os
from typing import Iterator

_STATUS_NAMES = {
    0: "ok", 1: "invalid argument", 2: "manifest error", 3: "compile error",
    4: "no CUDA driver", 5: "CUDA error", 6: "binding error", 7: "cache full",
    8: "not bound", 9: "I/O error",
}


class MegakernelError(RuntimeError):
    """A failed runtime call: `code` is the mk_status, the message says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__("%s: %s" % (_STATUS_NAMES.get(code, "error %d" % code),
                                     message))
        self.code = code


_lib = None


def _candidates() -> Iterator[str]:
    env = os.environ.get("MK_RUNTIME_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    own = os.path.join(here, "libmk_runtime_c.so")
    if os.path.exists(own):
        yield own
        return
    yield "libmk_runtime_c.so"


def load_library() -> ctypes.CDLL:
    """Loads libmk_runtime_c once; raises OSError naming what was tried."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    else:
        raise OSError("cannot load libmk_runtime_c.so: install the package "
                      "(pip install ./python), or build the runtime (cmake "
                      "--build BUILD --target mk_runtime_c) and set "
                      "MK_RUNTIME_LIB=BUILD/runtime/libmk_runtime_c.so. Tried: "
                      + "; ".join(tried))
    _declare(lib)
    _lib = lib
    return lib


def _declare(lib):
    c = ctypes
    P = c.c_void_p
    i64p = c.POINTER(c.c_int64)
    sig = {
        "mk_last_error": (c.c_char_p, []),
        "mk_api_version": (c.c_int, []),
        "mk_spec_from_hf_config": (c.c_int, [c.c_char_p, c.c_int, c.c_int64,
                                             c.c_char_p,
                                             c.POINTER(c.c_char_p),
                                             c.POINTER(c.c_char_p)]),
        "mk_device_count": (c.c_int, [c.POINTER(c.c_int)]),
        "mk_device_open": (c.c_int, [c.c_int, c.POINTER(P)]),
        "mk_device_info": (c.c_int, [P, c.POINTER(c.c_int), c.POINTER(c.c_int),
                                     c.POINTER(c.c_int), c.c_char_p, c.c_size_t]),
        "mk_device_destroy": (None, [P]),
        "mk_kernel_load_dir": (c.c_int, [P, c.c_char_p, c.c_char_p, c.c_char_p,
                                         c.c_char_p, c.c_int, c.POINTER(P)]),
        "mk_kernel_from_strings": (c.c_int, [P, c.c_char_p, c.c_char_p,
                                             c.c_char_p, c.c_char_p, c.c_int,
                                             c.POINTER(P)]),
        "mk_kernel_manifest": (c.c_char_p, [P]),
        "mk_kernel_from_cache": (c.c_int, [P]),
        "mk_kernel_destroy": (None, [P]),
        "mk_session_create": (c.c_int, [P, P, c.c_int64, c.POINTER(P)]),
        "mk_session_destroy": (None, [P]),
        "mk_session_set_stream": (c.c_int, [P, c.c_uint64]),
        "mk_session_grid": (c.c_int, [P, c.POINTER(c.c_int), c.POINTER(c.c_int)]),
        "mk_session_bind_weight_host": (c.c_int, [P, c.c_char_p, P, c.c_char_p,
                                                  i64p, c.c_int]),
        "mk_session_bind_weight_device": (c.c_int, [P, c.c_char_p, c.c_uint64,
                                                    c.c_char_p, i64p, c.c_int]),
        "mk_session_bind_safetensors": (c.c_int, [P, c.c_char_p,
                                                  c.POINTER(c.c_int)]),
        "mk_session_unbound_weights": (c.c_int, [P, c.POINTER(c.c_int),
                                                 c.c_char_p, c.c_size_t]),
        "mk_session_context_length": (c.c_int, [P, i64p, i64p]),
        "mk_session_set_context_length": (c.c_int, [P, c.c_int64]),
        "mk_session_reserve": (c.c_int, [P, c.c_int64]),
        "mk_session_zero_state": (c.c_int, [P]),
        "mk_session_state_pointer": (c.c_int, [P, c.c_char_p,
                                               c.POINTER(c.c_uint64)]),
        "mk_session_set_state_storage": (c.c_int, [
            P, c.c_int, c.POINTER(c.c_char_p), c.POINTER(c.c_uint64),
            c.POINTER(c.c_char_p), c.POINTER(i64p), c.POINTER(c.c_int),
            c.c_int64]),
        "mk_session_use_owned_storage": (c.c_int, [P]),
        "mk_session_adopt_state": (c.c_int, [
            P, c.c_int, c.POINTER(c.c_char_p), c.POINTER(c.c_uint64),
            c.POINTER(c.c_char_p), c.POINTER(i64p), c.POINTER(c.c_int),
            c.c_int64]),
        "mk_session_step": (c.c_int, [P, c.c_uint64, c.c_uint64]),
        "mk_session_step_token": (c.c_int, [P, c.c_int32, c.c_uint64]),
        "mk_session_step_token_host": (c.c_int, [P, c.c_int32, c.POINTER(c.c_int32)]),
        "mk_session_logits": (c.c_int, [P, c.POINTER(c.c_uint64), c.POINTER(c.c_int64)]),
        "mk_session_read_logits_host": (c.c_int, [P, c.POINTER(c.c_uint16), c.c_int64]),
        "mk_session_synchronize": (c.c_int, [P]),
        "mk_session_time_steps": (c.c_int, [P, c.c_uint64, c.c_uint64, c.c_int,
                                            c.c_int, c.POINTER(c.c_float)]),
        "mk_session_time_token_steps": (c.c_int, [P, c.c_int32, c.c_uint64, c.c_int,
                                                  c.c_int, c.POINTER(c.c_float)]),
        "mk_session_launch_count": (c.c_uint64, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def check(status: int) -> None:
    """Raises MegakernelError for a non-zero mk_status."""
    if status != 0:
        msg = _lib.mk_last_error().decode("utf-8", "replace")
        raise MegakernelError(status, msg)


def tensor_arrays(tensors):
    """(n, names, ptrs, dtypes, shapes, ndims) ctypes arrays for
    mk_session_set_state_storage / mk_session_adopt_state; `tensors` is a list
    of (name, ptr, dtype, shape). The returned tuple keeps every buffer alive.
    """
    c = ctypes
    n = len(tensors)
    names = (c.c_char_p * n)(*[t[0].encode() for t in tensors])
    ptrs = (c.c_uint64 * n)(*[t[1] for t in tensors])
    dtypes = (c.c_char_p * n)(*[t[2].encode() for t in tensors])
    shape_arrays = [(c.c_int64 * max(1, len(t[3])))(*t[3]) for t in tensors]
    shapes = (c.POINTER(c.c_int64) * n)(
        *[c.cast(a, c.POINTER(c.c_int64)) for a in shape_arrays])
    ndims = (c.c_int * n)(*[len(t[3]) for t in tensors])
    return (n, names, ptrs, dtypes, shapes, ndims, shape_arrays)
