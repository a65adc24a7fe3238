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
from collections.abc import Iterator, Mapping
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


def _update(h: Any, name: str, t: torch.Tensor) -> None:
    h.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{list(t.shape)}|".encode())
    if t.numel() == 0:
        return
    flat = _RESHAPE(_CONTIGUOUS(t), -1)
    h.update(_NUMPY(_VIEW(flat, torch.uint8)).data)


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
