"""Blob staging: 0600 blobs and Hugging Face cache layouts reach the sandbox readable, the
user's files keep their modes, and links leaving the dataset tree are still refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from sandboxharness.errors import InputError
from sandboxharness.models import WorkloadTrace
from sandboxharness.stages.job import stage_blobs


def _wl(path: str) -> WorkloadTrace:
    return WorkloadTrace.model_validate({"definition": "d", "workload": {
        "uuid": "u", "axes": {}, "inputs": {
            "x": {"type": "safetensors", "path": path, "tensor_key": "x"}}}})


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_a_0600_blob_is_copied_readable_and_the_original_keeps_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    (root / "blob").mkdir(parents=True)
    src = root / "blob" / "x.safetensors"
    save_file({"x": torch.arange(4)}, str(src))
    assert _mode(src) == 0o600  # what safetensors writes: the sandbox's uid cannot read it
    data = stage_blobs([_wl("blob/x.safetensors")], root, tmp_path / "job" / "data")
    staged = data / "blob" / "x.safetensors"
    assert _mode(staged) == 0o644 and not os.path.samefile(staged, src)
    assert _mode(src) == 0o600  # the user's file is untouched


def test_a_world_readable_blob_is_hard_linked(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    root.mkdir()
    src = root / "x.safetensors"
    save_file({"x": torch.arange(4)}, str(src))
    src.chmod(0o644)
    data = stage_blobs([_wl("x.safetensors")], root, tmp_path / "d")
    assert os.path.samefile(data / "x.safetensors", src)


def _hf_snapshot(tmp_path: Path) -> Path:
    """``datasets--org--fib/blobs/<sha>`` and ``snapshots/rev1/blob/x.safetensors`` linking to
    ``../../../blobs/<sha>``, as huggingface_hub lays out a download."""
    repo = tmp_path / "hub" / "datasets--org--fib"
    (repo / "blobs").mkdir(parents=True)
    save_file({"x": torch.arange(4)}, str(repo / "blobs" / "abc123"))
    snap = repo / "snapshots" / "rev1"
    (snap / "blob").mkdir(parents=True)
    (snap / "blob" / "x.safetensors").symlink_to("../../../blobs/abc123")
    return snap


def test_hugging_face_cache_layout_is_accepted(tmp_path: Path) -> None:
    snap = _hf_snapshot(tmp_path)
    data = stage_blobs([_wl("blob/x.safetensors")], snap, tmp_path / "d")
    staged = data / "blob" / "x.safetensors"
    assert staged.is_file() and not staged.is_symlink() and _mode(staged) == 0o644


def test_a_link_leaving_the_dataset_tree_is_still_refused(tmp_path: Path) -> None:
    """Attack: a workload's blob path is a link to a host file outside the dataset (here in an
    HF-style snapshot, whose legitimate links point into ``../../blobs``)."""
    snap = _hf_snapshot(tmp_path)
    (tmp_path / "secret.safetensors").write_bytes(b"host file")
    (snap / "evil.safetensors").symlink_to("../../../../secret.safetensors")
    assert (snap / "evil.safetensors").resolve() == (tmp_path / "secret.safetensors").resolve()
    with pytest.raises(InputError, match="leaves the blob root"):
        stage_blobs([_wl("evil.safetensors")], snap, tmp_path / "d")
    # the repo's other folders (refs/) are not blobs either
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text("rev1")
    (snap / "ref.safetensors").symlink_to("../../refs/main")
    with pytest.raises(InputError, match="leaves the blob root"):
        stage_blobs([_wl("ref.safetensors")], snap, tmp_path / "d2")
