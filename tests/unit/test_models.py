"""Data models: every FlashInfer-Bench sample loads, round-trips, and bad files fail clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandboxharness.errors import InputError
from sandboxharness.intake import (
    load_definition,
    load_policy,
    load_solution,
    load_workloads,
    validate_file,
)
from sandboxharness.models import Definition, Solution
from tests.conftest import FIB, make_solution

DEFS = sorted((FIB / "definitions").rglob("*.json"))
WLS = sorted((FIB / "workloads").rglob("*.jsonl"))
SOLS = sorted((FIB / "solutions").rglob("*.json"))


def test_samples_are_present() -> None:
    assert len(DEFS) > 50 and WLS and SOLS


@pytest.mark.parametrize("path", DEFS, ids=lambda p: p.stem)
def test_definition_loads_and_round_trips(path: Path) -> None:
    raw = json.loads(path.read_text())
    d = load_definition(path)
    assert d.to_json_dict() == raw
    assert Definition.model_validate(d.to_json_dict()).content_hash() == d.content_hash()


@pytest.mark.parametrize("path", WLS, ids=lambda p: p.stem)
def test_workloads_load_and_round_trip(path: Path) -> None:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    loaded = load_workloads(path)
    assert [w.to_json_dict() for w in loaded] == lines


@pytest.mark.parametrize("path", SOLS, ids=lambda p: p.stem)
def test_solution_loads_and_round_trips(path: Path) -> None:
    raw = json.loads(path.read_text())
    s = load_solution(path)
    assert s.to_json_dict() == raw
    assert s.spec.destination_passing_style is True  # upstream default when absent


def test_content_hash_ignores_key_order_but_not_content() -> None:
    a = make_solution("def run(x, w, y):\n    pass\n")
    b = dict(reversed(list(a.items())))
    sa, sb = Solution.model_validate(a), Solution.model_validate(b)
    assert sa.content_hash() == sb.content_hash()
    a2 = make_solution("def run(x, w, y):\n    pass  \n")
    assert Solution.model_validate(a2).content_hash() != sa.content_hash()


def _sol(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    data = make_solution("def run(x, w, y):\n    pass\n")
    mutate(data)
    p = tmp_path / "s.json"
    p.write_text(json.dumps(data))
    return p


BAD_SOLUTIONS = {
    "unknown field": (lambda d: d.update(extra=1), "extra"),
    "unknown language": (lambda d: d["spec"].update(language="fortran"), "spec.language"),
    "absolute path": (lambda d: d["sources"][0].update(path="/etc/passwd"), "relative"),
    "dotdot path": (lambda d: d["sources"][0].update(path="../../x.py"), ".."),
    "entry not in sources": (lambda d: d["spec"].update(entry_point="other.py::run"), "entry"),
    "bad entry format": (lambda d: d["spec"].update(entry_point="kernel.py:run"), "entry_point"),
    "duplicate source": (lambda d: d["sources"].append(dict(d["sources"][0])), "duplicate"),
    "empty hardware": (lambda d: d["spec"].update(target_hardware=[]), "target_hardware"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOLUTIONS))
def test_bad_solution_gives_one_clear_line(tmp_path: Path, case: str) -> None:
    mutate, needle = BAD_SOLUTIONS[case]
    p = _sol(tmp_path, mutate)
    with pytest.raises(InputError) as exc:
        load_solution(p)
    msg = str(exc.value)
    assert "\n" not in msg and str(p) in msg and needle in msg
    assert exc.value.exit_code == 2


def test_reference_without_run_is_rejected(tmp_path: Path, tiny_def_path: Path) -> None:
    data = json.loads(tiny_def_path.read_text())
    data["reference"] = "def forward(x, w):\n    return x\n"
    p = tmp_path / "d.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match="no top-level function 'run'"):
        load_definition(p)


def test_shape_naming_unknown_axis_is_rejected(tmp_path: Path, tiny_def_path: Path) -> None:
    data = json.loads(tiny_def_path.read_text())
    data["inputs"]["x"]["shape"] = ["b", "nope"]
    p = tmp_path / "d.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match="unknown axis 'nope'"):
        load_definition(p)


def test_malformed_json_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"name": ')
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        load_solution(p)
    with pytest.raises(InputError, match="no such file"):
        load_solution(tmp_path / "missing.json")


def test_workload_line_errors_name_the_line(tmp_path: Path, tiny_wl_path: Path) -> None:
    lines = tiny_wl_path.read_text().splitlines()
    p = tmp_path / "w.jsonl"
    p.write_text(lines[0] + "\n" + lines[1].replace('"random"', '"gaussian"') + "\n")
    with pytest.raises(InputError) as exc:
        load_workloads(p)
    assert f"{p}:2" in str(exc.value)


def test_safetensors_path_must_stay_relative(tmp_path: Path) -> None:
    line = {"definition": "d", "workload": {"uuid": "u", "axes": {}, "inputs": {
        "x": {"type": "safetensors", "path": "../../etc/x.safetensors", "tensor_key": "x"}}}}
    p = tmp_path / "w.jsonl"
    p.write_text(json.dumps(line) + "\n")
    with pytest.raises(InputError, match="relative"):
        load_workloads(p)


def test_shipped_policies_validate() -> None:
    for p in (Path(__file__).parents[2] / "policies").glob("*.yaml"):
        pol = load_policy(p)
        assert pol.content_hash().startswith("sha256:")
        assert validate_file(p) == "policy"


def test_bad_policy_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: x\ncorrectness: {trials: 0}\n")
    with pytest.raises(InputError, match="correctness.trials"):
        load_policy(p)
    p.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="invalid YAML"):
        load_policy(p)
    p.write_text("name: x\nlanguages: []\n")
    with pytest.raises(InputError, match="empty list"):
        load_policy(p)


@given(st.text(min_size=1, max_size=40))
def test_source_paths_never_escape(path: str) -> None:
    data = make_solution("x = 1\n")
    data["sources"][0]["path"] = path
    data["spec"]["entry_point"] = f"{path}::run"
    try:
        s = Solution.model_validate(data)
    except Exception:  # noqa: BLE001  rejection is fine; acceptance must be safe
        return
    p = s.sources[0].path
    assert not p.startswith("/") and ".." not in p.split("/") and "\x00" not in p


def test_trace_evaluation_rejects_impossible_states() -> None:
    from pydantic import ValidationError

    from sandboxharness.models.trace import Correctness, Evaluation, Performance, TraceEnvironment

    env = TraceEnvironment(hardware="cpu")
    Evaluation(status="PASSED", environment=env, timestamp="t", correctness=Correctness(),
               performance=Performance())
    with pytest.raises(ValidationError):
        Evaluation(status="PASSED", environment=env, timestamp="t", correctness=Correctness())
    with pytest.raises(ValidationError):
        Evaluation(status="RUNTIME_ERROR", environment=env, timestamp="t",
                   correctness=Correctness())
