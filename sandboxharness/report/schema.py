"""The export schema: every table's columns, their types and what they hold.

Versioned: a column is never renamed or retyped within a version, only added; anything else
raises :data:`SCHEMA_VERSION`. ``docs/EXPORT_SCHEMA.md`` is generated from this module
(:func:`markdown`), and a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1

Kind = Literal["string", "int", "float", "bool", "time"]
STAGES = ("policy", "static", "compile", "correctness", "sanitizer", "benchmark", "profile",
          "promotion")
SIGNATURE_FIELDS: tuple[tuple[str, Kind], ...] = (
    ("kernel", "string"), ("bottleneck", "string"), ("limiter", "string"),
    ("duration_us", "float"), ("sm_throughput_pct", "float"), ("mem_throughput_pct", "float"),
    ("dram_throughput_pct", "float"),
    ("registers_per_thread", "int"), ("dyn_smem_per_block", "int"),
    ("theoretical_occupancy_pct", "float"), ("achieved_occupancy_pct", "float"),
    ("occupancy_limiter", "string"), ("waves_per_sm", "float"), ("l2_hit_pct", "float"),
    ("dram_bytes", "int"), ("grid_size", "int"), ("block_size", "int"))


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    doc: str


def _c(name: str, kind: Kind, doc: str) -> Column:
    return Column(name, kind, doc)


_SUBJECT = [
    _c("definition", "string", "Definition name."),
    _c("op_type", "string", "The definition's op_type (empty when the definition is absent)."),
    _c("solution", "string", "Solution name (untrusted text: escape before display)."),
    _c("author", "string", "The solution's author field (untrusted text)."),
    _c("language", "string", "triton, cuda, python, ..."),
]
_ENV = [
    _c("device", "string", "`cpu` or the GPU's name."),
    _c("driver", "string", "NVIDIA driver version where the verdict records it "
       "(`environment.extra.driver`), else null."),
    _c("python", "string", "Python version of the harness."),
    _c("torch", "string", "torch version."),
    _c("triton", "string", "Triton version (null without Triton)."),
    _c("platform", "string", "Host platform string."),
    _c("backend", "string", "Sandbox backend that ran the candidate."),
    _c("harness_version", "string", "sandboxharness version that judged it."),
    _c("policy_name", "string", "Policy name."),
    _c("policy_sha256", "string", "sha256 of the policy's canonical JSON."),
    _c("candidate_sha256", "string", "sha256 of the solution's canonical JSON."),
    _c("definition_sha256", "string", "sha256 of the definition's canonical JSON."),
    _c("verdict_sha256", "string", "sha256 of the verdict's canonical JSON: the audit "
       "record's `verdict_sha256`, the key to join with the audit log."),
    _c("run_id", "string", "`seed:<n>`: the definition's seed in its `run --local`; every "
       "candidate of one definition in one run shares it."),
    _c("seed", "int", "The verdict's root seed."),
    _c("started_at", "time", "When the evaluation began (UTC)."),
    _c("finished_at", "time", "When the verdict was made (UTC)."),
]
_STAGE_COLS = [_c(f"{s}_s", "float", f"Seconds the {s} stage took (null: not in the verdict).")
               for s in STAGES]

RESULTS = [
    *_SUBJECT,
    _c("workload", "string", "Workload uuid."),
    _c("axes", "string", "The workload's axis values, JSON (`{\"batch\": 4}`)."),
    _c("status", "string", "FlashInfer-Bench trace status for this workload (PASSED, "
       "INCORRECT_NUMERICAL, ...); null without a trace."),
    _c("decision", "string", "promote or reject (the whole candidate's verdict); null when "
       "only a trace exists (no stored verdict)."),
    _c("reasons", "string", "Reason codes of the verdict, `;`-separated, in order."),
    *_STAGE_COLS,
    _c("latency_ms", "float", "Candidate median latency (ms)."),
    _c("latency_p25_ms", "float", "Candidate 25th percentile (ms)."),
    _c("latency_p75_ms", "float", "Candidate 75th percentile (ms)."),
    _c("latency_mean_ms", "float", "Candidate mean (ms)."),
    _c("latency_min_ms", "float", "Candidate fastest call (ms)."),
    _c("dispersion", "float", "(p75 - p25) / median of the candidate's timed calls."),
    _c("timed_calls", "int", "Timed calls behind the statistics."),
    _c("clock", "string", "What timed it (CUPTI, CUDA events, CPU wall clock)."),
    _c("reference_ms", "float", "Reference median latency (ms), same run."),
    _c("flashinfer_ms", "float", "FlashInfer baseline median latency (ms), when timed."),
    _c("speedup", "float", "reference_ms / latency_ms."),
    _c("speedup_vs_flashinfer", "float", "flashinfer_ms / latency_ms."),
    _c("max_abs_error", "float", "Largest absolute error over the workload's trials."),
    _c("max_rel_error", "float", "Largest relative error over the workload's trials."),
    _c("pct_sol", "float", "Speed-of-light time as % of the measured median (GPU)."),
    _c("bound", "string", "memory or compute: the roofline side of this workload (GPU)."),
    _c("speed_of_light_ms", "float", "Roofline floor for the workload (ms, GPU)."),
    *[_c(f"sig_{name}", kind, f"Profile signature: {name} (null unless profiled).")
      for name, kind in SIGNATURE_FIELDS],
    _c("trace_timestamp", "time", "The trace line's timestamp (UTC)."),
    *_ENV,
]

VERDICTS = [
    *_SUBJECT,
    _c("decision", "string", "promote or reject."),
    _c("reasons", "string", "Reason codes, `;`-separated."),
    _c("reason_messages", "string", "`CODE: message` per reason, newline-separated "
       "(untrusted text: may echo the candidate)."),
    *[_c(f"{s}_status", "string", "passed, failed or skipped (null: not in the verdict).")
      for s in STAGES],
    *_STAGE_COLS,
    _c("total_s", "float", "Sum of the stage durations."),
    _c("workloads", "int", "Dataset workloads the benchmark timed."),
    _c("speedup_geomean", "float", "Geometric mean of the per-workload speedups."),
    _c("isolation", "string", "Isolation layers in force, `;`-separated."),
    _c("stored_line", "int", "Line of the verdict in its `verdicts/` file (1-based)."),
    *_ENV,
]

ROUNDS = [
    _c("campaign", "string", "The campaign directory's name."),
    _c("round", "int", "Round number."),
    _c("definition", "string", "Definition the round worked on (when recorded)."),
    _c("verdict", "string", "The round's one verdict: archive, promote or reject "
       "(`baseline` for round 0, the starting solution)."),
    _c("best_mean_ms", "float", "Best full-sweep mean latency as it stood after the round "
       "(ms): the baseline's, then each promotion's."),
    _c("candidates", "int", "Candidates evaluated in the round."),
    _c("hypothesis", "string", "The round's hypothesis or direction (untrusted text)."),
    _c("time", "time", "When the round ended (UTC)."),
]

TABLES: dict[str, list[Column]] = {"results": RESULTS, "verdicts": VERDICTS, "rounds": ROUNDS}


def arrow_schema(table: str) -> pa.Schema:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int64(), "float": pa.float64(),
             "bool": pa.bool_(), "time": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(c.name, types[c.kind], nullable=True,
                               metadata={"doc": c.doc}) for c in TABLES[table]],
                     metadata={"sandboxharness.export_schema": str(SCHEMA_VERSION),
                               "sandboxharness.table": table})


_INTRO = """# Export schema (version {v})

`sandboxharness export --local DATASET --format parquet|csv --out DIR` and
`sandboxharness report --local DATASET --out DIR` write these tables: `results` (one row per
solution x workload, the newest stored verdict of each solution), `verdicts` (every stored
verdict) and `rounds` (campaign rounds from `--campaign DIR/state.json`). Parquet files carry the schema
version in their metadata (`sandboxharness.export_schema`) and every column's description;
`manifest.json` beside them names the version, the tables and their row counts.

Version {v}: columns are only ever added within a version; a rename or a type change is a new
version. Text from documents (solution names, authors, messages) is untrusted: escape it
before display. Generated from `sandboxharness/report/schema.py`.
"""


def markdown() -> str:
    out = [_INTRO.format(v=SCHEMA_VERSION)]
    for name, cols in TABLES.items():
        out.append(f"\n## `{name}`\n\n| column | type | holds |\n|---|---|---|\n")
        out.extend(f"| `{c.name}` | {c.kind} | {c.doc.replace('|', '/')} |\n" for c in cols)
    return "".join(out)
