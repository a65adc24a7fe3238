"""Content digests that bind a call's results at the moment the call returns.

The worker digests outputs and post-call inputs right after each call and sends the digest on
the protocol channel before any further candidate code can run; the host recomputes the same
digest from what it later reads. Code the candidate left behind (finalizers, threads, shared
memory) that rewrites a result afterwards therefore shows as a mismatch. Used by both sides:
stdlib + torch only.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import torch

_DETACH = torch.Tensor.detach
_TO = torch.Tensor.to
_CONTIGUOUS = torch.Tensor.contiguous
_VIEW = torch.Tensor.view
_NUMPY = torch.Tensor.numpy
_RESHAPE = torch.Tensor.reshape
_CLONE = torch.Tensor.clone


def plain_cpu(t: torch.Tensor) -> torch.Tensor:
    """A detached, contiguous CPU view or copy, reached through unbound ``torch.Tensor``
    methods only (an attribute in the tensor's own ``__dict__`` never runs)."""
    return _CONTIGUOUS(_TO(_DETACH(t), "cpu"))


def instance_attributes(t: Any) -> list[str]:
    """Names in a tensor's own ``__dict__``: a plain result has none."""
    try:
        d = object.__getattribute__(t, "__dict__")
    except AttributeError:
        return []
    return sorted(str(k) for k in d)


PIECE = 16 << 20
"""Bytes of a tensor over which its digest hashes pieces side by side: the digest of each
``PIECE`` in order instead of the bytes themselves (shape and dtype, hashed first, fix which
form a tensor takes). The hashing releases the interpreter lock: up to four cores bind a
119 MB output, on both sides. The threads live only for that digest: a worker runs candidate
code with no thread of the harness beside it (a seccomp kill of the calling thread still
ends the process, and the worker's thread count stays the integrity check's)."""


def _pieces(data: memoryview) -> list[bytes]:
    views = [data[i:i + PIECE] for i in range(0, len(data), PIECE)]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1, len(views)),
                            thread_name_prefix="shx-digest") as pool:
        return list(pool.map(_sha256, views))


def _sha256(view: memoryview) -> bytes:
    return hashlib.sha256(view).digest()


def _update(h: Any, name: str, t: torch.Tensor) -> None:
    h.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{list(t.shape)}|".encode())
    if t.numel() == 0:
        return
    flat = _RESHAPE(_CONTIGUOUS(t), -1)
    data = memoryview(_NUMPY(_VIEW(flat, torch.uint8)).data).cast("B")
    if len(data) <= PIECE:
        h.update(data)
        return
    for piece in _pieces(data):
        h.update(piece)


def digest(named: Mapping[str, torch.Tensor]) -> str:
    """sha256 over (name, dtype, shape, raw bytes) of each tensor, in name order. CPU tensors
    are hashed in place; others are copied to the host first."""
    h = hashlib.sha256()
    for name in sorted(named):
        t = named[name]
        if t.device.type != "cpu":
            t = plain_cpu(t)
        _update(h, name, _DETACH(t))
    return h.hexdigest()


INPUT = "in."
"""Per-input digest keys: ``in.<name>`` -> ``digest({"in.<name>": tensor})``."""


def input_digests(named: Mapping[str, Any]) -> dict[str, str]:
    """A digest per tensor input (keys ``in.<name>``), so an input that is unchanged need not
    travel: the host compares its digest with the reference's digest of the same input."""
    return {k: digest({k: v}) for k, v in named.items()
            if k.startswith(INPUT) and type(v) is torch.Tensor}


def combine(per_input: Mapping[str, str]) -> str:
    """One digest over the per-input digests (``in.<name>`` keys), name order: the ``in`` of a
    call, compared before and after a timed call."""
    h = hashlib.sha256()
    for k in sorted(per_input):
        if k.startswith(INPUT):
            h.update(f"{k}={per_input[k]}\n".encode())
    return h.hexdigest()


@contextmanager
def no_gc() -> Iterator[None]:
    """No collector run (so no gc callback or finalizer of the candidate's) while a result is
    saved and digested; re-disabled even if the candidate switched the collector back on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
