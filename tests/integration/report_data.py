"""One real dataset run for the report tests (built once per test process): two definitions,
five candidates on CPU through `run --local`, one of them with markup in its name and author."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA, REPO, make_solution

GOOD = """import torch
def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
"""
WRONG = """import torch
def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
"""
SHELL = """import os
def run(x, w):
    os.system("id")
    return x
"""
POLICY = ("name: report-test\nimports: {deny: []}\n"
          "static: {bandit: false, semgrep: false, ast_rules: true}\n"
          "limits: {compile_timeout_s: 60, run_timeout_s: 60}\n"
          "correctness: {trials: 1, heldout_values: [3], heldout_count: 1}\n"
          "benchmark: {warmup: 1, iterations: 4, sampled_checks: 1}\n")
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_AUTHOR = '"><svg onload=alert(2)>'
SOLUTIONS = {  # file stem: (definition, name, author, code)
    "good": ("rms_t", "good", "alice", GOOD),
    "wrong": ("rms_t", "wrong", "bob", WRONG),
    "shell": ("rms_t", "shell", "bob", SHELL),
    "hostile": ("rms_t", HOSTILE_NAME, HOSTILE_AUTHOR, GOOD),
    "wrong_u": ("rms_u", "wrong_u", "carol", WRONG),
}
WORKLOADS = 2
_BUILT: dict[str, Path] = {}


def cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def shx(*args: str) -> subprocess.CompletedProcess[str]:
    """The same CLI in this process (typer's runner): no interpreter start per call."""
    from typer.testing import CliRunner

    from sandboxharness.cli.main import app

    res = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(list(args), res.exit_code, res.stdout, res.stderr)


def _layout(root: Path) -> None:
    for name in ("rms_t", "rms_u"):
        d = json.loads((DATA / "tiny" / "rms_t.json").read_text())
        d["name"] = name
        (root / "definitions" / "rmsnorm").mkdir(parents=True, exist_ok=True)
        (root / "definitions" / "rmsnorm" / f"{name}.json").write_text(json.dumps(d))
        (root / "workloads" / "rmsnorm").mkdir(parents=True, exist_ok=True)
        lines = (DATA / "tiny" / "rms_t.jsonl").read_text().replace('"rms_t"', f'"{name}"')
        (root / "workloads" / "rmsnorm" / f"{name}.jsonl").write_text(lines)
    for stem, (definition, name, author, code) in SOLUTIONS.items():
        doc = make_solution(code, name=name, dps=False, language="python",
                            definition=definition)
        doc["author"] = author
        (root / "solutions" / definition).mkdir(parents=True, exist_ok=True)
        (root / "solutions" / definition / f"{stem}.json").write_text(json.dumps(doc))


def report_dataset(base: Path) -> Path:
    """The dataset root after a real run (and its audit log at ``base/audit.jsonl``)."""
    if "root" in _BUILT:
        return _BUILT["root"]
    root = base / "ds"
    shutil.rmtree(root, ignore_errors=True)
    _layout(root)
    (base / "policy.yaml").write_text(POLICY)
    res = cli("run", "--local", str(root), "--policy", str(base / "policy.yaml"), "--backend",
              "process", "--jobs", "2", "--seed", "5", "--json",
              "--audit-log", str(base / "audit.jsonl"))
    assert res.returncode == 0, res.stderr
    _BUILT["root"] = root
    return root
