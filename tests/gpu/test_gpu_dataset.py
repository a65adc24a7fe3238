"""A dataset run on a real GPU: candidates side by side on one lane, timing windows watched by
NVML (skipped without CUDA; run on the device machine)."""

from __future__ import annotations

import shutil
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
    root = _dataset(tmp_path)
    hog = subprocess.Popen([sys.executable, "-c",
                            "import torch, time\nx = torch.ones(1, device='cuda')\n"
                            "print('ready', flush=True)\ntime.sleep(600)\n"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        summary = run_dataset(root, RunOptions(
            policy=_policy(unsteady_gpu="retime"), gpus=[0], seed=5,
            solutions=["axpy_f32__triton_honest"]))
    finally:
        hog.kill()
        hog.wait()
    windows = _windows(summary)
    assert windows and all(hog.pid in w["foreign_processes"] for w in windows), windows
    assert all("foreign" in (w["flag"] or "") for w in windows)
    bench = summary.outcomes[0].verdict.stage("benchmark")  # type: ignore[union-attr]
    assert all(w.get("retimed") for w in bench.details["workloads"])
