"""megakernel: run a generated decode megakernel from PyTorch.

`Model(cfg)` is a torch.nn.Module whose state_dict has the spec's names and
whose `step(hidden, state)` runs one token as one kernel launch. Pure Python
over the runtime's C API (libmk_runtime_c.so, via ctypes). docs/runtime.md.
`compile(spec)` turns a block spec into a kernel directory with the compiler
where it is installed (in process through libmk_jit_c.so, or `mkc`);
`spec_from_hf(config)` maps a Hugging Face config.json onto a block spec.
"""

from ._capi import MegakernelError, load_library
from ._jit import compile, load_jit
from ._spec import spec_from_config, spec_from_hf

__version__ = "0.4.0"

__all__ = ["Model", "MegakernelError", "load_library", "compile", "load_jit",
           "spec_from_config", "spec_from_hf", "find_kernel_dir", "__version__"]


def __getattr__(name):
    # torch is imported only when the model is used.
    if name in ("Model", "find_kernel_dir"):
        from . import model
        return getattr(model, name)
    raise AttributeError(name)
