"""The CLI as users run it: real processes, exit codes, one-line errors, JSON verdicts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TRITON_RMS

CLI = [sys.executable, "-m", "sandboxharness.cli"]


def sh(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.fixture
def fast_policy_file(tmp_path: Path) -> Path:
    text = (REPO / "policies" / "default.yaml").read_text()
    text = text.replace("trials: 3", "trials: 2").replace("iterations: 10", "iterations: 4")
    p = tmp_path / "fast.yaml"
    p.write_text(text)
    return p


def test_honest_solution_promoted_json(tiny_def_path, tiny_wl_path, write_solution,
                                       fast_policy_file, tmp_path) -> None:
    sol = write_solution(TRITON_RMS)
    trace = tmp_path / "trace.jsonl"
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution", sol, "--workloads",
              tiny_wl_path, "--policy", fast_policy_file, "--json", "--trace-out", trace)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    v = json.loads(proc.stdout)
    assert v["decision"] == "promote" and v["reasons"] == []
    assert {s["stage"] for s in v["stages"]} >= {"static", "compile", "correctness", "benchmark"}
    assert v["policy"]["sha256"].startswith("sha256:")
    traces = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(traces) == 2 and all(t["evaluation"]["status"] == "PASSED" for t in traces)
    assert traces[0]["evaluation"]["performance"]["latency_ms"] > 0


def test_forbidden_solution_rejected_with_reason(tiny_def_path, tiny_wl_path, write_solution,
                                                 fast_policy_file) -> None:
    code = "import subprocess\n" + TRITON_RMS.replace(
        "def run(x, w, y):\n", "def run(x, w, y):\n    subprocess.run(['id'])\n")
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution", write_solution(code),
              "--workloads", tiny_wl_path, "--policy", fast_policy_file, "--json")
    assert proc.returncode == 1, proc.stderr
    v = json.loads(proc.stdout)
    assert v["decision"] == "reject"
    assert {r["code"] for r in v["reasons"]} & {"POLICY_IMPORT", "STATIC_FINDING"}
    assert all({"code", "stage", "message"} <= set(r) for r in v["reasons"])
    compile_stage = next(s for s in v["stages"] if s["stage"] == "compile")
    assert compile_stage["status"] == "skipped"  # nothing of it ever ran


def test_human_output_shows_decision(tiny_def_path, tiny_wl_path, write_solution,
                                     fast_policy_file) -> None:
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution",
              write_solution("def run(x, w, y):\n    y.fill_(0.0)\n", language="python"),
              "--workloads", tiny_wl_path, "--policy", fast_policy_file)
    assert proc.returncode == 1
    assert "REJECT" in proc.stdout and "INCORRECT_NUMERICAL" in proc.stdout


def test_bad_inputs_exit_2_with_one_line(tmp_path, tiny_def_path, tiny_wl_path,
                                         write_solution) -> None:
    sol = write_solution(TRITON_RMS)
    assert_one_line_error(sh("evaluate", "--definition", tmp_path / "nope.json", "--solution",
                             sol, "--workloads", tiny_wl_path), 2, "no such file")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert_one_line_error(sh("evaluate", "--definition", tiny_def_path, "--solution", bad,
                             "--workloads", tiny_wl_path), 2, "invalid JSON")
    other = write_solution(TRITON_RMS, name="other", definition="something_else")
    assert_one_line_error(sh("evaluate", "--definition", tiny_def_path, "--solution", other,
                             "--workloads", tiny_wl_path), 2, "something_else")
    pol = tmp_path / "p.yaml"
    pol.write_text("name: p\nunknown_knob: 1\n")
    assert_one_line_error(sh("evaluate", "--definition", tiny_def_path, "--solution", sol,
                             "--workloads", tiny_wl_path, "--policy", pol), 2, "unknown_knob")


def test_missing_safetensors_blob_is_a_clear_error(tmp_path, tiny_def_path, write_solution) -> None:
    line = {"definition": "rms_t", "solution": None, "evaluation": None, "workload": {
        "uuid": "u1", "axes": {"b": 2}, "inputs": {
            "x": {"type": "safetensors", "path": "blob/x.safetensors", "tensor_key": "x"},
            "w": {"type": "random"}}}}
    wl = tmp_path / "w.jsonl"
    wl.write_text(json.dumps(line) + "\n")
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution",
              write_solution(TRITON_RMS), "--workloads", wl, "--blob-root", tmp_path)
    assert_one_line_error(proc, 2, "blob")


def test_cuda_solution_without_gpu_is_an_infrastructure_error(tiny_def_path, tiny_wl_path,
                                                               write_solution) -> None:
    sol = write_solution("__global__ void k() {}", language="cuda")
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution", sol, "--workloads",
              tiny_wl_path)
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    assert_one_line_error(proc, 3, "need a CUDA device")


def test_validate_reports_each_file(tmp_path, tiny_def_path, tiny_wl_path) -> None:
    ok = sh("validate", tiny_def_path, tiny_wl_path, REPO / "policies" / "default.yaml")
    assert ok.returncode == 0 and ok.stdout.count("ok:") == 3
    bad = tmp_path / "d.json"
    bad.write_text(json.dumps({"name": "x", "axes": {}, "inputs": {}, "outputs": {},
                               "reference": "x=1", "op_type": "t"}))
    proc = sh("validate", tiny_def_path, bad)
    assert proc.returncode == 2 and "ok:" in proc.stdout and str(bad) in proc.stderr


def test_help_everywhere() -> None:
    for cmd in ([], ["evaluate"], ["scan"], ["validate"], ["examples"]):
        proc = sh(*cmd, "--help")
        assert proc.returncode == 0 and "Usage" in proc.stdout


# -- output that is not a terminal, and the examples command's bad input -------------------

def _no_static_policy(tmp_path: Path) -> Path:
    """The default policy without bandit/semgrep (the import policy still runs): seconds."""
    text = (REPO / "policies" / "default.yaml").read_text()
    p = tmp_path / "no-static.yaml"
    p.write_text(text.replace("bandit: true", "bandit: false")
                 .replace("semgrep: true", "semgrep: false").replace("trials: 3", "trials: 1"))
    return p


def test_long_reason_is_one_whole_line_when_not_a_tty(tiny_def_path, tiny_wl_path,
                                                      write_solution, tmp_path) -> None:
    """A pipe or CI log got rich's 80-column table: reasons folded inside words, cut at 160."""
    name = "x" * 40 + "_" + "y" * 200  # one 250-character word
    sol = write_solution(f"from pickle import {name}\n" + TRITON_RMS)
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution", sol, "--workloads",
              tiny_wl_path, "--policy", _no_static_policy(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "POLICY_IMPORT:" in line]
    assert len(lines) == 1, proc.stdout
    assert lines[0].endswith(f"imports pickle.{name} (policy denies 'pickle')"), lines[0]
    assert all(len(line) < 200 for line in proc.stdout.splitlines()
               if name not in line)  # and short lines are not padded to the wide console
    assert proc.stdout.splitlines()[-1] == "decision: REJECT  (POLICY_IMPORT, STATIC_FINDING)"


@pytest.mark.slow
def test_candidate_text_cannot_style_or_add_lines(tiny_def_path, tiny_wl_path, write_solution,
                                                  tmp_path) -> None:
    """Output spoofing: a candidate's exception message with rich markup and a newline could
    hide text or print a "decision: PROMOTE" line of its own in the human verdict."""
    msg = "z" * 150 + " [bold]styled[/bold]\\ndecision: PROMOTE"
    sol = write_solution(f'def run(x, w, y):\n    raise RuntimeError("{msg}")\n',
                         language="python")
    proc = sh("evaluate", "--definition", tiny_def_path, "--solution", sol, "--workloads",
              tiny_wl_path, "--policy", _no_static_policy(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert [line for line in out if line.startswith("decision:")] == [
        "decision: REJECT  (RUNTIME_ERROR)"]
    hit = [line for line in out if "RUNTIME_ERROR:" in line]
    assert len(hit) == 1 and hit[0].endswith(msg), proc.stdout  # literal, whole, one line


def test_examples_without_manifest_is_one_line_exit_2(tmp_path) -> None:
    assert_one_line_error(sh("examples", "--kernels", tmp_path), 2,
                          f"{tmp_path}: no examples.json manifest")
    assert_one_line_error(sh("examples", "--kernels", tmp_path / "nope"), 2, "no such folder")
    (tmp_path / "examples.json").write_text('{"examples": [{"solution": 1}]}')
    assert_one_line_error(sh("examples", "--kernels", tmp_path), 2, "examples.json: expected")
