"""Event records (FORMAT.md, "Event records"): chained and signed beside verdicts, verified
for content like them, and tampering with one is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness import audit
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.records import parse_record, prepare_event
from sandboxharness.audit.view import read_entries
from sandboxharness.errors import AuditError


def _keys(tmp_path: Path) -> tuple[audit.Signer, list[audit.PublicKey]]:
    files = audit.generate_keys(tmp_path / "keys", "events-test")
    return (audit.load_signer(files.private, allow_dev_key=False, dev_key_dir=tmp_path),
            audit.read_public_keys([files.public]))


def _event(i: int) -> dict[str, object]:
    # nested keys that look like a record's own must not confuse the integrity-only scan
    return {"kind": "gateway.call", "subject": "agent-a", "tool": "get_task",
            "arguments_sha256": "sha256:" + f"{i:064x}",
            "nested": {"index": 99, "kind": "x", "prev": "sha256:" + "f" * 64}}


def test_events_and_verdicts_share_one_verified_log(tmp_path: Path) -> None:
    signer, keys = _keys(tmp_path)
    log = tmp_path / "audit.log"
    audit.record_verdict(sample_verdict(0), log, signer)
    for i in range(3):
        audit.record_event("gateway.call", "agent-a", _event(i), log, signer)
    audit.record_verdict(sample_verdict(1), log, signer)
    for content in (True, False):
        result = audit.get_verification_result(log, keys, content=content)
        assert result.ok and result.size == 5, result.findings
    rec, body = parse_record(log.read_bytes().splitlines()[1])
    assert rec["kind"] == "gateway.call" and rec["event"]["tool"] == "get_task"
    entries, _ = read_entries(log)
    assert [e.decision for e in entries][:2] == ["promote", "event gateway.call"]


def test_an_edited_event_is_found(tmp_path: Path) -> None:
    signer, keys = _keys(tmp_path)
    log = tmp_path / "audit.log"
    for i in range(2):
        audit.record_event("gateway.call", "agent-a", _event(i), log, signer)
    data = log.read_bytes()
    log.write_bytes(data.replace(b'"tool":"get_task"', b'"tool":"get_tusk"', 1))
    result = audit.get_verification_result(log, keys)
    assert not result.ok


def test_event_body_must_carry_kind_and_subject() -> None:
    with pytest.raises(AuditError, match="kind and subject"):
        prepare_event("gateway.call", "agent-a", {"kind": "gateway.call", "subject": "b"})
