"""Block spec -> kernel directory, through the compiler where it is installed.

`compile(spec)` runs the compiler in process through the embedded JIT's C API
(libmk_jit_c.so, compiler/Jit/mk_jit.h) when that library is found, else the
`mkc` executable, and returns the kernel directory (<kernel>.cu and
<kernel>.manifest.json, what `mkc SPEC --emit=cuda -o DIR` writes) that
`Model(..., kernel_dir=)` and the runtime load. The library is
$MK_JIT_LIB when set (the one override), else the one built or installed
beside `mkc` on PATH. No torch needed.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Iterator, Mapping, Optional, Union

_jit = None


def _jit_candidates() -> Iterator[str]:
    env = os.environ.get("MK_JIT_LIB")
    if env:
        yield env
        return
    mkc = shutil.which("mkc")
    if mkc:
        root = os.path.dirname(os.path.dirname(os.path.realpath(mkc)))
        # A build tree (build/bin/mkc) or an installed prefix (bin/, lib/).
        yield os.path.join(root, "compiler", "Jit", "libmk_jit_c.so")
        yield os.path.join(root, "lib", "libmk_jit_c.so")


def load_jit() -> Optional[ctypes.CDLL]:
    """libmk_jit_c, loaded once; None where it is not found. A library named
    by $MK_JIT_LIB that cannot be loaded is an error (OSError)."""
    global _jit
    if _jit is not None:
        return _jit
    for path in _jit_candidates():
        if not os.path.exists(path) and not os.environ.get("MK_JIT_LIB"):
            continue
        lib = ctypes.CDLL(path)  # raises OSError, naming the file
        lib.mk_jit_compile_spec.restype = ctypes.c_int
        lib.mk_jit_compile_spec.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_char_p, ctypes.c_longlong]
        if hasattr(lib, "mk_jit_compile_spec_with"):
            lib.mk_jit_compile_spec_with.restype = ctypes.c_int
            lib.mk_jit_compile_spec_with.argtypes = [
                ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_longlong,
                ctypes.c_char_p]
        lib.mk_jit_last_error.restype = ctypes.c_char_p
        lib.mk_jit_last_error.argtypes = []
        lib.mk_jit_version.restype = ctypes.c_char_p
        lib.mk_jit_version.argtypes = []
        _jit = lib
        return lib
    return None


def _spec_text(spec: Any) -> str:
    if isinstance(spec, Mapping):
        return json.dumps(spec, indent=2, sort_keys=False) + "\n"
    if isinstance(spec, (str, os.PathLike)):
        with open(spec) as f:
            return f.read()
    # A config object (the drop-in's `cfg`): its spec.
    from ._spec import spec_from_config
    return json.dumps(spec_from_config(spec), indent=2, sort_keys=False) + "\n"


def _has_manifest(d: str) -> bool:
    return os.path.isdir(d) and any(f.endswith(".manifest.json")
                                    for f in os.listdir(d))


ARITHMETICS = ("folded", "scaled", "exact", "int8")


def _compile_into(text: str, out_dir: str, kernel_name: Optional[str],
                  target_sms: int, arithmetic: Optional[str]) -> None:
    lib = load_jit()
    if lib is not None:
        name = kernel_name.encode() if kernel_name else None
        if arithmetic:
            if not hasattr(lib, "mk_jit_compile_spec_with"):
                raise RuntimeError("this libmk_jit_c has no arithmetic option "
                                   "(mk_jit_compile_spec_with): rebuild it")
            rc = lib.mk_jit_compile_spec_with(text.encode(), out_dir.encode(), name,
                                              int(target_sms), arithmetic.encode())
        else:
            rc = lib.mk_jit_compile_spec(text.encode(), out_dir.encode(), name,
                                         int(target_sms))
        if rc != 0:
            from ._capi import MegakernelError
            raise MegakernelError(rc, lib.mk_jit_last_error().decode())
        return
    mkc = shutil.which("mkc")
    if not mkc:
        raise FileNotFoundError(
            "no compiler: set MK_JIT_LIB to libmk_jit_c.so or put `mkc` on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as f:
            f.write(text)
        cmd = [mkc, spec_path, "--emit=cuda", "-o", out_dir]
        opts = []
        if kernel_name:
            opts.append("kernel-name=" + kernel_name)
        if opts:
            cmd.append("--pass-option=schedule-form-phases=" + " ".join(opts))
        if target_sms:
            cmd.append("--pass-option=schedule-partition-work=target-sms=%d"
                       % target_sms)
        if arithmetic:
            cmd.append("--pass-option=schedule-tile-weights=arithmetic=" + arithmetic)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 1:
            # mkc's refusal (its one-line "mkc: error: ..." messages): the
            # same error as the in-process path's.
            from ._capi import MegakernelError
            raise MegakernelError(1, "mkc exited with 1: %s" % (r.stderr + r.stdout).strip())
        if r.returncode != 0:
            raise RuntimeError("mkc failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))


def compile(spec: Union[str, "os.PathLike[str]", Mapping[str, Any], Any],
            out_dir: Optional[str] = None, kernel_name: Optional[str] = None,
            target_sms: int = 0, arithmetic: Optional[str] = None) -> str:
    """Compiles a block spec (a mapping, a spec file's path, or a config
    object with the spec's fields as attributes, as `Model` takes) and
    returns the kernel directory. `out_dir` None: a directory in the cache
    ($MK_CACHE_DIR, else ~/.cache/megakernel) keyed by the spec's text and
    the options, reused when it exists. `target_sms` 0: the compiler's
    default. `arithmetic` None: the compiler's default ("folded"); "exact"
    keeps the spec's per-weight bf16 rounding ("scaled", "int8": the opt-in
    forms; the repository's docs/pipeline.md states each one's error
    budget). Raises ValueError for an unknown arithmetic, MegakernelError
    (the compiler's message) for a spec it refuses."""
    if arithmetic is not None and arithmetic not in ARITHMETICS:
        raise ValueError("arithmetic must be one of %s, got %r"
                         % (", ".join(ARITHMETICS), arithmetic))
    text = _spec_text(spec)
    if out_dir is not None:
        _compile_into(text, out_dir, kernel_name, target_sms, arithmetic)
        return out_dir
    # (arithmetic None keeps the key of the options before it existed)
    key = hashlib.sha256(("%s\n%s\n%d\n%s" % (text, kernel_name or "", target_sms,
                                              arithmetic + "\n" if arithmetic else "")
                          ).encode()).hexdigest()[:24]
    root = os.environ.get("MK_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "megakernel")
    out = os.path.join(root, "kernels", key)
    if _has_manifest(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=key + ".", dir=os.path.dirname(out))
    try:
        gen = os.path.join(tmp, "kernel")
        _compile_into(text, gen, kernel_name, target_sms, arithmetic)
        try:
            os.rename(gen, out)  # atomic: another process may have won the race
        except OSError:
            if not _has_manifest(out):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
