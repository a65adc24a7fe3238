"""GPU side of the worker (runs inside the sandbox): native builds and the re-exec under
compute-sanitizer (timing: ``gputimer``). Stdlib + torch only at import; tvm_ffi only when
asked for.

Nothing here is trusted by the host: build logs are informational, and findings of the
sanitizer are read from its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .protocol import BUILD_ROOT, CHANNEL_ENV, COMPILE_LOG, SANITIZER_ENV, WORKER_MODULE, Hello

NATIVE_LANGUAGES = ("cuda", "cpp")
CUDA_SUFFIXES = (".cu",)
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")


# -- compute-sanitizer: re-exec before the channel is taken ---------------------------------
def exec_under_sanitizer() -> None:
    """Replace this process by ``compute-sanitizer <args> python -I -m sandboxharness.worker``.

    Called first thing in ``__main__`` when the host set ``SHX_SANITIZER_ARGV``. The protocol
    channel moves to fds 3/4 (inherited by the worker the sanitizer starts), and the
    sanitizer's own stdout goes to stderr, so nothing it prints can reach the channel.
    """
    argv = json.loads(os.environ.pop(SANITIZER_ENV))
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise SystemExit("malformed sanitizer command")
    os.dup2(0, 3)
    os.dup2(1, 4)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    env = dict(os.environ)
    env[CHANNEL_ENV] = "3,4"
    target = [sys.executable, "-I", "-m", WORKER_MODULE]
    try:
        os.execve(argv[0], [*argv, *target], env)  # noqa: S606  (argv list from the host)
    except OSError as exc:
        os.write(2, f"shx: cannot start compute-sanitizer: {exc}\n".encode())
        os._exit(97)


def channel_fds() -> tuple[int, int] | None:
    """The channel fds when started under the sanitizer (else None: stdin/stdout)."""
    value = os.environ.pop(CHANNEL_ENV, None)
    if not value:
        return None
    r, w = (int(x) for x in value.split(","))
    return r, w


# -- native builds ---------------------------------------------------------------------------
@contextlib.contextmanager
def _capture_fds(log_path: Path) -> Iterator[None]:
    """Send fd 1 and 2 (the compiler's and ninja's output) to ``log_path`` for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _arch_flag() -> tuple[str, str]:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}", f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"


def _copy_sources(src: Path, dest: Path) -> tuple[list[str], list[str]]:
    cuda, cpp = [], []
    for path in sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(src)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        if path.suffix in CUDA_SUFFIXES:
            cuda.append(str(target))
        elif path.suffix in CPP_SUFFIXES:
            cpp.append(str(target))
    return cuda, cpp


def _import_extension(name: str, so_path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, so_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {so_path.name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_native(hello: Hello) -> tuple[Callable[..., Any], dict[str, Any]]:
    """Build (or take from this candidate's earlier job) a CUDA/C++ solution; return its entry.

    ``binding``: ``torch`` (``torch.utils.cpp_extension.load``, a pybind11 module) or
    ``tvm-ffi`` (``tvm_ffi.cpp.build`` + ``tvm_ffi.load_module``; FlashInfer-Bench's default).
    The build runs in ``$TMPDIR/shx-build/<hash>`` (the job's private scratch); the ``.so``
    and the compiler's log are then published to ``<out>/shx-build/<hash>`` for the host. The
    host may seed that directory with the ``.so`` this candidate's own first job built (same
    content hash); it is copied into scratch before it is loaded.
    """
    import time

    import torch

    binding = hello.binding or "tvm-ffi"
    key = str(hello.build_key).removeprefix("sha256:")[:24]
    name = f"shx_{key}"
    build = Path(os.environ["TMPDIR"]) / BUILD_ROOT / key  # the job's private scratch
    build.mkdir(parents=True, exist_ok=True)
    publish = Path(hello.out) / BUILD_ROOT / key
    publish.mkdir(parents=True, exist_ok=True)
    so_path = build / f"{name}.so"
    seeded = publish / so_path.name
    if seeded.is_file() and not seeded.is_symlink():
        shutil.copyfile(seeded, so_path)
    log_path = build / COMPILE_LOG
    arch, gencode = _arch_flag()
    cflags = ["-O3", "-std=c++17"]
    cuda_flags = ["-O3", "-std=c++17", gencode, "-lineinfo", "-Xptxas=-v"]
    info: dict[str, Any] = {"binding": binding, "arch": arch, "cached": so_path.is_file(),
                            "flags": cuda_flags}
    t0 = time.perf_counter()
    try:
        if not info["cached"]:
            cuda, cpp = _copy_sources(Path(hello.src), build / "src")
            _build(binding, name, build, cuda=cuda, cpp=cpp, cflags=cflags,
                   cuda_flags=cuda_flags, arch=arch, log_path=log_path)
    finally:
        info["build_s"] = time.perf_counter() - t0
        for f in (log_path, so_path):
            if f.is_file() and not (publish / f.name).exists():
                shutil.copyfile(f, publish / f.name)
    if binding == "torch":
        fn = getattr(_import_extension(name, so_path), hello.entry_func, None)
    else:
        import tvm_ffi

        fn = getattr(tvm_ffi.load_module(str(so_path)), hello.entry_func, None)
    if fn is None or not callable(fn):
        raise AttributeError(f"entry point {hello.entry_func!r} not exported by the module")
    torch.cuda.synchronize()
    return fn, info


def _build(binding: str, name: str, build: Path, *, cuda: list[str], cpp: list[str],
           cflags: list[str], cuda_flags: list[str], arch: str, log_path: Path) -> None:
    includes = [str(build / "src")]
    if binding == "torch":
        from torch.utils.cpp_extension import load

        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
        with _capture_fds(log_path):
            load(name=name, sources=cuda + cpp, build_directory=str(build),
                 extra_cflags=cflags, extra_cuda_cflags=cuda_flags,
                 extra_include_paths=includes, verbose=True, with_cuda=bool(cuda))
    elif binding == "tvm-ffi":
        import logging

        import tvm_ffi.cpp

        os.environ["TVM_FFI_CUDA_ARCH_LIST"] = arch
        os.environ["TVM_FFI_CPP_EXTENSION_LOG_BUILD"] = "1"
        logger = logging.getLogger("tvm_ffi.cpp.extension")
        with _capture_fds(log_path):
            handler = logging.StreamHandler(sys.stderr)
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            try:
                built = tvm_ffi.cpp.build(
                    name=name, cpp_files=cpp, cuda_files=cuda, extra_cflags=cflags,
                    extra_cuda_cflags=cuda_flags, extra_include_paths=includes,
                    build_directory=str(build))
            finally:
                logger.removeHandler(handler)
        if Path(built).resolve() != (build / f"{name}.so").resolve():
            shutil.copyfile(built, build / f"{name}.so")
    else:
        raise ValueError(f"unknown binding {binding!r}")
