"""`audit ...` / `keys ...` commands: exit codes 0/1/2, one-line errors, no tracebacks.

Run as a script this module *is* the CLI (the audit sub-apps on a bare typer app), so
the subprocess tests exercise a real process exactly as a user would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sandboxharness.cli.audit_cmd import audit_app, keys_app

app = typer.Typer()
app.add_typer(audit_app, name="audit")
app.add_typer(keys_app, name="keys")
runner = CliRunner()


def cli(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def proc(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, __file__, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    """Keys via the CLI, a 5-record log via the library API the pipeline uses."""
    from sandboxharness.audit import load_signer, make_attestation, record_verdict
    from sandboxharness.audit._samples import sample_verdict

    code, out, _ = cli("keys", "generate", "--out", tmp_path / "keys", "--name", "ci-key")
    assert code == 0 and "ci-key+" in out
    signer = load_signer(tmp_path / "keys" / "ci-key.key", allow_dev_key=False,
                         dev_key_dir=tmp_path)
    log = tmp_path / "audit.log"
    results = [record_verdict(sample_verdict(i, author="bob" if i % 2 else "alice"), log, signer)
               for i in range(5)]
    (tmp_path / "cp2.note").write_text(results[2].checkpoint_text)
    (tmp_path / "cp4.note").write_text(results[4].checkpoint_text)
    (tmp_path / "att.json").write_text(json.dumps(
        make_attestation(sample_verdict(4), signer, audit=results[4])))
    return {"dir": tmp_path, "log": log, "pub": tmp_path / "keys" / "ci-key.pub",
            "pem": tmp_path / "keys" / "ci-key.pub.pem", "key": tmp_path / "keys" / "ci-key.key",
            "cp2": tmp_path / "cp2.note", "cp4": tmp_path / "cp4.note",
            "att": tmp_path / "att.json"}


def test_verify_intact_exit_0(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"],
                       "--trusted-checkpoint", setup["cp2"], "--save-checkpoint",
                       setup["dir"] / "next.note")
    assert code == 0 and out.startswith("OK: 5 record(s)")
    assert (setup["dir"] / "next.note").read_text() == setup["cp4"].read_text()
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pem"], "--json")
    assert code == 0 and json.loads(out)["status"] == "intact"


def test_verify_tampered_exit_1_names_kind_and_record(setup: dict[str, Path]) -> None:
    lines = setup["log"].read_bytes().splitlines(keepends=True)
    setup["log"].write_bytes(b"".join(lines[:2] + lines[3:]))
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert code == 1
    assert out.splitlines()[0].startswith("TAMPERED: deleted-record at record 2:")
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"], "--json")
    assert code == 1 and json.loads(out)["findings"][0]["kind"] == "deleted-record"


def test_torn_tail_warns_and_strict_fails(setup: dict[str, Path]) -> None:
    line = setup["log"].read_bytes().splitlines(keepends=True)[0]
    with setup["log"].open("ab") as fh:
        fh.write(line[:40])
    code, out, err = cli("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert code == 0 and out.startswith("OK") and "torn tail" in err
    code, _, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"], "--strict")
    assert code == 1


def test_integrity_only_verification(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"],
                       "--integrity-only")
    assert code == 0 and out.startswith("OK: 5 record(s)")
    setup["log"].write_bytes(setup["log"].read_bytes().replace(b'"index":3', b'"index":4', 1))
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"],
                       "--integrity-only")
    assert code == 1 and out.startswith("TAMPERED: edited-record at record 3")


def _unsigned_record(log: Path) -> bytes:
    """The next record, well-formed and chained, but never signed (an interrupted append)."""
    from datetime import UTC, datetime

    from sandboxharness.audit._samples import sample_verdict
    from sandboxharness.audit.merkle import hash_leaf
    from sandboxharness.audit.records import assemble, prepare

    lines = log.read_bytes().splitlines()
    return assemble(prepare(sample_verdict(50)), index=len(lines),
                    prev_leaf=hash_leaf(lines[-1]), recorded_at=datetime.now(UTC)) + b"\n"


def test_unsigned_records_fail_unless_allowed(setup: dict[str, Path]) -> None:
    """Records that outrun the checkpoints (an interrupted append, or records written
    without the key) fail `audit verify` unless --allow-unsigned-tail (issue 10)."""
    with setup["log"].open("ab") as fh:
        fh.write(_unsigned_record(setup["log"]))
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert code == 1 and out.startswith("UNSIGNED: record 5 comes after the newest signed")
    code, out, err = cli("audit", "verify", setup["log"], "--public-key", setup["pub"],
                         "--allow-unsigned-tail")
    assert code == 0 and out.startswith("OK: 5 record(s)") and "torn tail" in err
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"], "--json")
    assert code == 1 and json.loads(out)["unsigned_tail"] is True


def test_witness_command_and_verify_with_witness_key(setup: dict[str, Path]) -> None:
    """`audit witness` cosigns (exit 0), `verify --witness-key` then passes; after the
    newest records and their checkpoints are cut, verify fails (exit 1) and the witness
    refuses the rolled-back log (exit 1, one line)."""
    d = setup["dir"]
    code, _, _ = cli("keys", "generate", "--out", d / "wkeys", "--name", "witness-w1")
    assert code == 0
    state, wkey, wpub = d / "wstate", d / "wkeys" / "witness-w1.key", d / "wkeys" / "witness-w1.pub"
    witness = ("audit", "witness", "--log", setup["log"], "--public-key", setup["pub"],
               "--witness-key", wkey, "--state", state)
    code, out, _ = cli(*witness)
    assert code == 0 and out.startswith("OK: cosigned size 5 of sandboxharness.dev/audit/")
    verify = ("audit", "verify", setup["log"], "--public-key", setup["pub"],
              "--witness-key", wpub)
    code, out, _ = cli(*verify)
    assert code == 0 and "witnessed by witness-w1+" in out
    lines = setup["log"].read_bytes().splitlines(keepends=True)
    setup["log"].write_bytes(b"".join(lines[:3]))
    cps = setup["log"].with_name("audit.log.checkpoints")
    cps.write_text("".join(c + "\n" for c in _checkpoint_texts(cps)[:3]))
    setup["log"].with_name("audit.log.state").unlink()
    code, out, _ = cli("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert code == 0  # without the witness, a consistent shorter log
    code, out, _ = cli(*verify, "--witness-state", state)
    assert code == 1 and out.startswith("TAMPERED: rollback at records 3-4")
    code, out, err = cli(*witness)
    assert code == 1 and out == "" and err.startswith("error: rollback:")
    assert err.count("\n") == 1
    code, _, err = cli("audit", "verify", setup["log"], "--public-key", setup["pub"],
                       "--witness-state", state)
    assert code == 2 and "--witness-key" in err


def _checkpoint_texts(cps: Path) -> list[str]:
    from sandboxharness.audit.checkpoint import split_sidecar

    return [e.text for e in split_sidecar(cps.read_bytes()).entries if e.text]


@pytest.mark.parametrize("case", ["missing-log", "private-as-public", "garbage-key",
                                  "bad-trusted", "missing-key-file", "log-is-dir"])
def test_bad_input_exit_2_one_line(setup: dict[str, Path], case: str) -> None:
    d = setup["dir"]
    (d / "garbage.pub").write_text("ssh-ed25519 AAAA nope\n")
    (d / "bad.note").write_text("not a checkpoint\n")
    args = {
        "missing-log": [d / "nope.log", "--public-key", setup["pub"]],
        "private-as-public": [setup["log"], "--public-key", setup["key"]],
        "garbage-key": [setup["log"], "--public-key", d / "garbage.pub"],
        "bad-trusted": [setup["log"], "--public-key", setup["pub"],
                        "--trusted-checkpoint", d / "bad.note"],
        "missing-key-file": [setup["log"], "--public-key", d / "nope.pub"],
        "log-is-dir": [d, "--public-key", setup["pub"]],
    }[case]
    code, out, err = cli("audit", "verify", *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_show_filters(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "show", setup["log"], "--decision", "reject",
                       "--author", "bob", "--since", "2000-01-01", "--until", "2999-12-31")
    assert code == 0 and "2 of 5 records" in out
    code, out, _ = cli("audit", "show", setup["log"], "--until", "2001-01-01")
    assert code == 0 and "0 of 5 records" in out
    code, _, err = cli("audit", "show", setup["log"], "--since", "yesterday")
    assert code == 2 and "ISO date" in err


def test_prove_and_verify_proof(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "prove", setup["log"], "--index", 3)
    assert code == 0
    bundle = json.loads(out)
    assert bundle["tree_size"] == 5 and len(bundle["proof"]) == 3
    path = setup["dir"] / "proof.json"
    path.write_text(out)
    code, out, _ = cli("audit", "verify-proof", path, "--public-key", setup["pub"])
    assert code == 0 and out.startswith("OK: record 3")
    bundle["record"] = bundle["record"].replace('"decision":"reject"', '"decision":"promote"')
    path.write_text(json.dumps(bundle))
    code, _, err = cli("audit", "verify-proof", path, "--public-key", setup["pub"])
    assert code == 1 and err.startswith("error: ")
    code, _, err = cli("audit", "prove", setup["log"], "--index", 99)
    assert code == 2 and "no record 99" in err


def test_consistency(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "consistency", setup["log"], "--old", setup["cp2"],
                       "--new", setup["cp4"], "--public-key", setup["pub"])
    assert code == 0 and json.loads(out)["old_size"] == 3 and json.loads(out)["proof"]
    lines = setup["log"].read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"seed":1000020', b'"seed":1000021')
    setup["log"].write_bytes(b"".join(lines))
    code, _, err = cli("audit", "consistency", setup["log"], "--old", setup["cp2"],
                       "--new", setup["cp4"])
    assert code == 1 and "disagree" in err and "signatures were not checked" in err


def test_export_formats(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "export", setup["log"], "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("index,signed,recorded_at,decision")
    assert len(out.splitlines()) == 6
    code, out, _ = cli("audit", "export", setup["log"], "--format", "jsonl")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2, 3, 4] and all(r["signed"] for r in rows)
    code, _, _ = cli("audit", "export", setup["log"], "--format", "xml")
    assert code == 2


def test_verify_attestation(setup: dict[str, Path]) -> None:
    code, out, _ = cli("audit", "verify-attestation", setup["att"], "--public-key", setup["pub"])
    assert code == 0 and out.startswith("OK:") and "promote" in out
    env = json.loads(setup["att"].read_text())
    env["signatures"][0]["sig"] = env["signatures"][0]["sig"][::-1]
    setup["att"].write_text(json.dumps(env))
    code, _, err = cli("audit", "verify-attestation", setup["att"], "--public-key", setup["pub"])
    assert code == 1 and err.startswith("error: ")


def test_keys_generate_refuses_overwrite(setup: dict[str, Path]) -> None:
    code, _, err = cli("keys", "generate", "--out", setup["dir"] / "keys", "--name", "ci-key")
    assert code == 2 and "overwrite" in err
    code, _, err = cli("keys", "generate", "--out", setup["dir"] / "keys", "--name", "a b")
    assert code == 2 and "invalid key name" in err


def test_real_process_exit_codes_and_no_traceback(setup: dict[str, Path]) -> None:
    ok = proc("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert ok.returncode == 0 and ok.stdout.startswith("OK")
    missing = proc("audit", "verify", setup["dir"] / "nope.log", "--public-key", setup["pub"])
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
    setup["log"].write_bytes(setup["log"].read_bytes().replace(b'"index":3', b'"index":4', 1))
    bad = proc("audit", "verify", setup["log"], "--public-key", setup["pub"])
    assert bad.returncode == 1 and bad.stdout.startswith("TAMPERED: edited-record at record 3")
    assert "Traceback" not in bad.stderr
    usage = proc("audit", "verify", setup["log"])
    assert usage.returncode == 2 and "--public-key" in usage.stderr


if __name__ == "__main__":
    app()
