"""Reading what the sandbox wrote: size-capped, no symlinks, parsed on the trusted side."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load

from ..models.verdict import ReasonCode
from .session import KernelFault


def read_tensors(path: Path, cap_bytes: int) -> dict[str, torch.Tensor]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise KernelFault(ReasonCode.WORKER_PROTOCOL,
                          f"result file {path.name} unreadable: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"result {path.name} is not a file")
        if st.st_size > cap_bytes:
            raise KernelFault(ReasonCode.RESOURCE_LIMIT,
                              f"result {path.name} is {st.st_size} bytes, over the cap")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    try:
        return st_load(b"".join(chunks))
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise KernelFault(ReasonCode.WORKER_PROTOCOL,
                          f"result {path.name} is not a valid tensor file: {exc}") from None


def check_bound(path: Path, tensors: dict[str, torch.Tensor], bound: dict[str, str]) -> None:
    """The file's outputs, and each input it holds, must be exactly what the worker digested
    when the call returned (``worker.binding``); anything else was rewritten afterwards. (An
    input the call left unchanged is not in the file: its digest is judged alone.)"""
    from ..worker.binding import INPUT, digest

    if not bound:
        raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"result {path.name} was never bound")
    checks = [(g, {k: v for k, v in tensors.items() if k.startswith(f"{g}.")}, bound.get(g))
              for g in ("out", "rep")]
    checks += [("in", {k: v}, bound.get(k)) for k, v in tensors.items() if k.startswith(INPUT)]
    for group, held, want in checks:
        if want is None and group != "in":
            continue
        if want is None or digest(held) != want:
            what = {"out": "outputs", "in": "post-call inputs", "rep": "repeated samples"}[group]
            raise KernelFault(ReasonCode.INTEGRITY_VIOLATION,
                              f"the {what} in {path.name} differ from what was bound when the "
                              "call returned (rewritten afterwards)")


def read_bound(path: Path, cap_bytes: int, bound: dict[str, str]) -> dict[str, torch.Tensor]:
    tensors = read_tensors(path, cap_bytes)
    check_bound(path, tensors, bound)
    return tensors
