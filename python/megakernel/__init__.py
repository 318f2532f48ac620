"""megakernel: run a generated decode megakernel from PyTorch.

`Model(cfg)` is a torch.nn.Module whose state_dict has the spec's names and
whose `step(hidden, state)` runs one token as one kernel launch. Pure Python
over the runtime's C API (libmk_runtime_c.so, via ctypes). docs/runtime.md.
"""

from ._capi import MegakernelError, load_library

__version__ = "0.4.0"

__all__ = ["Model", "MegakernelError", "load_library", "spec_from_config",
           "find_kernel_dir", "__version__"]


def __getattr__(name):
    # torch is imported only when the model is used.
    if name in ("Model", "spec_from_config", "find_kernel_dir"):
        from . import model
        return getattr(model, name)
    raise AttributeError(name)
