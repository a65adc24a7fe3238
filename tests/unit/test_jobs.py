"""Job set-up on the trusted side: only referenced blobs reach the sandbox; FIB layout lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.api import find_workloads
from sandboxharness.errors import InputError
from sandboxharness.intake import load_definition
from sandboxharness.models import WorkloadTrace
from sandboxharness.stages.job import stage_blobs
from tests.conftest import FIB, REPO


def _wl(path: str) -> WorkloadTrace:
    return WorkloadTrace.model_validate({"definition": "d", "workload": {
        "uuid": "u", "axes": {}, "inputs": {
            "x": {"type": "safetensors", "path": path, "tensor_key": "x"}}}})


def test_only_referenced_blobs_are_staged(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    (root / "blob").mkdir(parents=True)
    (root / "blob" / "x.safetensors").write_bytes(b"data")
    (root / "secret.txt").write_text("not for the candidate")
    data = stage_blobs([_wl("blob/x.safetensors")], root, tmp_path / "job" / "data")
    staged = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    assert staged == ["blob/x.safetensors"]


def test_missing_blob_and_escaping_blob_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        stage_blobs([_wl("blob/none.safetensors")], tmp_path, tmp_path / "d1")
    (tmp_path / "root").mkdir()
    (tmp_path / "outside.safetensors").write_bytes(b"x")
    (tmp_path / "root" / "link.safetensors").symlink_to(tmp_path / "outside.safetensors")
    with pytest.raises(InputError, match="leaves the blob root"):
        stage_blobs([_wl("link.safetensors")], tmp_path / "root", tmp_path / "d2")


def test_workloads_found_in_the_fib_layout() -> None:
    d_path = REPO / "kernels" / "definitions" / "softmax_v512.json"
    assert find_workloads(d_path, load_definition(d_path)) == (
        REPO / "kernels" / "workloads" / "softmax_v512.jsonl")
    fib = FIB / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"
    found = find_workloads(fib, load_definition(fib))
    assert found.name == "rmsnorm_h4096.jsonl" and found.parent.name == "rmsnorm"
