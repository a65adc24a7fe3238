"""Escape suite helpers: real attacks through the real pipeline, per sandbox backend.

Static analysis is off in the escape policy, so every attack reaches the sandbox. Each
attack kernel performs its attack without swallowing errors and then computes the correct
``y = x + 1``: a blocked attack therefore surfaces as a reject reason (RUNTIME_ERROR,
WORKER_PROTOCOL, RESOURCE_LIMIT, TIMEOUT), and an attack that got through is promoted,
which the tests treat as failure (besides checking the host for its effects).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandboxharness.models import Policy, Verdict
from sandboxharness.sandbox import Sandbox

ATTACKS = Path(__file__).resolve().parent / "attacks"
REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 6.0
BOUND_S = 15.0
"""The harness must be back within the run timeout plus this (start-up, teardown)."""

ESCAPE_POLICY = Policy.model_validate({
    "name": "escape",
    "languages": ["python"],
    "static": {"bandit": False, "semgrep": False, "ast_rules": False},
    "limits": {"compile_timeout_s": 30, "run_timeout_s": RUN_TIMEOUT_S, "memory_mb": 2048,
               "cpu_time_s": 60, "max_processes": 64, "max_open_files": 256,
               "max_file_size_mb": 16, "max_log_bytes": 16384},
    "correctness": {"trials": 1, "max_workloads": 1, "heldout_values": []},
    "benchmark": {"iterations": 2, "warmup": 0, "sampled_checks": 0},
})


@dataclass
class Outcome:
    verdict: Verdict
    elapsed_s: float
    sandbox: Sandbox

    @property
    def codes(self) -> set[str]:
        return {r.code.value for r in self.verdict.reasons}

    @property
    def text(self) -> str:
        """Everything the verdict records (messages, log tails): where a leak would show."""
        return self.verdict.model_dump_json()

    def rejected_with(self, *allowed: str) -> None:
        assert self.verdict.decision == "reject", (
            f"attack was PROMOTED (it got through): {self.text[:3000]}")
        assert self.codes & set(allowed), (
            f"expected one of {allowed}, got {self.codes}: "
            f"{[r.message for r in self.verdict.reasons]}")
        assert self.elapsed_s < RUN_TIMEOUT_S + BOUND_S, f"harness took {self.elapsed_s:.1f} s"


Runner = Callable[..., Outcome]


def attack_source(name: str, **params: str) -> str:
    code = (ATTACKS / f"{name}.py").read_text()
    for key, value in params.items():
        token = f"__{key.upper()}__"
        assert token in code, f"{name}.py has no {token}"
        code = code.replace(token, value)
    return code


def solution_file(tmp: Path, code: str, name: str) -> Path:
    sol = {"name": name, "definition": "plus_one", "author": "escape-suite",
           "spec": {"language": "python", "target_hardware": ["H100"],
                    "entry_point": "kernel.py::run", "destination_passing_style": False},
           "sources": [{"path": "kernel.py", "content": code}]}
    path = tmp / f"{name}-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(sol))
    return path


def processes_of(uids: set[int]) -> list[int]:
    """Host pids running as one of ``uids``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) in uids:
                found.append(int(entry.name))
    return found
