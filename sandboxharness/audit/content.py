"""What each record must be on its own: canonical, well-formed, its summary agreeing with
its verdict. Pure and chunk-at-a-time, so the verifier can run it in worker processes
while it hashes (see :mod:`.pool`).

Schema drift (a verdict the current model no longer accepts: a warning, not tampering)
is sampled: the first record of each chunk and each record whose ``harness_version``
differs from the one before - drift comes with a new harness version.
"""

from __future__ import annotations

import os
import re
import struct

from .interface import FormatError, TamperKind
from .records import parse_record_checked, summary_mismatches, verdict_schema_problem

Problem = tuple[int, str, str]
"""(record position, TamperKind value, message)."""
CHAIN = struct.Struct("<Q32s")
"""Per record: ``index`` and ``prev`` (raw hash), packed; NO_INDEX when it does not parse."""
NO_INDEX = (1 << 64) - 1
_UNPARSED = CHAIN.pack(NO_INDEX, bytes(32))


def check_region(fd: int, offset: int, length: int, first: int
                 ) -> tuple[list[Problem], list[str], bytes]:
    """:func:`check_records` on bytes [offset, offset+length) of an open log (complete
    lines, the last one with its newline): a worker reads them itself."""
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read at byte {offset} of the log")
    return check_records(data[:-1], first)


def check_records(data: bytes, first: int, skip: frozenset[int] = frozenset()
                  ) -> tuple[list[Problem], list[str], bytes]:
    """Check the lines of ``data`` (complete lines joined by newlines, the first one being
    record ``first``); positions in ``skip`` were judged already (oversized)."""
    problems: list[Problem] = []
    drift: list[str] = []
    chain: list[bytes] = []
    pack, version = CHAIN.pack, None
    for p, line in enumerate(data.split(b"\n"), first):
        chain.append(_UNPARSED)
        if p in skip:
            continue
        try:
            rec, verdict_bytes, fast = parse_record_checked(line)
            chain[-1] = pack(rec["index"], bytes.fromhex(rec["prev"][7:]))
        except FormatError as exc:
            problems.append((p, TamperKind.EDITED.value, f"record {p} {exc}"))
            continue
        except (ValueError, struct.error):  # prev not hex, index huge: not of a chain
            pass
        bad = summary_mismatches(rec, verdict_bytes, fast=fast)
        if bad:
            problems.append((p, TamperKind.INCONSISTENT_RECORD.value,
                             f"record {p}: {', '.join(bad)} disagree with its verdict"))
        if rec["harness_version"] != version and len(drift) < 3:
            version = rec["harness_version"]
            problem = verdict_schema_problem(rec)
            if problem:
                drift.append(f"record {p}: verdict does not validate against the current "
                             f"model (schema drift, not tampering): {problem}")
    return problems, drift, b"".join(chain)


# a verdict record has policy_sha256 between index and prev, an event record kind
_CHAIN_RE = re.compile(rb'"index":(0|[1-9][0-9]{0,15}),"(?:policy_sha256|kind)":"(?:[^"\\]|\\.)*",'
                       rb'"prev":"sha256:([0-9a-f]{64})"')


def chain_only(data: bytes, first: int, skip: frozenset[int] = frozenset()
               ) -> tuple[list[Problem], list[str], bytes]:
    """Only each record's ``index`` and ``prev``, read off its canonical bytes: for an
    integrity-only check (hashes, roots, signatures, chain) without parsing records."""
    pack, search = CHAIN.pack, _CHAIN_RE.search
    out: list[bytes] = []
    problems: list[Problem] = []
    for p, line in enumerate(data.split(b"\n"), first):
        # an event's body comes first and may hold any keys: search after it
        at = line.rfind(b',"event_sha256":') if line.startswith(b'{"event":') else 0
        m = None if p in skip else search(line, max(at, 0))
        if m:
            out.append(pack(int(m.group(1)), bytes.fromhex(m.group(2).decode())))
            continue
        out.append(_UNPARSED)
        if p not in skip:
            problems.append((p, TamperKind.EDITED.value, f"record {p} is not an audit record "
                             "(no index/prev where every record has them)"))
    return problems, [], b"".join(out)
