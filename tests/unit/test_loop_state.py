"""Campaign state: hash-chained, append-only, atomic; a broken state is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxharness.errors import InputError
from sandboxharness.loop.state import CampaignState, candidate_key
from sandboxharness.models import Solution
from tests.conftest import REPO, TRITON_RMS, make_solution


def _state(tmp_path: Path) -> CampaignState:
    st = CampaignState.open(tmp_path / "st")
    st.append("campaign", {"definition": "rms_t", "n": 1})
    st.append("round_started", {"round": 1})
    st.append("round", {"round": 1, "verdict": "reject"})
    return st


def test_history_round_trips_and_chains(tmp_path: Path) -> None:
    st = _state(tmp_path)
    again = CampaignState.open(tmp_path / "st")
    assert again.entries == st.entries and again.head == st.head
    assert [e["prev"] for e in again.entries[1:]] == [e["hash"] for e in again.entries[:-1]]
    assert not list((tmp_path / "st").glob(".state.json.*"))  # no temporary file left


@pytest.mark.parametrize("damage", ["edit_body", "drop_middle", "reorder", "head", "junk"])
def test_a_damaged_history_is_refused_naming_what(tmp_path: Path, damage: str) -> None:
    _state(tmp_path)
    path = tmp_path / "st" / "state.json"
    doc = json.loads(path.read_text())
    if damage == "edit_body":
        doc["entries"][2]["body"]["verdict"] = "promote"
    elif damage == "drop_middle":
        del doc["entries"][1]
    elif damage == "reorder":
        doc["entries"][1], doc["entries"][2] = doc["entries"][2], doc["entries"][1]
    elif damage == "head":
        doc["head"] = doc["entries"][1]["hash"]
    path.write_text("{not json" if damage == "junk" else json.dumps(doc))
    with pytest.raises(InputError) as exc:
        CampaignState.open(tmp_path / "st")
    assert "state.json" in str(exc.value) and "\n" not in str(exc.value)


def test_truncating_the_tail_consistently_still_needs_the_head(tmp_path: Path) -> None:
    """Dropping the last entry without fixing 'head' is caught: the head names it."""
    _state(tmp_path)
    path = tmp_path / "st" / "state.json"
    doc = json.loads(path.read_text())
    doc["entries"].pop()
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="head does not match"):
        CampaignState.open(tmp_path / "st")


def test_stored_solutions_are_checked_against_their_hash(tmp_path: Path) -> None:
    st = _state(tmp_path)
    sol = Solution.model_validate(make_solution(TRITON_RMS))
    key = st.store_solution(sol)
    assert key == candidate_key(sol) and st.load_solution(key).sources == sol.sources
    path = tmp_path / "st" / "solutions" / (key.removeprefix("sha256:") + ".json")
    doc = json.loads(path.read_text())
    doc["sources"][0]["content"] += "\n# changed\n"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="does not match its hash"):
        st.load_solution(key)


def test_candidate_key_ignores_name_author_and_description() -> None:
    a = Solution.model_validate(make_solution(TRITON_RMS, name="a"))
    b = a.model_copy(update={"name": "b", "author": "x", "description": "claims"})
    c = Solution.model_validate(make_solution(TRITON_RMS + "\n", name="a"))
    assert candidate_key(a) == candidate_key(b) != candidate_key(c)


def test_campaign_commands_answer_a_broken_state_with_one_line_exit_2(tmp_path: Path) -> None:
    _state(tmp_path)
    path = tmp_path / "st" / "state.json"
    doc = json.loads(path.read_text())
    doc["entries"][0]["body"]["definition"] = "other"
    path.write_text(json.dumps(doc))
    res = subprocess.run([sys.executable, "-m", "sandboxharness.cli", "campaign", "status",
                          "--state", str(tmp_path / "st")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "entry 0's hash does not match" in res.stderr
