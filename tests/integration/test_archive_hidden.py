"""Attack: a candidate reads the archive (other candidates' sources, verdicts, sanitizer
reports) by absolute path during ``run --local`` and ``evaluate --archive``.

The archive is kept inside the repository here, which the worker otherwise sees read-only
(its Python runtime lives there), and its objects are world-readable (0444): only hiding the
path keeps them from the candidate. A canary file beside the archive shows that the place
itself is visible, so a pass means the archive was hidden, not merely out of reach."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxharness.dataset.verdictstore import iter_verdicts
from sandboxharness.models import Verdict
from tests.conftest import DATA, REPO, TRITON_RMS, make_solution
from tests.integration.test_run_local import _dataset

pytestmark = pytest.mark.slow  # three real evaluations (~50 s)

NO_STATIC = ("name: archive-thief\nimports: {deny: []}\n"  # let the attempt reach the sandbox
             "static: {bandit: false, semgrep: false, ast_rules: false}\n"
             "limits: {compile_timeout_s: 60, run_timeout_s: 60}\n"
             "correctness: {trials: 1, heldout_values: [3], heldout_count: 1}\n"
             "benchmark: {warmup: 1, iterations: 3, sampled_checks: 1}\n")


def thief(archive: Path, canary: Path) -> str:
    """Computes the right answer only if it could read an archived object: a leak promotes."""
    return (
        "import os\nimport torch\n\n"
        "def run(x, w):\n"
        "    seen, read = [], 0\n"
        f"    for d, _, files in os.walk({str(archive)!r}):\n"
        "        seen += [os.path.join(d, f) for f in files]\n"
        "    for p in seen:\n"
        "        try:\n"
        "            with open(p, 'rb') as fh:\n"
        "                read += len(fh.read())\n"
        "        except OSError:\n"
        "            pass\n"
        "    if not read:\n"
        f"        with open({str(canary)!r}) as fh:\n"
        "            raise RuntimeError(f'archive unseen: {len(seen)} file(s); canary '\n"
        "                               + fh.read().strip())\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n")


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.fixture
def place() -> Iterator[Path]:
    keep = REPO / ".pytest_cache" / f"shx-archive-{uuid.uuid4().hex[:8]}"
    keep.mkdir(parents=True)
    try:
        yield keep
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def assert_saw_nothing(v: Verdict, token: str) -> None:
    assert v.decision == "reject", v.reasons
    assert [r.code.value for r in v.reasons] == ["RUNTIME_ERROR"], v.reasons
    message = v.reasons[0].message
    assert "archive unseen: 0 file(s)" in message, message
    assert f"canary {token}" in message, message  # the place beside it was visible


def test_candidate_cannot_read_the_archive(place: Path) -> None:
    root = place / "ds"
    archive = root / "archive"  # run --local's default
    token = uuid.uuid4().hex
    canary = place / "canary.txt"
    canary.write_text(token + "\n")
    policy = place / "policy.yaml"
    policy.write_text(NO_STATIC)

    code = thief(archive, canary)
    _dataset(root, {"thief": code})

    honest = place / "honest.json"  # fills the archive first: there is something to steal
    honest.write_text(json.dumps(make_solution(TRITON_RMS, name="honest")))
    first = cli("evaluate", "--definition", DATA / "tiny" / "rms_t.json", "--workloads",
                DATA / "tiny" / "rms_t.jsonl", "--solution", honest, "--policy", policy,
                "--backend", "process", "--archive", archive)
    assert first.returncode == 0, first.stderr
    stored = [p for p in (archive / "sha256").rglob("*") if p.is_file()]
    assert stored and all(p.stat().st_mode & 0o004 for p in stored)  # world-readable

    run = cli("run", "--local", root, "--policy", policy, "--backend", "process")
    assert run.returncode == 0, run.stderr
    (verdict,) = iter_verdicts(root)
    assert_saw_nothing(verdict, token)

    sol = place / "thief.json"
    sol.write_text(json.dumps(make_solution(code, name="thief", dps=False, language="python")))
    one = cli("evaluate", "--definition", DATA / "tiny" / "rms_t.json", "--workloads",
              DATA / "tiny" / "rms_t.jsonl", "--solution", sol, "--policy", policy, "--json",
              "--backend", "process", "--archive", archive)
    assert one.returncode == 1, one.stderr
    assert_saw_nothing(Verdict.model_validate_json(one.stdout), token)
