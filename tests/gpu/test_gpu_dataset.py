"""A dataset run on a real GPU: candidates side by side on one lane, timing windows watched by
NVML (skipped without CUDA; run on the device machine)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxharness.dataset import RunOptions, run_dataset
from sandboxharness.models import Policy

pytestmark = pytest.mark.gpu
G = Path(__file__).resolve().parents[2] / "kernels" / "gpu"


def _policy(**bench: object) -> Policy:
    return Policy.model_validate({
        "name": "test-gpu-dataset", "languages": ["triton", "python", "cuda"],
        "static": {"bandit": False, "semgrep": False, "ast_rules": False},
        "imports": {"deny": []},
        "limits": {"compile_timeout_s": 300, "run_timeout_s": 300, "memory_mb": 32768},
        "correctness": {"trials": 1, "max_workloads": 2, "heldout_values": []},
        "benchmark": {"warmup": 2, "iterations": 10, "sampled_checks": 1, "baselines": [],
                      **bench},
        "sanitizer": {"tools": ["memcheck"]},
    })


def _dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(G, root)
    return root


def _windows(summary) -> list[dict]:  # type: ignore[no-untyped-def]
    out = []
    for o in summary.outcomes:
        assert o.verdict is not None, o.error
        bench = o.verdict.stage("benchmark")
        out.extend(w.get("gpu_state", {}) for w in bench.details.get("workloads", []))
    return out


def test_two_candidates_share_one_gpu_and_every_window_is_clean(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    summary = run_dataset(root, RunOptions(
        policy=_policy(), jobs=2, gpus=[0], seed=5,
        solutions=["axpy_f32__triton_honest", "axpy_f32__cuda_torch_honest"]))
    assert summary.exit_code == 0
    assert [o.verdict.decision for o in summary.outcomes if o.verdict] == ["promote", "promote"]
    windows = _windows(summary)
    assert windows and all(w["available"] for w in windows), windows
    # the other candidate's worker holds a context on the same GPU, but it is ours and the
    # lane held its requests off: no foreign process, no throttling flag
    assert all(w["foreign_processes"] == [] and w["samples"] >= 2 for w in windows), windows
    assert (root / "traces" / "axpy" / "axpy_f32.jsonl").is_file()


def test_a_foreign_gpu_process_is_flagged_and_retimed(tmp_path: Path) -> None:
    """A process outside this harness's tree (another tenant) holding the GPU: every window
    names it, and ``unsteady_gpu: retime`` times the workload again."""
    root = _dataset(tmp_path)
    ready = tmp_path / "hog.ready"
    # started through a shell that exits at once: the hog is re-parented, not our descendant
    code = ("import torch, time, pathlib; x = torch.ones(1, device='cuda'); "
            f"pathlib.Path({str(ready)!r}).write_text('1'); time.sleep(600)")
    out = subprocess.run(["sh", "-c", f'{sys.executable} -c "{code}" >/dev/null 2>&1 & echo $!'],
                         capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline, "the foreign process never got the GPU"
            time.sleep(0.2)
        summary = run_dataset(root, RunOptions(
            policy=_policy(unsteady_gpu="retime"), gpus=[0], seed=5,
            solutions=["axpy_f32__triton_honest"]))
    finally:
        os.kill(pid, signal.SIGKILL)
    windows = _windows(summary)
    assert windows and all(pid in w["foreign_processes"] for w in windows), windows
    assert all("foreign" in (w["flag"] or "") for w in windows)
    bench = summary.outcomes[0].verdict.stage("benchmark")  # type: ignore[union-attr]
    assert all(w.get("retimed") for w in bench.details["workloads"])
