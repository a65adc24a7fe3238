"""Audit log written by real `evaluate` runs, then tampered with and verified offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TRITON_RMS

CLI = [sys.executable, "-m", "sandboxharness.cli"]


def sh(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real evaluations (one promote, one reject) appended to one signed log."""
    root = tmp_path_factory.mktemp("audit")
    keys = root / "keys"
    gen = sh("keys", "generate", "--out", keys, "--name", "ci-audit")
    assert gen.returncode == 0, gen.stderr
    key = next(keys.glob("*.key"))
    pub = next(p for p in keys.glob("*.pub"))
    pol = root / "fast.yaml"
    pol.write_text((REPO / "policies" / "default.yaml").read_text()
                   .replace("trials: 3", "trials: 1").replace("iterations: 10", "iterations: 3"))
    tiny = REPO / "tests" / "data" / "tiny"
    log = root / "audit.jsonl"
    for name, code in (("honest", TRITON_RMS),
                       ("wrong", "def run(x, w, y):\n    y.fill_(1.0)\n")):
        sol = root / f"{name}.json"
        sol.write_text(json.dumps({
            "name": name, "definition": "rms_t", "author": "agent-x",
            "spec": {"language": "triton", "target_hardware": ["H100"],
                     "entry_point": "k.py::run"},
            "sources": [{"path": "k.py", "content": code}]}))
        proc = sh("evaluate", "--definition", tiny / "rms_t.json", "--workloads",
                  tiny / "rms_t.jsonl", "--solution", sol, "--policy", pol, "--json",
                  "--audit-log", log, "--signing-key", key,
                  "--attestation", root / f"{name}.att.json")
        assert proc.returncode in (0, 1), proc.stderr
    return {"log": log, "pub": pub, "key": key, "root": root, "pol": pol}


def verify(log: Path, pub: Path, *extra: object) -> subprocess.CompletedProcess[str]:
    return sh("audit", "verify", log, "--public-key", pub, *extra)


def copy_log(src: Path, dst_dir: Path) -> Path:
    dst_dir.mkdir(exist_ok=True)
    for p in src.parent.glob(src.name + "*"):
        (dst_dir / p.name).write_bytes(p.read_bytes())
    return dst_dir / src.name


def test_log_of_real_evaluations_verifies(audited: dict[str, Path]) -> None:
    proc = verify(audited["log"], audited["pub"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(x) for x in audited["log"].read_text().splitlines()]
    assert [r["decision"] for r in records] == ["promote", "reject"]
    shown = sh("audit", "show", audited["log"], "--decision", "reject")
    assert shown.returncode == 0 and "wrong" in shown.stdout and "honest" not in shown.stdout


def test_edited_decision_is_detected(audited: dict[str, Path], tmp_path: Path) -> None:
    log = copy_log(audited["log"], tmp_path / "c")
    text = log.read_text()
    log.write_text(text.replace('"decision":"reject"', '"decision":"promot"', 1))
    proc = verify(log, audited["pub"])
    assert proc.returncode == 1 and "record 1" in (proc.stdout + proc.stderr).lower().replace(
        "#", "")


def test_deleted_record_is_detected(audited: dict[str, Path], tmp_path: Path) -> None:
    log = copy_log(audited["log"], tmp_path / "c")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(lines[1])
    assert verify(log, audited["pub"]).returncode == 1


def test_truncation_against_trusted_checkpoint(audited: dict[str, Path], tmp_path: Path) -> None:
    saved = tmp_path / "trusted.checkpoint"
    assert verify(audited["log"], audited["pub"], "--save-checkpoint", saved).returncode == 0
    log = copy_log(audited["log"], tmp_path / "c")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(lines[0])
    cps = log.with_name(log.name + ".checkpoints")
    body, signature = cps.read_text().split("\n\n")[:2]  # the first entry, signed
    cps.write_text(f"{body}\n\n{signature}\n\n")
    assert verify(log, audited["pub"], "--trusted-checkpoint", saved).returncode == 1


def test_attestation_verifies_and_names_the_candidate(audited: dict[str, Path]) -> None:
    att = audited["root"] / "honest.att.json"
    proc = sh("audit", "verify-attestation", att, "--public-key", audited["pub"])
    assert proc.returncode == 0, proc.stderr
    env = json.loads(att.read_text())
    assert env["payloadType"] == "application/vnd.in-toto+json"


def test_regulated_policy_refuses_the_development_key(audited: dict[str, Path],
                                                      tmp_path: Path) -> None:
    tiny = REPO / "tests" / "data" / "tiny"
    sol = audited["root"] / "honest.json"
    proc = sh("evaluate", "--definition", tiny / "rms_t.json", "--workloads", tiny / "rms_t.jsonl",
              "--solution", sol, "--policy", REPO / "policies" / "regulated.yaml",
              "--audit-log", tmp_path / "log.jsonl")
    assert proc.returncode == 2
    assert "signing-key" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "log.jsonl").exists()


def test_candidate_cannot_read_the_signing_key_or_the_log(audited: dict[str, Path]) -> None:
    """Attack: a candidate reads the signing key and the audit log by absolute path (both kept
    inside the repository here, which the worker otherwise sees read-only)."""
    import shutil
    import uuid

    keep = REPO / ".pytest_cache" / f"shx-keys-{uuid.uuid4().hex[:8]}"
    keep.mkdir(parents=True)
    try:
        key = keep / "k.key"
        shutil.copy(audited["key"], key)
        key.chmod(0o644)  # a careless mode: only hiding the path protects it now
        log = keep / "audit.jsonl"
        # the thief only computes the right answer once it holds the key: a leak would promote
        code = ("def run(x, w, y):\n"
                f"    if 'PRIVATE+KEY' not in open({str(key)!r}).read():\n"
                "        raise RuntimeError('signing key not readable')\n"
                "    try:\n"
                f"        with open({str(log)!r}, 'a') as fh:\n"
                "            fh.write('tampered\\n')\n"
                "    except OSError:\n"
                "        pass\n"
                "    y.copy_(x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * w)\n")
        sol = keep / "thief.json"
        sol.write_text(json.dumps({
            "name": "thief", "definition": "rms_t", "author": "agent-x",
            "spec": {"language": "python", "target_hardware": ["H100"],
                     "entry_point": "k.py::run"},
            "sources": [{"path": "k.py", "content": code}]}))
        log.write_text("")
        pol = keep / "nostatic.yaml"  # let the attempt reach the sandbox
        pol.write_text(audited["pol"].read_text().replace(
            "  bandit: true\n  semgrep: true\n  ast_rules: true\n",
            "  bandit: false\n  semgrep: false\n  ast_rules: false\n"))
        assert "ast_rules: false" in pol.read_text()
        tiny = REPO / "tests" / "data" / "tiny"
        proc = sh("evaluate", "--definition", tiny / "rms_t.json", "--workloads",
                  tiny / "rms_t.jsonl", "--solution", sol, "--policy", pol, "--json",
                  "--audit-log", log, "--signing-key", key)
        verdict = json.loads(proc.stdout)
        assert proc.returncode == 1 and verdict["decision"] == "reject", proc.stderr
        assert {r["code"] for r in verdict["reasons"]} == {"RUNTIME_ERROR"}
        assert "signing key not readable" in verdict["reasons"][0]["message"]
        assert "PRIVATE+KEY" not in proc.stdout
        assert "tampered" not in log.read_text()
        assert verify(log, audited["pub"]).returncode == 0  # and the log is intact
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def test_reordered_records_are_detected(audited: dict[str, Path], tmp_path: Path) -> None:
    log = copy_log(audited["log"], tmp_path / "c")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(lines[1] + lines[0])
    assert verify(log, audited["pub"]).returncode == 1


def test_inserted_copy_of_a_record_is_detected(audited: dict[str, Path], tmp_path: Path) -> None:
    log = copy_log(audited["log"], tmp_path / "c")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(lines[0] + lines[0] + lines[1])
    assert verify(log, audited["pub"]).returncode == 1


def test_rollback_to_an_earlier_copy_is_detected(audited: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """Restore the log and its checkpoints as they were after the first evaluation."""
    saved = tmp_path / "trusted.checkpoint"
    assert verify(audited["log"], audited["pub"], "--save-checkpoint", saved).returncode == 0
    old = copy_log(audited["log"], tmp_path / "old")
    old.write_text(old.read_text().splitlines(keepends=True)[0])
    cps = old.with_name(old.name + ".checkpoints")
    body, signature = cps.read_text().split("\n\n")[:2]  # the first entry, signed
    cps.write_text(f"{body}\n\n{signature}\n\n")
    for side in old.parent.glob(old.name + ".state"):
        side.unlink()
    assert verify(old, audited["pub"]).returncode == 0  # self-consistent on its own...
    assert verify(old, audited["pub"], "--trusted-checkpoint", saved).returncode == 1  # ...not vs trust


def test_bad_signing_key_is_one_error_line_and_writes_nothing(audited: dict[str, Path],
                                                               tmp_path: Path) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    bad.chmod(0o600)
    log = tmp_path / "log.jsonl"
    tiny = REPO / "tests" / "data" / "tiny"
    proc = sh("evaluate", "--json", "--definition", tiny / "rms_t.json", "--workloads",
              tiny / "rms_t.jsonl", "--solution", audited["root"] / "honest.json",
              "--audit-log", log, "--signing-key", bad)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "bad.key" in proc.stderr and "Traceback" not in proc.stderr
    assert not log.exists() and proc.stdout == ""  # refused before any verdict existed
