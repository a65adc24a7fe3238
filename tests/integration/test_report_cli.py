"""`export`, `report` and `report summary|best` on a dataset a real `run --local` produced."""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from sandboxharness.dataset.verdictstore import iter_verdicts
from tests.integration.report_data import HOSTILE_NAME, SOLUTIONS, WORKLOADS, cli, report_dataset, shx

ROWS = len(SOLUTIONS) * WORKLOADS


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report_dataset(tmp_path_factory.mktemp("report"))


def test_every_verdict_is_stored_beside_the_traces(dataset: Path) -> None:
    verdicts = list(iter_verdicts(dataset))
    assert sorted(v.candidate.name for v in verdicts) == sorted(n for _, n, _, _ in
                                                                SOLUTIONS.values())
    # the stored verdict is the one the audit log signed: same canonical hash
    records = [json.loads(x) for x in (dataset.parent / "audit.jsonl").read_text().splitlines()]
    table = pq.read_table(_export(dataset, "parquet") / "verdicts.parquet").to_pylist()
    assert {r["verdict_sha256"] for r in records} == {r["verdict_sha256"] for r in table}


def _export(dataset: Path, fmt: str) -> Path:
    out = dataset.parent / f"export-{fmt}"
    shutil.rmtree(out, ignore_errors=True)
    res = shx("export", "--local", str(dataset), "--format", fmt, "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_parquet_export_has_a_row_per_solution_and_workload(dataset: Path) -> None:
    out = _export(dataset, "parquet")
    results = pq.read_table(out / "results.parquet")
    assert results.num_rows == ROWS
    assert results.schema.metadata[b"sandboxharness.export_schema"] == b"1"
    rows = results.to_pylist()
    good = [r for r in rows if r["solution"] == "good"]
    assert {r["status"] for r in good} == {"PASSED"} and {r["decision"] for r in good} == \
        {"promote"}
    assert all(r["latency_ms"] > 0 and r["reference_ms"] > 0 and r["speedup"] > 0 and
               r["latency_p25_ms"] <= r["latency_ms"] <= r["latency_p75_ms"] and
               r["compile_s"] > 0 and r["timed_calls"] == 4 for r in good)
    shell = [r for r in rows if r["solution"] == "shell"]
    assert {r["reasons"] for r in shell} == {"STATIC_FINDING"}
    assert all(r["latency_ms"] is None for r in shell)  # never a made-up zero
    assert {r["device"] for r in rows} == {"cpu"} and all(r["policy_sha256"] for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tables"]["results"]["rows"] == ROWS and manifest["export_schema"] == 1


def test_duckdb_reads_the_parquet(dataset: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = _export(dataset, "parquet")
    con = duckdb.connect()
    got = con.execute(
        "SELECT solution, count(*) AS n, any_value(decision) FROM read_parquet(?) "
        "GROUP BY solution ORDER BY solution", [str(out / "results.parquet")]).fetchall()
    assert len(got) == len(SOLUTIONS) and all(n == WORKLOADS for _, n, _ in got)
    joined = con.execute(
        "SELECT count(*) FROM read_parquet(?) r JOIN read_parquet(?) v "
        "USING (verdict_sha256)", [str(out / "results.parquet"),
                                   str(out / "verdicts.parquet")]).fetchone()
    assert joined == (ROWS,)


def test_csv_export_reads_back_with_the_same_rows(dataset: Path) -> None:
    out = _export(dataset, "csv")
    table = pacsv.read_csv(out / "results.csv")
    assert table.num_rows == ROWS
    assert HOSTILE_NAME in table.column("solution").to_pylist()
    assert pacsv.read_csv(out / "verdicts.csv").num_rows == len(SOLUTIONS)


def test_report_writes_html_and_parquet_beside_it(dataset: Path) -> None:
    out = dataset.parent / "report"
    res = shx("report", "--local", str(dataset), "--out", str(out))
    assert res.returncode == 0, res.stderr
    page = (out / "report.html").read_text()
    assert pq.read_table(out / "results.parquet").num_rows == ROWS
    assert page.count('class="plot"') >= 7  # reasons + 3 per definition
    assert HOSTILE_NAME not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, dataset: Path) -> None:
    res = cli("export", "--local", str(tmp_path), "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "definitions/" in res.stderr
    bad = tmp_path / "ds"
    shutil.copytree(dataset, bad)
    trace = next((bad / "verdicts").rglob("*.jsonl"))
    trace.write_text(trace.read_text() + "{not json}\n")
    res = shx("report", "--local", str(bad), "--out", str(tmp_path / "r"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{trace}:" in res.stderr


def _fib_messages(dataset: Path, view: str) -> list[str]:
    """FlashInfer-Bench's own `report` command functions on the same dataset, at INFO."""
    main = pytest.importorskip("flashinfer_bench.cli.main")
    from flashinfer_bench.logging import configure_logging

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    configure_logging("INFO", handler=Keep())
    getattr(main, view)(argparse.Namespace(local=[dataset], hub=False))
    return lines


@pytest.mark.parametrize("view", ["summary", "best"])
def test_text_views_match_flashinfer_bench(dataset: Path, view: str) -> None:
    ours = shx("report", view, "--local", str(dataset))
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == _fib_messages(dataset, view)


def test_best_warnings_match_the_flashinfer_bench_console_script(dataset: Path) -> None:
    """As shipped, FIB's `report best` shows only its warnings (its level stays WARNING)."""
    exe = shutil.which("flashinfer-bench") or str(Path(__import__("sys").executable).parent /
                                                  "flashinfer-bench")
    if not Path(exe).exists():
        pytest.skip("flashinfer-bench is not installed")
    import subprocess

    fib = subprocess.run([exe, "report", "best", "--local", str(dataset)], capture_output=True,
                         text=True, timeout=300)
    assert fib.returncode == 0, fib.stderr
    warned = [line.split(": ", 1)[1] for line in fib.stderr.splitlines() if " WARNING " in line]
    ours = shx("report", "best", "--local", str(dataset)).stdout.splitlines()
    assert warned == ["No valid solution found for rms_u."]
    assert [x for x in ours if x.startswith("No valid solution")] == warned
