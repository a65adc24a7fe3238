"""Escape suite fixtures: the backend parameter, hidden secrets, the attack runner."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import HarnessError
from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Policy
from sandboxharness.pipeline import Harness
from sandboxharness.sandbox import Sandbox, select_backend
from tests.escape.support import (
    ATTACKS,
    ESCAPE_POLICY,
    REPO,
    Outcome,
    Runner,
    processes_of,
    solution_file,
)


@pytest.fixture(params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    if name == "docker":
        try:
            sandbox = select_backend("docker", ESCAPE_POLICY)
        except HarnessError as exc:
            pytest.skip(f"docker backend not available here: {exc}")
        close = getattr(sandbox, "close", None)
        if callable(close):
            close()
    return name


@pytest.fixture
def secrets_dir() -> Iterator[Path]:
    """A fake signing key and audit log, outside every default-covered directory (in the
    repository's git-ignored .pytest_cache, which the worker could otherwise read, the
    repository being visible read-only), registered as hidden."""
    base = REPO / ".pytest_cache"
    base.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="escape-secrets-", dir=base))
    (scratch / "keys").mkdir()
    (scratch / "keys" / "signing.key").write_text(f"KEY-{secrets.token_hex(16)}\n")
    (scratch / "audit.log").write_text(f'{{"entry": "LOG-{secrets.token_hex(16)}"}}\n')
    # world-readable on purpose: only hiding (not permissions) may keep the worker out
    os.chmod(scratch, 0o755)  # noqa: S103
    yield scratch
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def open_workdir() -> Iterator[Path]:
    """A world-readable work dir outside every covered and hidden path (.pytest_cache)."""
    base = REPO / ".pytest_cache"
    base.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="escape-jobs-", dir=base))
    os.chmod(workdir, 0o755)  # noqa: S103 - on purpose: only hiding may keep the worker out
    yield workdir
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def used() -> list[Sandbox]:
    return []


@pytest.fixture
def run_attack(backend: str, secrets_dir: Path, tmp_path: Path, used: list[Sandbox]) -> Runner:
    """``run_attack(code, keep_jobs=False, workdir=None) -> Outcome`` through Harness.evaluate."""
    definition = load_definition(ATTACKS / "plus_one.json")
    workloads = load_workloads(ATTACKS / "plus_one.jsonl")

    def _run(code: str, *, name: str = "attack", keep_jobs: bool = False,
             workdir: Path | None = None, policy: Policy = ESCAPE_POLICY,
             **kw: Any) -> Outcome:
        sandbox = select_backend(backend, policy, hidden_paths=[secrets_dir])
        used.append(sandbox)
        harness = Harness(policy, sandbox=sandbox, keep_jobs=keep_jobs, workdir=workdir)
        solution = load_solution(solution_file(tmp_path, code, name))
        t0 = time.monotonic()
        verdict = harness.evaluate(definition, solution, workloads, seed=1234,
                                   blob_root=ATTACKS, **kw)
        return Outcome(verdict, time.monotonic() - t0, sandbox)

    return _run


@pytest.fixture(autouse=True)
def _nothing_left_behind(used: list[Sandbox]) -> Iterator[None]:
    """After every attack: no process of the jobs' sandbox uids survives on the host."""
    yield
    uids = {uid for sb in used for uid in getattr(sb, "job_uids", [])}
    deadline = time.monotonic() + 5
    while processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_of(uids) == [], f"sandbox processes (uids {uids}) survived the job"
