"""The archive from real evaluations (Triton interpreter, process sandbox), checked against a
real signed audit log: verify passes on a fresh archive and fails on one changed byte, show and
export hand a reviewer the exact bytes, gc keeps everything a signed record names."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, REPO, TRITON_RMS, make_solution

CLI = [sys.executable, "-m", "sandboxharness.cli"]
WRONG = "def run(x, w, y):\n    y.fill_(1.0)\n"
UNSIGNED = TRITON_RMS.replace("1e-6", "1e-6 + 0.0")  # same kernel, other bytes, never logged

pytestmark = pytest.mark.slow  # four real evaluations and a dataset run (~50 s)


def sh(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=600,
                          cwd=REPO)


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two evaluations in a signed log (promote, reject) and a third archived but not logged."""
    root = tmp_path_factory.mktemp("archive")
    gen = sh("keys", "generate", "--out", root / "keys", "--name", "ci-archive")
    assert gen.returncode == 0, gen.stderr
    key, pub = next((root / "keys").glob("*.key")), next((root / "keys").glob("*.pub"))
    pol = root / "fast.yaml"
    pol.write_text((REPO / "policies" / "default.yaml").read_text()
                   .replace("trials: 3", "trials: 1").replace("iterations: 10", "iterations: 3"))
    log, archive = root / "audit.jsonl", root / "archive"
    verdicts = {}
    for name, code, logged in (("honest", TRITON_RMS, True), ("wrong", WRONG, True),
                               ("unsigned", UNSIGNED, False)):
        sol = root / f"{name}.json"
        sol.write_text(json.dumps(make_solution(code, name=name)))
        audit = ["--audit-log", log, "--signing-key", key] if logged else []
        proc = sh("evaluate", "--definition", DATA / "tiny" / "rms_t.json", "--workloads",
                  DATA / "tiny" / "rms_t.jsonl", "--solution", sol, "--policy", pol, "--json",
                  "--archive", archive, *audit)
        assert proc.returncode in (0, 1), proc.stderr
        verdicts[name] = json.loads(proc.stdout)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return {"root": root, "log": log, "pub": pub, "archive": archive, "verdicts": verdicts,
            "records": records}


def obj(archive: Path, digest: str) -> Path:
    hexd = digest.removeprefix("sha256:")
    return archive / "sha256" / hexd[:2] / hexd[2:]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verify(a: dict[str, Any], archive: Path, *extra: object) -> subprocess.CompletedProcess[str]:
    return sh("archive", "verify", "--archive", archive, "--audit-log", a["log"],
              "--public-key", a["pub"], *extra)


def test_fresh_archive_matches_the_signed_log(archived: dict[str, Any]) -> None:
    a = archived
    proc = verify(a, a["archive"], "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "present and intact" in proc.stdout and "FAILED" not in proc.stdout
    honest, record = a["verdicts"]["honest"], a["records"][0]
    arts = record["verdict"]["artifacts"]
    assert arts == honest["artifacts"]
    assert {"solution.json", "definition.json", "policy.json", "workloads.jsonl",
            "sources/kernel.py", "logs/candidate.log", "logs/reference.log",
            "outputs/summary.json"} <= set(arts)
    # the archive's names are the hashes the verdict and the record already carry
    assert arts["solution.json"] == honest["candidate"]["sha256"]
    assert arts["definition.json"] == honest["definition"]["sha256"]
    assert arts["policy.json"] == honest["policy"]["sha256"]
    assert sha(obj(a["archive"], record["verdict_sha256"]).read_bytes()) == record["verdict_sha256"]
    assert obj(a["archive"], arts["sources/kernel.py"]).read_text() == TRITON_RMS
    summary = json.loads(obj(a["archive"], arts["outputs/summary.json"]).read_bytes())
    assert {c["role"] for c in summary["calls"]} == {"candidate", "reference"}
    assert all(c["digests"].get("out") for c in summary["calls"] if c["role"] == "candidate")


def test_one_changed_byte_fails_verify_with_one_line(archived: dict[str, Any],
                                                     tmp_path: Path) -> None:
    """The attack: an archived source edited after the fact (a reviewer would be shown a
    kernel other than the one that was promoted)."""
    a = archived
    copy = tmp_path / "archive"
    shutil.copytree(a["archive"], copy)
    target = obj(copy, a["records"][0]["verdict"]["artifacts"]["sources/kernel.py"])
    target.chmod(0o644)
    data = bytearray(target.read_bytes())
    data[10] ^= 0x01
    target.write_bytes(bytes(data))
    proc = verify(a, copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 1 and "record 0 artifact sources/kernel.py" in failed[0]
    assert "changed" in failed[0]
    shown = sh("archive", "show", a["records"][0]["verdict"]["artifacts"]["sources/kernel.py"],
               "--archive", copy)
    assert shown.returncode == 1 and shown.stdout == "" and "changed" in shown.stderr
    assert sh("archive", "verify", "--archive", copy).returncode == 1  # without the log too


def test_missing_verdict_object_is_a_finding(archived: dict[str, Any], tmp_path: Path) -> None:
    a = archived
    copy = tmp_path / "archive"
    shutil.copytree(a["archive"], copy)
    obj(copy, a["records"][1]["verdict_sha256"]).unlink()
    proc = verify(a, copy)
    assert proc.returncode == 1
    assert any(ln.startswith("FAILED record 1 verdict") and "missing" in ln
               for ln in proc.stdout.splitlines())


def test_show_prints_the_exact_artifact(archived: dict[str, Any]) -> None:
    a = archived
    digest = a["verdicts"]["wrong"]["artifacts"]["sources/kernel.py"]
    proc = sh("archive", "show", digest, "--archive", a["archive"])
    assert proc.returncode == 0 and proc.stdout == WRONG
    bad = sh("archive", "show", "sha256:xyz", "--archive", a["archive"])
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_export_hands_over_one_verdict_bundle(archived: dict[str, Any], tmp_path: Path) -> None:
    a = archived
    record = a["records"][0]
    out = tmp_path / "bundle"
    proc = sh("archive", "export", record["verdict_sha256"][7:19], "--out", out,
              "--archive", a["archive"])
    assert proc.returncode == 0, proc.stderr
    assert sha((out / "verdict.json").read_bytes()) == record["verdict_sha256"]
    assert (out / "artifacts" / "sources" / "kernel.py").read_text() == TRITON_RMS
    manifest = json.loads((out / "manifest.json").read_text())
    for name, entry in manifest["artifacts"].items():
        assert sha((out / "artifacts" / name).read_bytes()) == entry["sha256"]
    again = sh("archive", "export", record["verdict_sha256"], "--out", out,
               "--archive", a["archive"])
    assert again.returncode == 2 and "new or empty" in again.stderr


def test_gc_keeps_every_signed_artifact(archived: dict[str, Any], tmp_path: Path) -> None:
    a = archived
    copy = tmp_path / "archive"
    shutil.copytree(a["archive"], copy)
    unsigned = a["verdicts"]["unsigned"]
    only_unsigned = obj(copy, unsigned["artifacts"]["sources/kernel.py"])
    assert only_unsigned.exists()
    args = ("archive", "gc", "--archive", copy, "--audit-log", a["log"],
            "--public-key", a["pub"], "--keep-days", "0")
    dry = sh(*args, "--dry-run")
    assert dry.returncode == 0 and "would delete" in dry.stdout and only_unsigned.exists()
    proc = sh(*args)
    assert proc.returncode == 0, proc.stderr
    assert not only_unsigned.exists()
    assert sorted(p.name for p in (copy / "refs" / "verdicts").iterdir()) == sorted(
        r["verdict_sha256"][7:] + ".json" for r in a["records"])
    for record in a["records"]:  # every signed object is still there, intact
        for digest in [record["verdict_sha256"], *record["verdict"]["artifacts"].values()]:
            assert obj(copy, digest).exists()
    # what the unsigned evaluation shared with signed ones (definition, policy) stays
    assert obj(copy, unsigned["artifacts"]["definition.json"]).exists()
    assert verify(a, copy, "--all").returncode == 0


def test_gc_refuses_a_log_that_does_not_verify(archived: dict[str, Any],
                                               tmp_path: Path) -> None:
    a = archived
    copy, logs = tmp_path / "archive", tmp_path / "logs"
    shutil.copytree(a["archive"], copy)
    logs.mkdir()
    for p in a["log"].parent.glob(a["log"].name + "*"):
        shutil.copy(p, logs / p.name)
    log = logs / a["log"].name
    log.write_text(log.read_text().replace('"decision":"reject"', '"decision":"promot"', 1))
    before = sorted(str(p) for p in copy.rglob("*"))
    proc = sh("archive", "gc", "--archive", copy, "--audit-log", log, "--public-key", a["pub"],
              "--keep-days", "0")
    assert proc.returncode == 1 and "nothing deleted" in proc.stderr
    assert sorted(str(p) for p in copy.rglob("*")) == before


def test_objects_are_read_only(archived: dict[str, Any]) -> None:
    for p in (archived["archive"] / "sha256").rglob("*"):
        if p.is_file():
            assert not os.stat(p).st_mode & 0o222


def test_run_local_archives_into_the_dataset(tmp_path: Path) -> None:
    """A dataset run archives by default (DATASET/archive); its signed log vouches for it."""
    from tests.integration.test_run_local import GOOD, POLICY, WRONG, _dataset

    root = _dataset(tmp_path / "ds", {"good": GOOD, "wrong": WRONG})
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "audit.jsonl"
    res = sh("run", "--local", root, "--policy", policy, "--backend", "process",
             "--audit-log", log)
    assert res.returncode == 0, res.stderr
    pub = next(tmp_path.glob("*.pub"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 2 and all(r["verdict"]["artifacts"] for r in records)
    proc = sh("archive", "verify", "--archive", root / "archive", "--audit-log", log,
              "--public-key", pub)
    assert proc.returncode == 0 and "named by 2 signed record(s)" in proc.stdout, proc.stdout
    off = sh("run", "--local", root, "--policy", policy, "--no-archive", "--archive",
             tmp_path / "x")
    assert off.returncode == 2 and len(off.stderr.splitlines()) == 1
