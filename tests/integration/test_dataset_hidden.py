"""Attack: during ``run --local`` a candidate reads the dataset it is part of: the other
candidates' sources (to copy the best kernel), their traces, and the stored verdicts, whose
messages name the run's held-out sizes (shared by every candidate of a definition in one run).

The dataset is kept inside the repository here, which the worker otherwise sees read-only; a
canary beside it shows that the place itself is visible. The spy runs after an honest
candidate (``--jobs 1``, names in order), so traces and verdicts exist when it looks."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxharness.dataset.verdictstore import iter_verdicts
from tests.conftest import REPO
from tests.integration.test_archive_hidden import NO_STATIC, cli
from tests.integration.test_run_local import GOOD, _dataset

pytestmark = pytest.mark.slow  # a real dataset run of two candidates (~20 s)


def spy(root: Path, canary: Path) -> str:
    return (
        "import os\n\n"
        "def run(x, w):\n"
        "    seen = []\n"
        "    for sub in ('solutions', 'traces', 'verdicts', 'archive'):\n"
        f"        for d, _, files in os.walk(os.path.join({str(root)!r}, sub)):\n"
        f"            seen += [os.path.relpath(os.path.join(d, f), {str(root)!r}) "
        "for f in files]\n"
        f"    with open({str(canary)!r}) as fh:\n"
        "        raise RuntimeError('seen: [' + ','.join(sorted(seen)) + '] canary '\n"
        "                           + fh.read().strip())\n")


@pytest.fixture
def place() -> Iterator[Path]:
    keep = REPO / ".pytest_cache" / f"shx-dataset-{uuid.uuid4().hex[:8]}"
    keep.mkdir(parents=True)
    try:
        yield keep
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def test_candidate_cannot_read_the_dataset_it_is_run_from(place: Path) -> None:
    root = place / "ds"
    token = uuid.uuid4().hex
    canary = place / "canary.txt"
    canary.write_text(token + "\n")
    policy = place / "policy.yaml"
    policy.write_text(NO_STATIC)
    _dataset(root, {"aaa_honest": GOOD, "zzz_spy": spy(root, canary)})
    res = cli("run", "--local", root, "--policy", policy, "--backend", "process", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    verdicts = {v.candidate.name: v for v in iter_verdicts(root)}
    assert verdicts["aaa_honest"].decision == "promote"
    assert (root / "traces").is_dir() and (root / "archive").is_dir()  # there to be seen
    got = verdicts["zzz_spy"]
    assert got.decision == "reject" and [r.code.value for r in got.reasons] == ["RUNTIME_ERROR"]
    message = got.reasons[0].message
    assert f"seen: [] canary {token}" in message, message
