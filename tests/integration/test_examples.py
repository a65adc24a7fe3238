"""The example solutions in kernels/: honest ones promoted, wrong and forbidden ones rejected
with the expected reason codes — through the library API and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from sandboxharness import evaluate_files
from tests.conftest import REPO

KERNELS = REPO / "kernels"
EXAMPLES = json.loads((KERNELS / "examples.json").read_text())["examples"]


def _id(item: dict[str, Any]) -> str:
    return item["solution"].removeprefix("solutions/").removesuffix(".json")


def test_every_definition_has_honest_wrong_and_forbidden() -> None:
    kinds: dict[str, set[str]] = {}
    for item in EXAMPLES:
        kinds.setdefault(item["definition"], set()).add(item["kind"])
    assert len(kinds) >= 3
    assert all({"honest", "wrong", "forbidden"} <= k for k in kinds.values()), kinds


@pytest.mark.slow
@pytest.mark.parametrize("item", EXAMPLES, ids=_id)
def test_example_verdict_through_the_library(item: dict[str, Any]) -> None:
    v = evaluate_files(KERNELS / item["definition"], KERNELS / item["solution"],
                       KERNELS / item["workloads"], seed=3)
    codes = {r.code.value for r in v.reasons}
    assert v.decision == item["expect"], [r.message for r in v.reasons]
    if item["codes"]:
        assert set(item["codes"]) <= codes or codes & set(item.get("also_acceptable", [])), codes


@pytest.mark.slow
def test_examples_command_matches_every_expectation() -> None:
    proc = subprocess.run([sys.executable, "-m", "sandboxharness.cli", "examples", "--json"],
                          capture_output=True, text=True, timeout=1800)
    rows = json.loads(proc.stdout)
    assert proc.returncode == 0, [r for r in rows if not r["ok"]]
    assert len(rows) == len(EXAMPLES) and all(r["ok"] for r in rows)


def test_generated_corpus_is_up_to_date() -> None:
    """kernels/*.json are generated from kernels/src: a hand edit to either side shows here."""
    proc = subprocess.run([sys.executable, "-m", "tools.build_corpus", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
