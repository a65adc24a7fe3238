"""``campaign run``: a real 2-round campaign with triton-params through the Triton interpreter,
killed (SIGKILL) in the middle of round 1 and resumed; every round ends in one verdict, the
state chain holds, the audit log verifies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO

pytestmark = pytest.mark.slow  # a real 2-round campaign, killed and resumed (~120 s)

WEAK = '''import triton
import triton.language as tl

BLOCK_ROWS = 2


@triton.jit
def _rms(X, W, Y, n_rows, H: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, H)
    mask = rows[:, None] < n_rows
    x = tl.load(X + rows[:, None] * H + cols[None, :], mask=mask, other=0.0)
    r = tl.rsqrt(tl.sum(x * x, axis=1) / H + 1e-6)
    w = tl.load(W + cols)
    tl.store(Y + rows[:, None] * H + cols[None, :], x * r[:, None] * w[None, :], mask=mask)


def run(x, w, y):
    n = x.shape[0]
    _rms[(triton.cdiv(n, BLOCK_ROWS),)](x, w, y, n, H=x.shape[1], BLOCK_ROWS=BLOCK_ROWS,
                                        num_warps=1)
'''
POLICY = ("name: campaign-test\nimports: {deny: []}\n"
          "static: {bandit: false, semgrep: false, ast_rules: true}\n"
          "limits: {compile_timeout_s: 60, run_timeout_s: 60}\n"
          "correctness: {trials: 1, heldout_values: [3], heldout_count: 1}\n"
          "benchmark: {warmup: 1, iterations: 4, sampled_checks: 1}\n")
RULES = ("candidates_per_round: 2\nboundary_trials: 2\n"
         "supervisor: {stall_rounds: 10, regression_factor: 1000, cycle_repeats: 5}\n")


def _setup(tmp: Path) -> list[str]:
    ds = tmp / "ds"
    (ds / "definitions").mkdir(parents=True)
    (ds / "workloads").mkdir()
    shutil.copy(DATA / "tiny" / "rms_t.json", ds / "definitions")
    shutil.copy(DATA / "tiny" / "rms_t.jsonl", ds / "workloads")
    (tmp / "start.json").write_text(json.dumps({
        "name": "weak", "definition": "rms_t", "author": "tests",
        "spec": {"language": "triton", "target_hardware": ["H100"],
                 "entry_point": "kernel.py::run"},
        "sources": [{"path": "kernel.py", "content": WEAK}]}))
    (tmp / "policy.yaml").write_text(POLICY)
    (tmp / "rules.yaml").write_text(RULES)
    return [sys.executable, "-m", "sandboxharness.cli", "campaign", "run", "--local", str(ds),
            "--definition", "rms_t", "--start", str(tmp / "start.json"),
            "--generator", "triton-params", "--rounds", "2", "--state", str(tmp / "st"),
            "--policy", str(tmp / "policy.yaml"), "--rules", str(tmp / "rules.yaml"),
            "--backend", "process", "--jobs", "2", "--seed", "7",
            "--audit-log", str(tmp / "audit.jsonl")]


def _kinds(state: Path) -> list[str]:
    try:
        return [e["kind"] for e in json.loads(state.read_text())["entries"]]
    except (OSError, ValueError):
        return []


def test_two_rounds_resume_after_sigkill_mid_round(tmp_path: Path) -> None:
    argv = _setup(tmp_path)
    env = dict(os.environ, TRITON_INTERPRET="1")
    state = tmp_path / "st" / "state.json"
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 400
    try:
        while "round_started" not in _kinds(state):  # round 1 has begun: its sweep is running
            assert proc.poll() is None, "the campaign ended before round 1 started"
            assert time.monotonic() < deadline, "round 1 never started"
            time.sleep(0.2)
        time.sleep(2.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _kinds(state)[-1] == "round_started"  # killed mid-round: no verdict for it yet

    res = subprocess.run(argv + ["--json"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode in (0, 4), res.stderr
    assert "resuming: round 1 was interrupted" in res.stderr
    entries = json.loads(state.read_text())["entries"]
    rounds = [e["body"] for e in entries if e["kind"] == "round"]
    assert [r["round"] for r in rounds] == [1, 2]  # each round ends in exactly one verdict
    assert all(r["verdict"] in ("archive", "promote", "reject") for r in rounds)
    assert "resumed" in [e["kind"] for e in entries]
    parity = [g for r in rounds for g in r["gates"] if g["name"] == "official_parity"]
    assert all(not g["passed"] and "not met" in g["message"] for g in parity)
    assert all(r["verdict"] != "promote" for r in rounds)  # never promoted on a CPU
    # every candidate is a Triton rewrite of the start: only its launch literals changed
    cands = [c for r in rounds for c in r["candidates"]]
    assert cands and any(c["correct"] for c in cands)

    status = json.loads(res.stdout)
    assert [r["round"] for r in status["rounds"]] == [1, 2] and status["ended"]
    shown = subprocess.run([sys.executable, "-m", "sandboxharness.cli", "campaign", "status",
                            "--state", str(tmp_path / "st")], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and "round 2:" in shown.stdout

    pub = next(tmp_path.glob("*.pub"))
    check = subprocess.run([sys.executable, "-m", "sandboxharness.cli", "audit", "verify",
                            str(tmp_path / "audit.jsonl"), "--public-key", str(pub)],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    events = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    round_events = [r["event"] for r in events if r.get("kind") == "campaign.round"]
    assert [e["round"] for e in round_events] == [1, 2]
    assert [e["verdict"] for e in round_events] == [r["verdict"] for r in rounds]
    assert any(r.get("kind") == "campaign.event" for r in events)

    from sandboxharness.report.load import load_campaign  # the report's rounds table

    camp = load_campaign(tmp_path / "st")
    assert camp is not None
    baseline = next(e["body"] for e in entries if e["kind"] == "baseline")
    assert [(r.round, r.verdict, r.candidates) for r in camp.rounds] == \
        [(0, "baseline", len(baseline["verdicts"]))] + \
        [(r["round"], r["verdict"], len(r["candidates"])) for r in rounds]
    assert {r.best_mean_ms for r in camp.rounds} == {baseline["best_mean_ms"]}  # no promotion
