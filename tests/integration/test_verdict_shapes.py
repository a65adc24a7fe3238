"""The examples' verdicts keep their shape across refactors: decision, every reason (code
and stage) and every stage (status, and why it was skipped), compared with the shapes
recorded before the stage interface was introduced (issue 14).

Regenerate only for an intended behaviour change:
``python -m tests.integration.test_verdict_shapes > tests/data/verdict_shapes/examples.json``
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from sandboxharness import evaluate_files
from tests.conftest import REPO

KERNELS = REPO / "kernels"
GOLDEN = REPO / "tests" / "data" / "verdict_shapes" / "examples.json"
EXAMPLES = json.loads((KERNELS / "examples.json").read_text())["examples"]


def shape(item: dict[str, Any]) -> dict[str, Any]:
    v = evaluate_files(KERNELS / item["definition"], KERNELS / item["solution"],
                       KERNELS / item["workloads"], seed=3)
    return {
        "decision": v.decision,
        "reasons": [[r.code.value, r.stage.value] for r in v.reasons],
        "stages": [[s.stage.value, s.status, s.details.get("reason") if s.status == "skipped"
                    else None] for s in v.stages],
    }


@pytest.mark.slow
@pytest.mark.parametrize("item", EXAMPLES, ids=lambda i: i["solution"])
def test_example_verdict_keeps_its_shape(item: dict[str, Any]) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert item["solution"] in golden, "a new example: regenerate the shapes (module doc)"
    assert shape(item) == golden[item["solution"]]


if __name__ == "__main__":
    json.dump({i["solution"]: shape(i) for i in EXAMPLES}, sys.stdout, indent=1)
    print()
