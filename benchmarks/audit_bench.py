"""Audit log benchmark: append throughput, verification time, proof and file sizes.

    .venv/bin/python benchmarks/audit_bench.py [--sizes 1000 10000] [--dir DIR]

Every append is a real ``record_verdict`` (one record, one Ed25519-signed checkpoint,
two fsyncs), every verification a full ``get_verification_result`` (all records parsed
and checked canonical, every checkpoint signature verified, every root recomputed).
Prints a table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.table import Table

from sandboxharness.audit import (
    Signer,
    get_verification_result,
    prove_consistency,
    prove_inclusion,
    record_verdict,
)
from sandboxharness.audit._samples import sample_verdict

WINDOW = 100  # appends timed at the start and at the end of each log size


def _build(log: Path, n: int, signer: Signer) -> tuple[float, float, list[str]]:
    """Append n verdicts; appends/s over the first and the last WINDOW appends."""
    verdicts = [sample_verdict(i) for i in range(n)]
    marks: dict[int, float] = {}
    checkpoints = []
    for i, verdict in enumerate(verdicts):
        if i in (0, min(WINDOW, n), max(n - WINDOW, 0)):
            marks[i] = time.perf_counter()
        checkpoints.append(record_verdict(verdict, log, signer).checkpoint_text)
    end = time.perf_counter()
    w = min(WINDOW, n)
    first = w / (marks[w] - marks[0]) if w in marks and w else 0.0
    last = w / (end - marks[max(n - WINDOW, 0)])
    return first, last, checkpoints


def _slow_append_rate(log: Path, signer: Signer, times: int = 5) -> float:
    """Appends/s without the head cache (the writer re-hashes the whole log)."""
    state = log.with_name(log.name + ".state")
    start = time.perf_counter()
    for i in range(times):
        state.unlink(missing_ok=True)
        record_verdict(sample_verdict(10**6 + i), log, signer)
    return times / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--dir", type=Path, default=None, help="where to build the logs")
    args = parser.parse_args()
    signer = Signer("bench", Ed25519PrivateKey.generate())
    keys = [signer.public_key]
    table = Table(title=f"audit log - {platform.processor() or platform.machine()}, "
                        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
                        f"{datetime.now(UTC):%Y-%m-%d}")
    for col in ("records", "appends/s first 100", "appends/s last 100",
                "appends/s no cache", "verify s", "verify us/record", "log MiB",
                "bytes/record", "checkpoint bytes", "inclusion proof hashes / bundle B",
                "consistency N/2->N hashes"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in args.sizes:
            log = Path(tmp) / f"audit-{n}.log"
            first, last, checkpoints = _build(log, n, signer)
            start = time.perf_counter()
            result = get_verification_result(log, keys)
            verify_s = time.perf_counter() - start
            if not result.ok:
                raise SystemExit(f"benchmark log does not verify: {result.summary()}")
            proof = prove_inclusion(log, n // 3)
            old, new = Path(tmp) / "old.note", Path(tmp) / "new.note"
            old.write_text(checkpoints[n // 2 - 1])
            new.write_text(checkpoints[-1])
            consistency = prove_consistency(log, old, new, keys)
            log_bytes = log.stat().st_size
            cp_bytes = log.with_name(log.name + ".checkpoints").stat().st_size
            slow = _slow_append_rate(log, signer)
            table.add_row(
                str(n), f"{first:.0f}", f"{last:.0f}", f"{slow:.1f}", f"{verify_s:.2f}",
                f"{verify_s / n * 1e6:.0f}", f"{log_bytes / 2**20:.1f}", f"{log_bytes // n}",
                f"{cp_bytes // n}",
                f"{len(proof['proof'])} / {len(json.dumps(proof))}",
                str(len(consistency["proof"])))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
