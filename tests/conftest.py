"""Shared fixtures. GPU tests skip themselves (with the reason) where there is no CUDA device."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
FIB = DATA / "fib"  # FlashInfer-Bench samples, vendored (origin and licence in its README)


def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: none on this machine (CI has none; "
                            "these run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _triton_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _has_cuda():
        monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture
def tiny_def_path() -> Path:
    return DATA / "tiny" / "rms_t.json"


@pytest.fixture
def tiny_wl_path() -> Path:
    return DATA / "tiny" / "rms_t.jsonl"


TRITON_RMS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _rms_kernel(X, W, Y, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(X + row * H + offs)
    w = tl.load(W + offs)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + 1e-6)
    tl.store(Y + row * H + offs, x * r * w)


def run(x, w, y):
    _rms_kernel[(x.shape[0],)](x, w, y, H=x.shape[1])
'''


def make_solution(code: str, *, name: str = "cand", dps: bool = True,
                  language: str = "triton", definition: str = "rms_t") -> dict[str, Any]:
    return {"name": name, "definition": definition, "author": "tests",
            "spec": {"language": language, "target_hardware": ["H100"],
                     "entry_point": "kernel.py::run", "destination_passing_style": dps},
            "sources": [{"path": "kernel.py", "content": code}]}


@pytest.fixture
def write_solution(tmp_path: Path):  # type: ignore[no-untyped-def]
    def _write(code: str, **kw: Any) -> Path:
        p = tmp_path / f"{kw.get('name', 'cand')}.json"
        p.write_text(json.dumps(make_solution(code, **kw)))
        return p
    return _write


def fast_policy(**overrides: Any) -> Any:
    """A policy for dynamic tests: analysers off (so behaviour reaches the sandbox), small counts."""
    from sandboxharness.models import Policy

    base: dict[str, Any] = {
        "name": "test-dynamic",
        "static": {"bandit": False, "semgrep": False, "ast_rules": False},
        "imports": {"deny": []},
        "limits": {"compile_timeout_s": 60, "run_timeout_s": 60},
        "correctness": {"trials": 2, "max_workloads": 2, "heldout_values": [3], "heldout_count": 1,
                        "dtype_tolerance": {"float32": {"atol": 1e-5, "rtol": 1e-5}}},
        "benchmark": {"warmup": 1, "iterations": 4, "sampled_checks": 2},
    }
    for k, v in overrides.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return Policy.model_validate(base)


os.environ.setdefault("PYTHONHASHSEED", "0")
