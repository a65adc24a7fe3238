"""Generators: triton-params (AST-checked literal rewrites) and command (the user's agent)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from sandboxharness.api import default_policy
from sandboxharness.generators import Generator, GeneratorError
from sandboxharness.generators.command import CommandGenerator
from sandboxharness.generators.triton_params import TritonParamsGenerator
from sandboxharness.generators.tune_sites import RewriteError, Site, find_sites, rewrite, step
from sandboxharness.intake import load_definition
from sandboxharness.loop.bundle import build_task_bundle
from sandboxharness.loop.state import candidate_key
from sandboxharness.models import Solution
from sandboxharness.profile.signature import Signature
from tests.conftest import DATA, REPO, TRITON_RMS, make_solution

SRC = json.loads((REPO / "kernels/solutions/rmsnorm_h128/triton_dps.json").read_text())
BEST = Solution.model_validate(SRC)
DEF = load_definition(REPO / "kernels/definitions/rmsnorm_h128.json")


def bundle(moves: dict[str, str] | None = None, sig: Signature | None = None) -> object:
    return build_task_bundle(DEF, default_policy(), best=BEST, round=1,
                             direction={"id": "t", "moves": moves or {}},
                             signatures={"all": sig} if sig else {})


def test_sites_are_the_block_constant_and_launch_insertions() -> None:
    sites = find_sites("main.py", BEST.sources[0].content)
    assert [(s.name, s.value, s.insert) for s in sites] == [
        ("BLOCK_ROWS", 16, False), ("num_warps", 4, True), ("num_stages", 3, True)]


def test_a_rewrite_changes_only_the_literals() -> None:
    text = BEST.sources[0].content
    sites = find_sites("main.py", text)
    new = rewrite(text, sites, {sites[0].id: 64, sites[1].id: 8})
    assert "BLOCK_ROWS = 64" in new and "num_warps=8)" in new
    assert new.replace("BLOCK_ROWS = 64", "BLOCK_ROWS = 16").replace(", num_warps=8", "") == text
    ast.parse(new)


def test_a_rewrite_touching_anything_but_a_literal_is_refused() -> None:
    """A site pointing at a name (not a literal) would change code: refused."""
    text = BEST.sources[0].content
    at = text.encode().index(b"n_rows, hidden")
    fake = Site("main.py", "block", "BLOCK_ROWS", 1, at, at + len("n_rows"))
    with pytest.raises(RewriteError):
        rewrite(text, [fake], {fake.id: 64})


def test_ladder_steps() -> None:
    assert step(16, "block", 1) == 32 and step(16, "block", -1, 2) == 4
    assert step(6, "block", 1) == 8 and step(6, "block", -1) == 4
    assert step(32, "num_warps", 1) is None and step(1, "num_stages", -1) is None


def test_propose_follows_the_direction_and_never_repeats() -> None:
    gen = TritonParamsGenerator()
    assert isinstance(gen, Generator)
    first = gen.propose(bundle({"block": "up"}), 3)  # type: ignore[arg-type]
    assert len(first) == 3 and "BLOCK_ROWS=32" in first[0].description
    again = gen.propose(bundle({"block": "up"}), 3)  # type: ignore[arg-type]
    keys = {candidate_key(s) for s in first}
    assert not keys & {candidate_key(s) for s in again}
    for s in first + again:
        assert s.definition == BEST.definition and s.spec == BEST.spec
        Solution.model_validate(s.model_dump(mode="json"))


def test_a_direction_picked_again_goes_further_then_says_it_has_nothing_new() -> None:
    """After an archive the controller picks the same direction from the same best: the search
    steps further along the ladder, and once every move was proposed it raises (the
    interface's contract) instead of returning nothing, so the round records why."""
    gen = TritonParamsGenerator()
    first = gen.propose(bundle({"block": "up"}), 3)  # type: ignore[arg-type]
    assert [s.description.split(" (")[0] for s in first] == [
        "launch parameters BLOCK_ROWS=32", "launch parameters BLOCK_ROWS=64",
        "launch parameters BLOCK_ROWS=8"]
    again = gen.propose(bundle({"block": "up"}), 2)  # type: ignore[arg-type]
    assert [s.description.split(" (")[0] for s in again] == [
        "launch parameters BLOCK_ROWS=128", "launch parameters BLOCK_ROWS=256"]
    stages = TritonParamsGenerator()
    got = stages.propose(bundle({"num_stages": "up"}), 8)  # type: ignore[arg-type]
    assert [s.description.split(" (")[0] for s in got] == [
        "launch parameters num_stages=4", "launch parameters num_stages=5",
        "launch parameters num_stages=2", "launch parameters num_stages=6"]
    with pytest.raises(GeneratorError, match="proposed already"):
        stages.propose(bundle({"num_stages": "up"}), 1)  # type: ignore[arg-type]


def test_the_signature_demotes_moves_it_argues_against() -> None:
    sig = Signature(kernel="k", duration_us=50.0, bottleneck="latency",
                    limiter="occupancy:registers", registers_per_thread=255)
    gen = TritonParamsGenerator()
    got = gen.propose(bundle({"block": "up", "num_warps": "down"}, sig), 2)  # type: ignore[arg-type]
    assert all("BLOCK_ROWS=32" not in s.description for s in got)


def test_a_solution_that_is_not_triton_is_refused() -> None:
    torch_sol = make_solution("def run(x, w):\n    return x\n", language="python")
    b = build_task_bundle(load_definition(DATA / "tiny" / "rms_t.json"), default_policy(),
                          best=torch_sol)
    with pytest.raises(GeneratorError, match="tunes Triton"):
        TritonParamsGenerator().propose(b, 2)


AGENT = """import json, os, pathlib, sys
out = pathlib.Path(os.environ["SHX_OUT_DIR"])
task = json.loads(pathlib.Path(sys.argv[1]).read_text())
sol = task["best_solution"]
for i in range(3):
    d = dict(sol, name=f"agent{i}")
    d["sources"] = [dict(sol["sources"][0], content=sol["sources"][0]["content"] + f"# v{i}\\n")]
    (out / f"s{i}.json").write_text(json.dumps(d))
(out / "bad.json").write_text('{"name": 1}')
(out / "notes.txt").write_text("claims: 100x faster")
os.symlink("/etc/passwd", out / "link.json")
"""


def test_the_command_generator_reads_back_only_valid_solution_files(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    gen = CommandGenerator([sys.executable, str(script), "{bundle}"], tmp_path / "w",
                           timeout_s=60)
    b = build_task_bundle(load_definition(DATA / "tiny" / "rms_t.json"), default_policy(),
                          best=make_solution(TRITON_RMS), round=1)
    got = gen.propose(b, 2)
    assert [s.name for s in got] == ["agent0", "agent1"]
    assert any("link.json: not a regular" in n for n in gen.notes)
    assert any("bad.json" in n for n in gen.notes)
    assert any("notes.txt" in n for n in gen.notes)


def test_the_command_generator_is_time_bounded_and_says_when_nothing_came(tmp_path: Path
                                                                          ) -> None:
    b = build_task_bundle(load_definition(DATA / "tiny" / "rms_t.json"), default_policy(),
                          best=make_solution(TRITON_RMS), round=2)
    slow = CommandGenerator([sys.executable, "-c", "import time; time.sleep(60)"],
                            tmp_path / "w", timeout_s=1)
    with pytest.raises(GeneratorError, match="timed out after 1 s"):
        slow.propose(b, 1)
    empty = CommandGenerator([sys.executable, "-c", "print('done')"], tmp_path / "w")
    with pytest.raises(GeneratorError, match="wrote no usable solution"):
        empty.propose(b, 1)
