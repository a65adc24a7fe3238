"""Reading results the sandbox wrote: no symlinks followed, sizes capped, garbage rejected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.results import read_tensors
from sandboxharness.stages.session import KernelFault


def test_reads_a_real_result(tmp_path: Path) -> None:
    save_file({"out.y": torch.ones(3)}, str(tmp_path / "r.safetensors"))
    assert torch.equal(read_tensors(tmp_path / "r.safetensors", 1 << 20)["out.y"], torch.ones(3))


def test_symlink_to_host_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host data")
    os.symlink(secret, tmp_path / "r.safetensors")
    with pytest.raises(KernelFault) as exc:
        read_tensors(tmp_path / "r.safetensors", 1 << 20)
    assert exc.value.code == ReasonCode.WORKER_PROTOCOL


def test_oversized_result_is_refused_before_reading(tmp_path: Path) -> None:
    save_file({"out.y": torch.ones(1024)}, str(tmp_path / "r.safetensors"))
    with pytest.raises(KernelFault) as exc:
        read_tensors(tmp_path / "r.safetensors", 100)
    assert exc.value.code == ReasonCode.RESOURCE_LIMIT


def test_garbage_and_fifo_are_refused(tmp_path: Path) -> None:
    (tmp_path / "g").write_bytes(b"\xff" * 64)
    with pytest.raises(KernelFault):
        read_tensors(tmp_path / "g", 1 << 20)
    os.mkfifo(tmp_path / "f")
    with pytest.raises(KernelFault):
        read_tensors(tmp_path / "f", 1 << 20)
