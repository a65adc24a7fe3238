"""Modules reached as attributes of other modules: ``os.sys``, ``np.os``, ``torch.os``.

Most libraries import ``os`` and ``sys`` at their top level, so ``torch.os.system`` *is*
``os.system`` and ``os.sys.modules`` *is* ``sys.modules``: a rule anchored on the module's own
name never sees them. Whenever a resolved dotted name continues through a component named like
a known module (the standard library, plus a few third-party names a kernel has no use for),
the rest of the chain is also read as rooted at that module. A package's own submodule of the
same name (``torch.signal``, ``torch.random``, ``triton.language.math``) is not a re-export:
that is decided from the installed package's files, without importing anything.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

__all__ = ["MODULE_NAMES", "is_module_path", "via_module"]

MODULE_NAMES = frozenset(sys.stdlib_module_names) | {
    "psutil", "numpy", "torch", "triton", "requests", "httpx", "urllib3", "dill",
    "cloudpickle", "cffi", "pycuda", "cupy", "numba", "flashinfer", "flashinfer_bench",
    "sandboxharness", "tvm_ffi", "safetensors",
}
# Module names that are also ordinary library functions: ``torch.select``, ``np.trace``.
# Only the continuation (``x.select.y``) is mapped for them, never the bare attribute.
_ALSO_FUNCTIONS = frozenset({"select", "trace", "copy", "array", "math", "random", "string",
                             "types", "signal", "code", "stat", "time", "operator", "queue",
                             "profile", "numpy", "logging", "io", "zipfile", "platform"})


@functools.lru_cache(maxsize=1024)
def _package_dirs(dotted: str) -> tuple[str, ...]:
    """Directories a package named ``dotted`` is found in, from its files (imports nothing
    below the top level: the top-level spec search imports nothing at all)."""
    head, _, rest = dotted.partition(".")
    if not head.isidentifier():
        return ()
    try:
        spec = importlib.util.find_spec(head)
    except (ImportError, ValueError):
        return ()
    dirs = list(spec.submodule_search_locations or ()) if spec is not None else []
    for part in rest.split(".") if rest else []:
        dirs = [str(Path(d) / part) for d in dirs if (Path(d) / part).is_dir()]
    return tuple(dirs)


@functools.lru_cache(maxsize=4096)
def _own_submodule(prefix: str, name: str) -> bool:
    """``prefix.name`` is a submodule shipped inside package ``prefix``."""
    for d in _package_dirs(prefix):
        p = Path(d)
        if (p / name).is_dir() or (p / f"{name}.py").is_file() or any(p.glob(f"{name}.*.so")):
            return True
    return False


def is_module_path(dotted: str) -> bool:
    """``dotted`` names a module: an installed package's own submodule (``torch.cuda``) or a
    known module reached through another (``numpy.os``)."""
    if "." not in dotted:
        return False
    prefix, _, name = dotted.rpartition(".")
    if not name.isidentifier() or prefix.rpartition(".")[2] == name:
        return False  # mmap.mmap, socket.socket: the module's namesake class or function
    return _own_submodule(prefix, name) or (name in MODULE_NAMES
                                            and name not in _ALSO_FUNCTIONS)


def via_module(dotted: str) -> set[str]:
    """Other names ``dotted`` may denote, read from each module-named component on:
    ``torch.os.system`` -> ``{"os.system"}``, ``a.sys`` -> ``{"sys"}``."""
    parts = dotted.split(".")
    out: set[str] = set()
    for i in range(1, len(parts)):
        name = parts[i]
        if name not in MODULE_NAMES or name == parts[i - 1]:
            continue
        last = i == len(parts) - 1
        if last and name in _ALSO_FUNCTIONS:
            continue
        if _own_submodule(".".join(parts[:i]), name):
            continue
        out.add(".".join(parts[i:]))
    return out
