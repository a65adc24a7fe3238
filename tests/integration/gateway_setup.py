"""Shared set-up for the MCP gateway tests: a small dataset, keys, tokens minted by the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sandboxharness import audit
from tests.conftest import REPO

PY = sys.executable


@dataclass(frozen=True)
class Setup:
    dataset: Path
    state: Path
    log: Path
    key: Path
    pub: Path
    token_file: Path
    tokens: dict[str, str]

    def serve_args(self, *extra: str) -> list[str]:
        return ["-m", "sandboxharness.cli", "mcp", "serve", "--local", str(self.dataset),
                "--state", str(self.state), "--audit-log", str(self.log),
                "--signing-key", str(self.key), "--token-file", str(self.token_file), *extra]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "sandboxharness.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO, check=False)


def make_setup(tmp: Path, agents: dict[str, list[str]]) -> Setup:
    ds = tmp / "dataset"
    for name in ("rmsnorm_h128", "softmax_v512"):
        for sub, ext in (("definitions", ".json"), ("workloads", ".jsonl")):
            (ds / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / "kernels" / sub / f"{name}{ext}", ds / sub / f"{name}{ext}")
    files = audit.generate_keys(tmp / "keys", "gateway-test")
    token_file = tmp / "agents.json"
    tokens = {}
    for agent, flags in agents.items():
        done = cli("mcp", "token", "add", "--agent", agent, "--token-file", str(token_file),
                   *flags)
        assert done.returncode == 0, done.stderr
        tokens[agent] = done.stdout.strip()
    assert token_file.stat().st_mode & 0o077 == 0
    assert all(t not in token_file.read_text() for t in tokens.values())  # hashes only
    return Setup(ds, tmp / "state", tmp / "audit.log", files.private, files.public, token_file,
                 tokens)


def solution(name: str = "triton_dps") -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (REPO / "kernels" / "solutions" / "rmsnorm_h128" / f"{name}.json").read_text())
    return data


def audited_calls(s: Setup) -> list[dict[str, object]]:
    """The gateway.call events of the log, after checking the whole log verifies."""
    result = audit.get_verification_result(s.log, audit.read_public_keys([s.pub]))
    assert result.ok, result.findings
    events = []
    for line in s.log.read_bytes().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "gateway.call":
            events.append(rec["event"])
    return events
