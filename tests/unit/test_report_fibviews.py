"""`report summary` and `report best` against FlashInfer-Bench's own TraceSet on the same files:
ties, error bounds, summation order, definitions without a passing trace, hostile log text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import InputError
from sandboxharness.report import fibviews
from sandboxharness.report.load import load_input
from tests.conftest import DATA


def _trace(definition: str, solution: str, uuid: str, status: str = "PASSED", *,
           latency: float = 0.1, speedup: float = 1.0, err: float = 0.0,
           log: str = "") -> dict[str, Any]:
    ev: dict[str, Any] = {"status": status, "environment": {"hardware": "h", "libs": {}},
                          "timestamp": "2026-01-01T00:00:00Z", "log": log}
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {"max_relative_error": err, "max_absolute_error": err}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": latency, "reference_latency_ms": 1.0,
                             "speedup_factor": speedup}
    return {"definition": definition, "solution": solution, "evaluation": ev,
            "workload": {"uuid": uuid, "axes": {"b": 4},
                         "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}}


def _dataset(root: Path, traces: dict[str, list[dict[str, Any]]]) -> Path:
    (root / "definitions").mkdir(parents=True)
    for name in ("rms_t", "rms_u", "rms_v"):
        d = json.loads((DATA / "tiny" / "rms_t.json").read_text())
        d["name"] = name
        (root / "definitions" / f"{name}.json").write_text(json.dumps(d))
    (root / "workloads").mkdir()
    shutil.copy(DATA / "tiny" / "rms_t.jsonl", root / "workloads" / "rms_t.jsonl")
    for rel, lines in traces.items():
        path = root / "traces" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(t) + "\n" for t in lines))
    return root


TRACES = {
    # a file holding two definitions interleaved: FIB groups by definition before summing
    "b/mixed.jsonl": [_trace("rms_u", "u1", "a", latency=0.1, speedup=3.0),
                      _trace("rms_t", "t1", "a", latency=0.2, speedup=2.0, log="l1\nl2"),
                      _trace("rms_u", "u2", "a", latency=0.7, speedup=3.0),  # a tie: first wins
                      _trace("rms_t", "t2", "a", latency=0.3, speedup=9.0, err=0.5)],  # too wrong
    "a/first.jsonl": [_trace("rms_t", "t3", "b", "INCORRECT_NUMERICAL", err=1.0),
                      _trace("rms_t", "t4", "b", "RUNTIME_ERROR", log="boom")],
    "c.jsonl": [_trace("rms_v", "v1", "a", "COMPILE_ERROR")],
}


def _fib(root: Path) -> Any:
    data = pytest.importorskip("flashinfer_bench.data")
    return data.TraceSet.from_path(str(root))


def test_summary_equals_flashinfer_bench(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", TRACES)
    ours = fibviews.summary(load_input(root).traces)
    assert ours == _fib(root).summary()
    assert str(ours) == str(_fib(root).summary())  # the same floats, digit for digit


def test_best_equals_flashinfer_bench(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", TRACES)
    inp = load_input(root)
    fib = _fib(root)
    for name in ("rms_t", "rms_u", "rms_v"):
        ours, theirs = fibviews.best_trace(inp.traces, name), fib.get_best_trace(name)
        assert (ours.solution if ours else None) == (theirs.solution if theirs else None)
    lines = [x.text for x in fibviews.best_lines(inp.traces, list(inp.dataset.definitions))]
    assert lines == ["Best solution for rms_t:", "- Solution: t1", "- Speedup:  2.00\u00d7",
                     "- Errors:   abs=0.00e+00, rel=0.00e+00", "- Log snippet:", "  l1", "  l2",
                     "Best solution for rms_u:", "- Solution: u1", "- Speedup:  3.00\u00d7",
                     "- Errors:   abs=0.00e+00, rel=0.00e+00",
                     "No valid solution found for rms_v."]


def test_an_empty_trace_set_summary(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {})
    assert fibviews.summary(load_input(root).traces) == _fib(root).summary()


def test_log_lines_cannot_drive_the_terminal(tmp_path: Path) -> None:
    log = "\x1b[2J\x1b]0;owned\x07 cleared\nok\n3\n4\n5\n6 (sixth: not shown)"
    root = _dataset(tmp_path / "ds", {"t.jsonl": [_trace("rms_t", "t\x1b[1m", "a", log=log)]})
    inp = load_input(root)
    text = "\n".join(x.text for x in fibviews.best_lines(inp.traces, ["rms_t"]))
    assert "\x1b" not in text and "\\x1b[2J" in text and "- Solution: t\\x1b[1m" in text
    assert "sixth" not in text and text.count("\n  ") == 5


def test_a_bad_trace_line_names_its_file_and_line(tmp_path: Path) -> None:
    from sandboxharness.errors import InputError

    root = _dataset(tmp_path / "ds", {"t.jsonl": [_trace("rms_t", "t", "a")]})
    with (root / "traces" / "t.jsonl").open("a") as fh:
        fh.write('{"definition": "rms_t"}\n')
    with pytest.raises(InputError, match=r"t\.jsonl:2.*not a trace"):
        load_input(root)


def test_a_trace_file_torn_by_a_crash_still_reads(tmp_path: Path) -> None:
    """A run killed mid-append leaves a half line at the end of a trace file: the report reads
    every whole line before it (as the verdict store does) instead of refusing the dataset."""
    from sandboxharness.report.load import iter_traces

    root = _dataset(tmp_path / "ds", {})
    path = root / "traces" / "rms_t.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    whole = json.dumps(_trace("rms_t", "good", "u1")) + "\n"
    path.write_text(whole + json.dumps(_trace("rms_t", "good", "u2"))[:40])
    assert [t.workload.uuid for t in iter_traces(root)] == ["u1"]
    path.write_text(whole + "{not json}\n")  # a whole bad line is still bad input
    with pytest.raises(InputError):
        list(iter_traces(root))
