"""Audit records: one verdict each, RFC 8785 canonical JSON, one per log line.

Record fields (all required)::

    schema             "https://sandboxharness.dev/audit/record/v1"
    index              0-based position in the log
    prev               "sha256:<hex>" leaf hash of record index-1 (64 zeros for index 0)
    recorded_at        UTC time of the append, RFC 3339 with "Z"
    harness_version    version of the harness that wrote the record
    decision           "promote" | "reject" (copied from the verdict)
    candidate_sha256, definition_sha256, policy_sha256, seed  (copied from the verdict)
    environment_sha256 "sha256:<hex>" of the canonical verdict.environment
    verdict_sha256     "sha256:<hex>" of the canonical verdict
    verdict            the verdict, ``Verdict.model_dump(mode="json")``

The line's bytes are exactly the canonical JSON; its Merkle leaf hash is
SHA-256(0x00 || line without the newline). A writer canonicalises a verdict once
(:func:`prepare`, outside the log lock) and splices it into the record (:func:`assemble`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from .._internal.host import harness_version as _harness_version
from ..errors import AuditError
from ..models import Verdict
from ..models import canonical as canon
from ..models._base import sha256_tag
from .interface import FormatError

SCHEMA = "https://sandboxharness.dev/audit/record/v1"
EVENT_SCHEMA = "https://sandboxharness.dev/audit/event/v1"
"""A record of something other than a verdict (a gateway tool call, a campaign round):
``kind``, ``subject`` and the ``event`` object, chained and signed like any record."""
GENESIS_PREV = "sha256:" + "0" * 64
_FIELDS = {"schema", "index", "prev", "recorded_at", "harness_version", "decision",
           "candidate_sha256", "definition_sha256", "policy_sha256", "seed",
           "environment_sha256", "verdict_sha256", "verdict"}
_EVENT_FIELDS = {"schema", "index", "prev", "recorded_at", "harness_version", "kind", "subject",
                 "event_sha256", "event"}
_VERDICT_KEY = b',"verdict":'
_AFTER_VERDICT = b',"verdict_sha256":'
_EVENT_KEY = b'{"event":'
_AFTER_EVENT = b',"event_sha256":'


harness_version = functools.cache(_harness_version)  # read once per process: every record


def canonical(obj: Any) -> bytes:
    """RFC 8785 bytes for the log; a value it cannot encode is the harness's error."""
    try:
        return canon.dumps(obj)
    except canon.CanonicalizationError as exc:
        raise AuditError(f"verdict cannot be written as canonical JSON (RFC 8785): {exc}") from None


def leaf_tag(leaf_hash: bytes) -> str:
    return "sha256:" + leaf_hash.hex()


def _when(recorded_at: datetime) -> str:
    return recorded_at.isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Prepared:
    """A verdict made ready for the log: canonical bytes and the summary fields."""

    verdict_bytes: bytes
    summary: dict[str, Any]


def prepare(verdict: Verdict) -> Prepared:
    body = verdict.model_dump(mode="json")
    verdict_bytes = canonical(body)
    return Prepared(verdict_bytes, {
        "decision": verdict.decision, "candidate_sha256": verdict.candidate.sha256,
        "definition_sha256": verdict.definition.sha256, "policy_sha256": verdict.policy.sha256,
        "seed": verdict.seed, "environment_sha256": sha256_tag(canonical(body["environment"])),
        "verdict_sha256": sha256_tag(verdict_bytes)})


def assemble(prepared: Prepared, *, index: int, prev_leaf: bytes | None,
             recorded_at: datetime) -> bytes:
    """The record line (RFC 8785): the small fields canonicalised, the verdict spliced in
    where its key sorts (between ``seed`` and ``verdict_sha256``); an event's body is the
    first key of its record."""
    if "event_sha256" in prepared.summary:
        shell = canonical({**prepared.summary, "schema": EVENT_SCHEMA, "index": index,
                           "prev": GENESIS_PREV if prev_leaf is None else leaf_tag(prev_leaf),
                           "recorded_at": _when(recorded_at),
                           "harness_version": harness_version()})
        return _EVENT_KEY + prepared.verdict_bytes + b"," + shell[1:]
    shell = canonical({**prepared.summary, "schema": SCHEMA, "index": index,
                        "prev": GENESIS_PREV if prev_leaf is None else leaf_tag(prev_leaf),
                        "recorded_at": _when(recorded_at), "harness_version": harness_version()})
    cut = shell.rindex(_AFTER_VERDICT)
    return shell[:cut] + _VERDICT_KEY + prepared.verdict_bytes + shell[cut:]


def prepare_event(kind: str, subject: str, event: dict[str, Any]) -> Prepared:
    """An event made ready for the log: ``event`` must hold the same ``kind`` and
    ``subject`` (the verifier checks the copies agree, as it does a verdict's summary)."""
    if event.get("kind") != kind or event.get("subject") != subject:
        raise AuditError("an event's body must carry its kind and subject")
    body = canonical(event)
    return Prepared(body, {"kind": kind, "subject": subject, "event_sha256": sha256_tag(body)})


def build_record(verdict: Verdict, *, index: int, prev_leaf: bytes | None,
                 recorded_at: datetime) -> dict[str, Any]:
    p = prepare(verdict)
    return {**p.summary, "schema": SCHEMA, "index": index,
            "prev": GENESIS_PREV if prev_leaf is None else leaf_tag(prev_leaf),
            "recorded_at": _when(recorded_at), "harness_version": harness_version(),
            "verdict": verdict.model_dump(mode="json")}


def encode_record(record: dict[str, Any]) -> bytes:
    data = canonical(record)
    if b"\n" in data:  # cannot happen with RFC 8785 (newlines are escaped); belt and braces
        raise AuditError("canonical record contains a newline")
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise FormatError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise FormatError(f"non-JSON number {name}")


_MAX_SAFE_INT = 2**53 - 1


def _canonical_int(literal: str) -> int | float:
    value = int(literal)
    if str(value) != literal:
        raise FormatError(f"integer {literal[:30]} is not canonical RFC 8785")
    if abs(value) <= _MAX_SAFE_INT:
        return value
    return _canonical_float(literal)  # e.g. 2**53 as a float is written without ".0"


def _canonical_float(literal: str) -> float:
    value = float(literal)
    try:
        ok = rfc8785.dumps(value) == literal.encode()
    except rfc8785.CanonicalizationError:
        ok = False
    if not ok:
        raise FormatError(f"number {literal[:30]} is not in canonical (ES6) form")
    return value


_SCALARS = tuple(sorted(_FIELDS - {"verdict"}))


def _shape(obj: Any) -> dict[str, Any]:
    if type(obj) is not dict:
        raise FormatError("not a JSON object")
    if obj.get("schema") == EVENT_SCHEMA:
        return _event_shape(obj)
    if obj.keys() != _FIELDS:
        missing, extra = sorted(_FIELDS - set(obj)), sorted(set(obj) - _FIELDS)
        raise FormatError(f"wrong fields (missing {missing}, unexpected {extra})")
    if obj["schema"] != SCHEMA:
        raise FormatError(f"unknown schema {str(obj['schema'])[:80]!r}")
    if type(obj["index"]) is not int or obj["index"] < 0:
        raise FormatError("index is not a non-negative integer")
    if not isinstance(obj["prev"], str) or len(obj["prev"]) != 71 \
            or not obj["prev"].startswith("sha256:"):
        raise FormatError("prev is not a sha256:<hex> hash")
    if not isinstance(obj["verdict"], dict):
        raise FormatError("verdict is not an object")
    for k in _SCALARS:
        if type(obj[k]) in (dict, list):
            raise FormatError(f"field {k} is not a JSON scalar")
    return obj


_EVENT_SCALARS = tuple(sorted(_EVENT_FIELDS - {"event"}))


def _event_shape(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.keys() != _EVENT_FIELDS:
        missing, extra = sorted(_EVENT_FIELDS - set(obj)), sorted(set(obj) - _EVENT_FIELDS)
        raise FormatError(f"wrong event fields (missing {missing}, unexpected {extra})")
    if type(obj["index"]) is not int or obj["index"] < 0:
        raise FormatError("index is not a non-negative integer")
    if not isinstance(obj["prev"], str) or len(obj["prev"]) != 71 \
            or not obj["prev"].startswith("sha256:"):
        raise FormatError("prev is not a sha256:<hex> hash")
    if not isinstance(obj["event"], dict):
        raise FormatError("event is not an object")
    for k in _EVENT_SCALARS:
        if type(obj[k]) in (dict, list):
            raise FormatError(f"field {k} is not a JSON scalar")
    return obj


def _body_key(obj: dict[str, Any]) -> str:
    return "event" if obj.get("schema") == EVENT_SCHEMA else "verdict"


def _parse_strict(line: bytes) -> tuple[dict[str, Any], bytes]:
    """The general path: every key and number checked, RFC 8785 recomputed by rfc8785."""
    try:
        obj = _shape(json.loads(line, object_pairs_hook=_no_duplicates,
                                parse_constant=_reject_constant, parse_int=_canonical_int,
                                parse_float=_canonical_float))
        body_key = _body_key(obj)
        verdict = rfc8785.dumps(obj[body_key])
        canonical = b"{" + b",".join(
            rfc8785.dumps(k) + b":" + (verdict if k == body_key else rfc8785.dumps(obj[k]))
            for k in sorted(obj)) + b"}"
    except FormatError:
        raise
    except rfc8785.CanonicalizationError:
        raise FormatError("holds values RFC 8785 cannot encode") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, oversized integers
        raise FormatError(f"not valid JSON ({exc.__class__.__name__})") from None
    except RecursionError:
        raise FormatError("JSON nested too deeply") from None
    if canonical != line:
        raise FormatError("bytes are not the canonical (RFC 8785) form of the record")
    return obj, verdict


def parse_record(line: bytes) -> tuple[dict[str, Any], bytes]:
    """Parse one log line; it must be a canonical, well-formed record. Also returns the
    canonical bytes of its verdict (cut out of the line, not re-encoded)."""
    obj, verdict_bytes, _ = parse_record_checked(line)
    return obj, verdict_bytes


def parse_record_checked(line: bytes) -> tuple[dict[str, Any], bytes, bool]:
    """:func:`parse_record`, and whether it took the fast path (see summary_mismatches)."""
    try:
        obj = canon.loads(line)
    except canon.Undecided:
        return (*_parse_strict(line), False)
    except ValueError as exc:
        raise FormatError(f"not valid JSON ({exc.__class__.__name__})") from None
    except RecursionError:
        raise FormatError("JSON nested too deeply") from None
    _shape(obj)
    if not canon.same(line, obj):  # duplicate keys, spaces, order...: rfc8785 judges
        return (*_parse_strict(line), False)
    if obj["schema"] == EVENT_SCHEMA:  # the event is the first key, only scalars after it
        return obj, line[len(_EVENT_KEY):line.rindex(_AFTER_EVENT)], True
    # canonical, and every value before "verdict" is a scalar: the first ',"verdict":' is
    # the key (a JSON string cannot hold a bare '"'), ',"verdict_sha256":' the last one
    cut = line.index(_VERDICT_KEY) + len(_VERDICT_KEY)
    return obj, line[cut:line.rindex(_AFTER_VERDICT)], True


def decode_record(line: bytes) -> dict[str, Any]:
    return parse_record(line)[0]


_FIRST_KEY = b'{"candidate_sha256":"sha256:'


def is_torn_record(data: bytes) -> bool:
    """Whether ``data`` (an incomplete last line) can be the start of a record line: what
    a writer that died mid-``write`` leaves. Canonical JSON sorts keys, so every record
    line starts with the same bytes."""
    head = data[:len(_FIRST_KEY)]
    return (_FIRST_KEY.startswith(head) or _EVENT_KEY.startswith(data[:len(_EVENT_KEY)])) \
        and b"\n" not in data


def summary_mismatches(record: dict[str, Any], verdict_bytes: bytes | None = None,
                       *, fast: bool = False) -> list[str]:
    """Summary fields that disagree with the embedded verdict (empty when consistent).
    ``fast``: the record passed :func:`parse_record`'s fast path, so its numbers and
    characters are ones the C encoder writes in RFC 8785 form."""
    if record.get("schema") == EVENT_SCHEMA:
        return _event_mismatches(record, verdict_bytes)
    v = record["verdict"]
    expect = {
        "decision": v.get("decision"),
        "candidate_sha256": (v.get("candidate") or {}).get("sha256"),
        "definition_sha256": (v.get("definition") or {}).get("sha256"),
        "policy_sha256": (v.get("policy") or {}).get("sha256"),
        "seed": v.get("seed"),
    }
    bad = [k for k, want in expect.items() if record[k] != want]
    try:
        env = v.get("environment")
        env_bytes = (canon.encode(env) if fast and type(env) is dict else canon.dumps(env))
        if record["environment_sha256"] != sha256_tag(env_bytes):
            bad.append("environment_sha256")
        if record["verdict_sha256"] != sha256_tag(verdict_bytes or canon.dumps(v)):
            bad.append("verdict_sha256")
    except canon.CanonicalizationError:
        bad.append("verdict")
    return bad


def _event_mismatches(record: dict[str, Any], body: bytes | None) -> list[str]:
    e = record["event"]
    bad = [k for k in ("kind", "subject") if record[k] != e.get(k)]
    try:
        if record["event_sha256"] != sha256_tag(body or canon.dumps(e)):
            bad.append("event_sha256")
    except canon.CanonicalizationError:
        bad.append("event")
    return bad


def verdict_schema_problem(record: dict[str, Any]) -> str | None:
    """Whether the verdict still validates against today's model (schema drift, not tamper).
    Events have no model here (their producers define them): never drift."""
    if record.get("schema") == EVENT_SCHEMA:
        return None
    try:
        Verdict.model_validate(record["verdict"])
    except ValueError as exc:
        return str(exc).splitlines()[0]
    return None
