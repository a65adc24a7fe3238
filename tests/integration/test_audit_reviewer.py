"""The commands in sandboxharness/audit/REVIEWER.md, run as written, against real
evidence: a reviewer with openssl/jq/python3 and no sandboxharness can check it."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "sandboxharness" / "audit" / "REVIEWER.md"
TOOLS = ("openssl", "jq", "python3", "bash", "awk", "base64")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                reason=f"needs {', '.join(TOOLS)} on PATH")


def _block(name: str) -> str:
    match = re.search(rf"<!-- test: {name} -->\n```sh\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"REVIEWER.md has no test block {name!r}"
    return match.group(1)


def _run(name: str, cwd: Path, **env: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", _block(name)], cwd=cwd,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin",
                               **{k: str(v) for k, v in env.items()}},
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def evidence(tmp_path: Path) -> dict[str, Path]:
    from sandboxharness.audit import generate_keys, load_signer, make_attestation, record_verdict
    from sandboxharness.audit._samples import sample_verdict

    files = generate_keys(tmp_path / "keys", "reviewer-demo")
    signer = load_signer(files.private, allow_dev_key=False, dev_key_dir=tmp_path)
    log = tmp_path / "audit.log"
    for i in range(6):
        appended = record_verdict(sample_verdict(i), log, signer)
    (tmp_path / "cp.note").write_text(appended.checkpoint_text)
    (tmp_path / "att.json").write_text(json.dumps(
        make_attestation(sample_verdict(5), signer, audit=appended), indent=2))
    return {"ATT": tmp_path / "att.json", "PEM": files.public_pem, "CP": tmp_path / "cp.note",
            "LOG": log, "dir": tmp_path}


def test_reviewer_checks_attestation_with_openssl(evidence: dict[str, Path]) -> None:
    ok = _run("dsse", evidence["dir"], ATT=evidence["ATT"], PEM=evidence["PEM"])
    assert ok.returncode == 0, ok.stderr
    assert "Signature Verified Successfully" in ok.stdout and '"reject"' in ok.stdout
    env = json.loads(evidence["ATT"].read_text())  # upgrade the reject to a promote
    payload = base64.b64decode(env["payload"]).replace(b'"reject"', b'"promote"')
    env["payload"] = base64.b64encode(payload).decode()
    evidence["ATT"].write_text(json.dumps(env))
    bad = _run("dsse", evidence["dir"], ATT=evidence["ATT"], PEM=evidence["PEM"])
    assert bad.returncode != 0 and "Signature Verified Successfully" not in bad.stdout


def test_reviewer_checks_checkpoint_with_openssl(evidence: dict[str, Path]) -> None:
    ok = _run("checkpoint", evidence["dir"], CP=evidence["CP"], PEM=evidence["PEM"])
    assert ok.returncode == 0 and "Signature Verified Successfully" in ok.stdout, ok.stderr
    evidence["CP"].write_text(evidence["CP"].read_text().replace("\n6\n", "\n7\n", 1))
    assert _run("checkpoint", evidence["dir"], CP=evidence["CP"], PEM=evidence["PEM"]).returncode


def test_reviewer_recomputes_the_merkle_root(evidence: dict[str, Path]) -> None:
    ok = _run("merkle", evidence["dir"], LOG=evidence["LOG"], CP=evidence["CP"])
    assert ok.returncode == 0 and "OK: 6 records" in ok.stdout, ok.stderr
    lines = evidence["LOG"].read_bytes().splitlines(keepends=True)
    evidence["LOG"].write_bytes(b"".join(lines[:2] + lines[3:]))
    bad = _run("merkle", evidence["dir"], LOG=evidence["LOG"], CP=evidence["CP"])
    assert bad.returncode != 0 and "chain broken at record 2" in bad.stderr
