"""Records (RFC 8785 lines), torn-tail repair and read-only views."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxharness.audit import AuditLog, Signer, get_verification_result, record_verdict
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.interface import FormatError
from sandboxharness.audit.merkle import hash_leaf
from sandboxharness.audit.records import (
    GENESIS_PREV,
    SCHEMA,
    build_record,
    decode_record,
    encode_record,
    is_torn_record,
    parse_record,
    summary_mismatches,
)
from sandboxharness.audit.view import export_csv, export_jsonl, read_entries, select
from sandboxharness.models._base import sha256_tag

SIGNER = Signer("records-test", Ed25519PrivateKey.generate())
KEYS = [SIGNER.public_key]
WHEN = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def test_record_holds_what_the_issue_lists() -> None:
    v = sample_verdict(3)
    rec = build_record(v, index=7, prev_leaf=b"\x11" * 32, recorded_at=WHEN)
    assert rec["schema"] == SCHEMA and rec["index"] == 7
    assert rec["prev"] == "sha256:" + "11" * 32
    assert rec["recorded_at"] == "2025-06-01T12:00:00.000000Z"
    assert rec["harness_version"]
    assert (rec["decision"], rec["seed"]) == (v.decision, v.seed)
    assert rec["candidate_sha256"] == v.candidate.sha256
    assert rec["definition_sha256"] == v.definition.sha256
    assert rec["policy_sha256"] == v.policy.sha256
    assert rec["verdict"] == v.model_dump(mode="json")
    assert rec["environment_sha256"] == sha256_tag(rfc8785.dumps(rec["verdict"]["environment"]))
    assert rec["verdict_sha256"] == v.content_hash()
    assert summary_mismatches(rec) == []
    line = encode_record(rec)
    assert line == rfc8785.dumps(rec) and b"\n" not in line
    assert decode_record(line) == rec
    assert build_record(v, index=0, prev_leaf=None, recorded_at=WHEN)["prev"] == GENESIS_PREV


@pytest.mark.parametrize("mutate", [
    lambda b: b.replace(b'{"candidate', b'{ "candidate', 1),       # whitespace: not canonical
    lambda b: b[:-1] + b',"index":1}',                              # duplicate key
    lambda b: b.replace(b'"seed":', b'"seeds":', 1),                # unknown field
    lambda b: b.replace(b'"index":0', b'"index":-1', 1),
    lambda b: b.replace(b'"index":0', b'"index":NaN', 1),
    lambda b: b"[]",
    lambda b: b"\xff" + b,
    lambda b: b.replace(SCHEMA.encode(), b"https://evil/schema", 1),
])
def test_decode_rejects_non_canonical_or_malformed(mutate: object) -> None:
    line = encode_record(build_record(sample_verdict(0), index=0, prev_leaf=None,
                                      recorded_at=WHEN))
    with pytest.raises(FormatError):
        decode_record(mutate(line))  # type: ignore[operator]


def test_torn_record_prefixes() -> None:
    line = encode_record(build_record(sample_verdict(0), index=0, prev_leaf=None,
                                      recorded_at=WHEN))
    assert all(is_torn_record(line[:k]) for k in range(1, len(line)))
    assert not is_torn_record(b'{"schema":')
    assert not is_torn_record(b"garbage")


def _crashed_log(tmp_path: Path, how: str) -> Path:
    """What a writer killed at each point between its steps leaves behind."""
    log = tmp_path / "audit.log"
    texts = [record_verdict(sample_verdict(i), log, SIGNER).checkpoint_text for i in range(3)]
    state = log.with_name("audit.log.state").read_bytes()  # a killed writer never updates it
    texts.append(record_verdict(sample_verdict(3), log, SIGNER).checkpoint_text)
    log.with_name("audit.log.state").write_bytes(state)
    cps = log.with_name("audit.log.checkpoints")
    lines = log.read_bytes().splitlines(keepends=True)
    if how == "partial-line":        # killed inside the record write
        log.write_bytes(b"".join(lines[:3]) + lines[3][:57])
        cps.write_text("".join(t + "\n" for t in texts[:3]))
    elif how == "no-checkpoint":     # killed after the record, before the checkpoint
        cps.write_text("".join(t + "\n" for t in texts[:3]))
    elif how == "partial-checkpoint":  # killed inside the checkpoint write
        cps.write_text("".join(t + "\n" for t in texts[:3]) + texts[3][:70])
    return log


@pytest.mark.parametrize("how", ["partial-line", "no-checkpoint", "partial-checkpoint"])
def test_torn_tail_is_reported_then_repaired(tmp_path: Path, how: str) -> None:
    """A crash mid-append: verify says 'torn tail' (exit 0), the next append repairs it
    (torn bytes kept in LOG.torn) and the log verifies in full again."""
    log = _crashed_log(tmp_path, how)
    result = get_verification_result(log, KEYS)
    assert result.ok and result.size == 3 and result.torn_tail is not None
    assert "torn tail" in result.torn_tail.line()
    appended = record_verdict(sample_verdict(9), log, SIGNER)
    assert appended.index == 3
    after = get_verification_result(log, KEYS)
    assert after.ok and after.size == 4 and after.torn_tail is None
    kept = [json.loads(x) for x in log.with_name("audit.log.torn").read_text().splitlines()]
    assert kept and all(base64.b64decode(k["data_b64"]) for k in kept)


def test_every_cut_of_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    log = _crashed_log(tmp_path, "no-checkpoint")
    full = log.read_bytes()
    last = full.splitlines(keepends=True)[-1]
    base = len(full) - len(last)
    for cut in range(1, len(last), 97):
        log.write_bytes(full[:base + cut])
        result = get_verification_result(log, KEYS)
        assert result.ok and result.torn_tail and result.torn_tail.partial_line_bytes == cut


def test_views_filter_and_flag_unsigned(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    for i in range(6):
        record_verdict(sample_verdict(i, author="bob" if i % 2 else "=cmd|' /C calc'!A0"),
                       log, SIGNER)
    AuditLog(log)  # construction does no I/O
    with log.open("ab") as fh:  # an unsigned (crash-like) complete record
        other = tmp_path / "o.log"
        for i in range(7):
            record_verdict(sample_verdict(i), other, SIGNER)
        fh.write(other.read_bytes().splitlines(keepends=True)[6])
    entries, notes = read_entries(log)
    assert [e.signed for e in entries] == [True] * 6 + [False]
    assert any("UNSIGNED" in n for n in notes)
    assert [e.index for e in select(entries, decision="reject", author="bob")] == [1, 3, 5]
    assert select(entries, since=datetime(2100, 1, 1, tzinfo=UTC)) == []
    csv_text = export_csv(entries)
    assert "'=cmd" in csv_text and ",=cmd" not in csv_text  # CSV injection neutralised
    rows = [json.loads(x) for x in export_jsonl(entries)]
    assert rows[0]["leaf_hash"] == "sha256:" + hash_leaf(
        log.read_bytes().splitlines()[0]).hex()


_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_canonical_check_agrees_with_rfc8785(value: object) -> None:
    """The fast canonical check accepts exactly RFC 8785 bytes (floats, unicode beyond
    the BMP, control characters, key order) and the verdict bytes match rfc8785's."""
    rec = build_record(sample_verdict(0), index=0, prev_leaf=None, recorded_at=WHEN)
    rec["verdict"] = {"data": value}
    line = rfc8785.dumps(rec)
    parsed, verdict_bytes = parse_record(line)
    assert verdict_bytes == rfc8785.dumps(rec["verdict"])
    for variant in (json.dumps(rec).encode(),
                    json.dumps(rec, sort_keys=True, separators=(",", ":")).encode(),
                    json.dumps(rec, separators=(",", ":"), ensure_ascii=False).encode()):
        if variant != line:
            with pytest.raises(FormatError):
                parse_record(variant)


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_fast_canonical_json_is_rfc8785(value: object) -> None:
    """The writer's fast path (C json encoder, checked for numbers and characters where
    it differs) writes exactly RFC 8785 bytes, or defers to rfc8785 (which may refuse)."""
    from sandboxharness.models import canonical as canon

    for obj in ({"v": value}, [value]):
        try:
            expected = rfc8785.dumps(obj)
        except rfc8785.CanonicalizationError:
            with pytest.raises(canon.CanonicalizationError):
                canon.dumps(obj)
            continue
        assert canon.dumps(obj) == expected


@pytest.mark.parametrize("number", ["2.0", "1e-7", "0.00001", "1e+21", "9007199254740993",
                                    "-0.0", "1.5E3", "1e16", "1E16", "1e21", "1e-5",
                                    "123456789012345678901234567890",
                                    "1e400", "-0", "0.10"])
def test_numbers_the_fast_path_cannot_judge_go_the_strict_way(number: str) -> None:
    """Floats Python prints differently from ES6, and integers beyond I-JSON, are judged
    by rfc8785 itself: accepted only in their exact RFC 8785 form."""
    line = encode_record(build_record(sample_verdict(0), index=0, prev_leaf=None,
                                      recorded_at=WHEN))
    edited = line.replace(b'"trials":5', b'"trials":' + number.encode(), 1)
    assert edited != line
    try:
        canonical = rfc8785.dumps(json.loads(edited)) == edited
    except rfc8785.CanonicalizationError:
        canonical = False
    if canonical:
        parse_record(edited)
    else:
        with pytest.raises(FormatError):
            parse_record(edited)


@pytest.mark.parametrize("text", ['a\\"b', 'e\\"', '\\\\', 'x"1e16'])
@pytest.mark.parametrize("number", ["1e16", "2.0", "1.5"])
def test_numbers_beside_escaped_quotes_are_still_judged(text: str, number: str) -> None:
    """The fast scan reads number tokens between strings; an escaped quote in a string
    must not hide an exponent or an integral float next to it."""
    rec = build_record(sample_verdict(0), index=0, prev_leaf=None, recorded_at=WHEN)
    rec["verdict"] = {"a": text, "b": 7, "c": text}
    line = rfc8785.dumps(rec).replace(b'"b":7', b'"b":' + number.encode(), 1)
    canonical = rfc8785.dumps(json.loads(line)) == line
    if canonical:
        parse_record(line)
    else:
        with pytest.raises(FormatError):
            parse_record(line)
