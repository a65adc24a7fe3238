"""What each record must be on its own: canonical, well-formed, its summary agreeing with
its verdict. Pure and chunk-at-a-time, so the verifier can run it in worker processes
while it hashes (see :mod:`.pool`).

Schema drift (a verdict the current model no longer accepts: a warning, not tampering)
is sampled: the first record of each chunk and each record whose ``harness_version``
differs from the one before - drift comes with a new harness version.
"""

from __future__ import annotations

from .interface import FormatError, TamperKind
from .records import parse_record, summary_mismatches, verdict_schema_problem

Problem = tuple[int, str, str]
"""(record position, TamperKind value, message)."""
Chain = tuple[int | None, bytes | None]
"""A record's ``index`` and ``prev`` (raw hash); (None, None) when it does not parse."""


def check_records(data: bytes, first: int, skip: frozenset[int] = frozenset()
                  ) -> tuple[list[Problem], list[str], list[Chain]]:
    """Check the lines of ``data`` (complete lines joined by newlines, the first one being
    record ``first``); positions in ``skip`` were judged already (oversized)."""
    problems: list[Problem] = []
    drift: list[str] = []
    chain: list[Chain] = []
    version: object = None
    for p, line in enumerate(data.split(b"\n"), first):
        chain.append((None, None))
        if p in skip:
            continue
        try:
            rec, verdict_bytes = parse_record(line)
            chain[-1] = (rec["index"], bytes.fromhex(rec["prev"][7:]))
        except FormatError as exc:
            problems.append((p, TamperKind.EDITED.value, f"record {p} {exc}"))
            continue
        except ValueError:  # prev is not hex: a record, but not one of a chain
            pass
        bad = summary_mismatches(rec, verdict_bytes)
        if bad:
            problems.append((p, TamperKind.INCONSISTENT_RECORD.value,
                             f"record {p}: {', '.join(bad)} disagree with its verdict"))
        if rec["harness_version"] != version and len(drift) < 3:
            version = rec["harness_version"]
            problem = verdict_schema_problem(rec)
            if problem:
                drift.append(f"record {p}: verdict does not validate against the current "
                             f"model (schema drift, not tampering): {problem}")
    return problems, drift, chain
