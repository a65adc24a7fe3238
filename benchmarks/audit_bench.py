"""Audit log benchmark: append throughput, streaming verification, and a kill-and-verify
fault run. Prints a Markdown report (machine, versions, date, tables).

    .venv/bin/python benchmarks/audit_bench.py [--sizes 10000 100000 1000000]
        [--dir DIR] [--verify-dir DIR] [--rounds 10] [--out FILE]

What each number means:

* appends/s, ``append``: one verdict per call, durable before the call returns (records
  and checkpoint fsynced). Concurrent callers - threads of one process, or processes -
  share commits (group commit), so 8 writers go faster than 1.
* appends/s, ``append_many``: one writer handing over 64 verdicts per call (one commit).
* verify: a full ``get_verification_result`` (every record parsed and checked canonical,
  every checkpoint signature verified, every root recomputed, the chain followed) in a
  fresh process; peak RSS of that process and of its worker processes.
* kill-and-verify: writer processes SIGKILLed at random moments, again and again; after
  each round the log must verify and hold every acknowledged append.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import cryptography
from cryptography.hazmat.backends.openssl.backend import backend as openssl
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sandboxharness.audit import AuditLog, Signer, record_verdict
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.commit import Config, Writer
from sandboxharness.audit.interface import DEFAULT_LIMITS
from sandboxharness.audit.records import prepare

HERE = Path(__file__).resolve()
_VERIFY = """
import json, resource, sys, time
from pathlib import Path
from sandboxharness.audit import get_verification_result
from sandboxharness.audit.keys import parse_public_key
key = parse_public_key(sys.argv[2], where="key")
start = time.perf_counter()
r = get_verification_result(Path(sys.argv[1]), [key], content=sys.argv[3] == "full")
took = time.perf_counter() - start
hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")]
print(json.dumps({"ok": r.ok, "size": r.size, "checkpoints": r.checkpoints, "s": took,
    "rss": hwm[0], "workers_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _fsync_ms(directory: Path) -> float:
    path = directory / ".fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(50):
            os.write(fd, b"x" * 2000)
            t = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return sorted(times)[len(times) // 2] * 1e3


def _single(directory: Path, signer: Signer, n: int) -> float:
    log, verdicts = directory / "single.log", [sample_verdict(i) for i in range(n)]
    start = time.perf_counter()
    for v in verdicts:
        record_verdict(v, log, signer)
    return n / (time.perf_counter() - start)


def _many(directory: Path, signer: Signer, n: int) -> float:
    log, verdicts = AuditLog(directory / "many.log"), [sample_verdict(i) for i in range(n)]
    start = time.perf_counter()
    log.append_many(verdicts, signer)
    return n / (time.perf_counter() - start)


def _threads(directory: Path, signer: Signer, writers: int, each: int) -> tuple[float, int]:
    log = directory / "threads.log"
    record_verdict(sample_verdict(0), log, signer)
    verdicts = [[sample_verdict(i, name=f"t{t}-{i}") for i in range(each)]
                for t in range(writers)]
    threads = [threading.Thread(target=lambda vs=vs: [record_verdict(v, log, signer)
                                                       for v in vs]) for vs in verdicts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return writers * each / (time.perf_counter() - start), _commits(log) - 1


def _commits(log: Path) -> int:
    return log.with_name(log.name + ".checkpoints").read_bytes().count(b"\n\n") // 2


def _processes(directory: Path, signer: Signer, writers: int, each: int) -> tuple[float, int]:
    log = directory / "procs.log"
    record_verdict(sample_verdict(0), log, signer)
    start_at = time.time() + 2.0  # after every interpreter has started
    procs = [subprocess.Popen([sys.executable, str(HERE), "_writer", str(log),
                               signer.to_private_text(), str(w), str(each), str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(writers)]
    ends = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode:
            raise SystemExit(f"a writer failed: {err.strip().splitlines()[-1:]}")
        ends.append(float(out.split()[-1]))
    return writers * each / (max(ends) - start_at), _commits(log) - 1


def _build(log: Path, signer: Signer, n: int, batch: int) -> float:
    """A log of n records, ``batch`` per commit, through the real writer (the verdicts
    canonicalised once and reused: building 1M records is not what is measured)."""
    items = [prepare(sample_verdict(i)) for i in range(256)]
    writer, cfg = Writer(log), Config(DEFAULT_LIMITS, None, lambda: datetime.now(UTC))
    start, k = time.perf_counter(), 0
    while k < n:
        m = min(batch, n - k)
        writer.commit([[items[(k + j) % 256] for j in range(m)]], signer, cfg)
        k += m
    return time.perf_counter() - start


def _verify(log: Path, signer: Signer, checks: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _VERIFY, str(log),
                           signer.public_key.to_vkey(), checks], capture_output=True, text=True,
                          timeout=1800, check=True)
    out: dict[str, float] = json.loads(proc.stdout)
    if not out["ok"]:
        raise SystemExit(f"benchmark log does not verify: {log}")
    return out


def _kill_rounds(directory: Path, signer: Signer, rounds: int, writers: int) -> dict[str, int]:
    from sandboxharness.audit import get_verification_result
    from sandboxharness.audit.view import read_entries

    log, rng = directory / "killed.log", random.Random(20261201)  # noqa: S311 - jitter
    record_verdict(sample_verdict(0, name="first"), log, signer)
    acked: dict[int, str] = {0: "first"}
    torn = kills = 0
    for r in range(rounds):
        procs = [subprocess.Popen([sys.executable, str(HERE), "_loop", str(log),
                                   signer.to_private_text(), f"r{r}w{w}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for w in range(writers)]
        outs: list[list[str]] = [[] for _ in procs]
        readers = [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout or []))
                   for p, o in zip(procs, outs, strict=True)]
        for t in readers:
            t.start()
        deadline = time.time() + 60
        while not all(outs) and time.time() < deadline:  # every writer is appending
            time.sleep(0.05)
        time.sleep(rng.uniform(0.2, 1.0))  # then kill them all at a random moment
        for p in procs:
            p.send_signal(signal.SIGKILL)
            kills += 1
        for p, t in zip(procs, readers, strict=True):
            p.wait(timeout=60)
            t.join(timeout=60)
        for o in outs:
            for line in o:
                if line.endswith("\n"):  # a line cut by the kill was never acknowledged
                    index, name = line.split()
                    acked[int(index)] = name
        result = get_verification_result(log, [signer.public_key])
        torn += result.torn_tail is not None
        if not result.ok:
            raise SystemExit(f"round {r}: {result.summary()}")
    result = get_verification_result(log, [signer.public_key])
    names = {e.index: e.field("candidate", "name") for e in read_entries(log)[0] if e.signed}
    lost = sum(1 for i, name in acked.items() if names.get(i) != name)
    return {"rounds": rounds, "kills": kills, "acked": len(acked), "lost": lost,
            "torn": torn, "size": result.size}


def _burn(n: int) -> None:
    total = 0
    for i in range(n):
        total += i


def _free_cores() -> float:
    """How many cores this run actually gets: two CPU-bound processes against one."""
    code = f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); import audit_bench as b; " \
           "b._burn(15_000_000)"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    one = time.perf_counter() - start
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    for p in procs:
        p.wait()
    return 2 * one / (time.perf_counter() - start)


def _machine(directory: Path, verify_dir: Path) -> list[str]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return [f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            f"- machine: {cpu}, {os.cpu_count()} CPUs, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
            f"Linux {platform.release()}, load average {os.getloadavg()[0]:.1f} at start "
            f"(shared: two CPU-bound processes got {_free_cores():.2f} cores)",
            f"- Python {platform.python_version()}, cryptography {cryptography.__version__} "
            f"({openssl.openssl_version_text()})",
            f"- appends on {directory} (fsync median {_fsync_ms(directory):.2f} ms); "
            f"verification logs built on {verify_dir}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--dir", type=Path, default=None, help="where appends are measured")
    shm = Path("/dev/shm")  # noqa: S108 - tmpfs on purpose: scratch logs of up to 2 GB
    parser.add_argument("--verify-dir", type=Path, default=shm if shm.is_dir() else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    signer = Signer("bench", Ed25519PrivateKey.generate())
    report = _Report(args.out)
    report += ["# Audit log benchmark", ""]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, \
            tempfile.TemporaryDirectory(dir=args.verify_dir) as vtmp:
        d, v = Path(tmp), Path(vtmp)
        report += _machine(d, v) + ["", "## Appends (durable on return)", "",
                                    "| writers | API | appends/s | commits |",
                                    "|---|---|---:|---:|"]
        report.append(f"| 1 | `append` (one verdict per call) | {_single(d, signer, 2000):.0f} "
                      "| 2000 |")
        report.append(f"| 1 | `append_many` (64 per call) | {_many(d, signer, 20_000):.0f} "
                      f"| {20_000 // 64 + 1} |")
        rate, commits = _threads(d, signer, 8, 300)
        report.append(f"| 8 threads | `append` | {rate:.0f} | {commits} for 2400 |")
        rate, commits = _processes(d, signer, 8, 300)
        report.append(f"| 8 processes | `append` | {rate:.0f} | {commits} for 2400 |")
        report += ["", "## Verification (`get_verification_result`, fresh process)", "",
                   "| records | checkpoints | checks | verify s | records/s | peak RSS MiB "
                   "(main / each worker) |", "|---:|---:|---|---:|---:|---:|"]
        rows = [(n, 64) for n in args.sizes] + [(args.sizes[0], 1)]
        for n, batch in rows:
            log = v / f"verify-{n}-{batch}.log"
            _build(log, signer, n, batch)
            for checks in ("full", "integrity"):
                out = _verify(log, signer, checks)
                report.append(f"| {n:,} | {out['checkpoints']:,.0f} (1 per {batch}) | {checks} | "
                              f"{out['s']:.1f} | {n / out['s']:,.0f} | {out['rss'] / 1024:.0f} "
                              f"/ {out['workers_rss'] / 1024:.0f} |")
            for p in v.glob(log.name + "*"):
                p.unlink()
        k = _kill_rounds(d, signer, args.rounds, 8)
        report += ["", "## Kill and verify", "",
                   "| rounds | writers SIGKILLed | acknowledged appends | lost | rounds that "
                   "left a torn tail | log size at the end |", "|---:|---:|---:|---:|---:|---:|",
                   f"| {k['rounds']} | {k['kills']} | {k['acked']} | {k['lost']} | {k['torn']} | "
                   f"{k['size']} |"]


class _Report(list[str]):
    """Lines printed (and saved) as they come: a crash late in the run keeps the rest."""

    def __init__(self, out: Path | None) -> None:
        super().__init__()
        self.out = out

    def __iadd__(self, lines: object) -> _Report:  # type: ignore[override,misc]
        for line in lines:  # type: ignore[attr-defined]
            self.append(line)
        return self

    def append(self, line: str) -> None:
        super().append(line)
        print(line, flush=True)
        if self.out is not None:
            self.out.write_text("\n".join(self) + "\n")


def _writer(log: str, key: str, worker: str, each: str, start_at: str) -> None:
    from sandboxharness.audit.keys import parse_private_key

    signer = parse_private_key(key, where="key")
    verdicts = [sample_verdict(i, name=f"p{worker}-{i}") for i in range(int(each))]
    while time.time() < float(start_at):
        time.sleep(0.0005)
    for v in verdicts:
        record_verdict(v, Path(log), signer)
    print(time.time(), flush=True)


def _loop(log: str, key: str, tag: str) -> None:
    from sandboxharness.audit.keys import parse_private_key

    signer, i = parse_private_key(key, where="key"), 0
    while True:
        name = f"{tag}-{i}"
        result = record_verdict(sample_verdict(i, name=name), Path(log), signer)
        print(result.index, name, flush=True)
        i += 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_writer":
        _writer(*sys.argv[2:7])
    elif len(sys.argv) > 1 and sys.argv[1] == "_loop":
        _loop(*sys.argv[2:5])
    else:
        main()
