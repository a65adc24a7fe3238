"""A harness limit hit by the definition's reference is the harness's problem (exit 3, the
limit named), never bad input (exit 2) and never the candidate's fault."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import make_solution

REFERENCE = ("import torch\n"
             "def run(x):\n"
             "    hog = torch.ones(3 * 2**30, dtype=torch.uint8)  # 3 GB, over the limit\n"
             "    return x + float(hog[0]) - 1.0\n")


def test_reference_killed_by_the_memory_limit_is_infrastructure(tmp_path: Path) -> None:
    d = {"name": "hog", "op_type": "copy", "axes": {"n": {"type": "const", "value": 8}},
         "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": REFERENCE}
    (tmp_path / "d.json").write_text(json.dumps(d))
    (tmp_path / "w.jsonl").write_text(json.dumps(
        {"definition": "hog", "solution": None, "evaluation": None,
         "workload": {"uuid": "u1", "axes": {}, "inputs": {"x": {"type": "random"}}}}) + "\n")
    sol = make_solution("def run(x):\n    return x.clone()\n", dps=False, language="python",
                        definition="hog")
    (tmp_path / "s.json").write_text(json.dumps(sol))
    policy = {"name": "tight", "static": {"bandit": False, "semgrep": False, "ast_rules": False},
              "imports": {"deny": []}, "limits": {"memory_mb": 1024, "run_timeout_s": 60},
              "correctness": {"trials": 1, "heldout_values": []},
              "benchmark": {"warmup": 0, "iterations": 2, "sampled_checks": 0}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    proc = subprocess.run(
        [sys.executable, "-m", "sandboxharness.cli", "evaluate", "--definition",
         str(tmp_path / "d.json"), "--solution", str(tmp_path / "s.json"), "--workloads",
         str(tmp_path / "w.jsonl"), "--policy", str(tmp_path / "p.yaml")],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "harness limit" in lines[0] and "memory" in lines[0], lines
