"""Evaluation policy: what is allowed, the limits, the tolerances and the promotion rule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ._base import FiniteModel, FrozenModel
from .solution import Language

Severity = Literal["low", "medium", "high"]
StageName = Literal["static", "compile", "correctness", "sanitizer", "benchmark"]


class ImportRules(FrozenModel):
    allow: list[str] | None = None
    """If set, only these top-level modules (or dotted prefixes) may be imported."""
    deny: list[str] = Field(default_factory=list)
    """Modules that may never be imported (dotted prefixes match submodules)."""


class StaticRules(FrozenModel):
    bandit: bool = True
    semgrep: bool = True
    ast_rules: bool = True
    fail_on: Severity = "medium"
    """Findings of this severity or above reject the candidate."""
    ignore_rules: list[str] = Field(default_factory=list)
    """Rule ids the policy owner accepts (candidates' own suppression comments never count)."""
    timeout_s: float = Field(default=120.0, gt=0)


class Limits(FiniteModel):
    """What one sandboxed process may use. Each bound is one both backends can honour (and,
    at the low end, one the worker's own start fits in), so a policy can never make an honest
    candidate fail, nor ask a backend for what it cannot set: such a policy is refused when it
    is loaded, naming the field. Floats must be finite."""

    compile_timeout_s: float = Field(default=120.0, ge=1, le=7200)
    """Wall clock for importing / building the candidate. At least 1 s (the host's timers and
    the worker's start); at most 2 h (a CUDA build of a large template; past that the harness
    would hold a job slot for nothing, and ``select`` refuses huge timeouts)."""
    run_timeout_s: float = Field(default=300.0, ge=1, le=86400)
    """Wall clock for one call, and per case for a whole worker session (its trials and timed
    calls): a session of n cases gets compile_timeout_s + n x this, so a full workload set is
    never cut short for its size (``stages.limits.session_limits``); at most a day."""
    memory_mb: int = Field(default=8192, ge=128, le=4 * 1024 * 1024)
    """Memory cgroup (or RLIMIT_AS) per job, MiB. At least 128 (the launcher and the pid-1
    init are Python processes; a worker that imports torch needs ~500 more); at most 4 TiB
    (larger than any host; ``memory_mb * 2**20`` must fit the kernel's 64-bit limits)."""
    cpu_time_s: int = Field(default=600, ge=30, le=7 * 86400)
    """RLIMIT_CPU per process and per case of its session (n cases: n x this), s. At least
    30: the worker's own start (interpreter, torch, Triton) costs several CPU seconds, and a
    lower limit would kill an honest candidate before its first call and read as its fault.
    At most a week."""
    max_processes: int = Field(default=256, ge=16, le=65536)
    """pids cgroup / RLIMIT_NPROC: threads count. At least 16 (torch and OpenMP start
    threads at import); at most 65536 (the kernel's usual ``pid_max`` region)."""
    max_open_files: int = Field(default=256, ge=64, le=1 << 20)
    """RLIMIT_NOFILE. At least 64 (the interpreter and torch hold dozens); at most 2**20, the
    kernel's default ``fs.nr_open`` (setrlimit above it fails)."""
    max_file_size_mb: int = Field(default=256, ge=1, le=1024 * 1024)
    """RLIMIT_FSIZE, MiB; at most 1 TiB (the limit is set in bytes: ``2**50`` MiB does not fit
    in 64 bits)."""
    max_log_bytes: int = Field(default=64 * 1024, ge=1024, le=256 * 1024 * 1024)
    """stdout/stderr kept per process; the rest is dropped (counted). Kept in host memory,
    so at most 256 MiB."""
    max_result_mb: int = Field(default=512, ge=1, le=256 * 1024)
    """Largest result file the host reads back (into its own memory): at most 256 GiB."""


class Tolerance(FrozenModel):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


# --- comparison overrides (FlashInfer-Bench fidelity): per definition / op_type -------------
ComparisonMode = Literal["auto", "tolerance", "exact", "set", "sampling"]
"""How an output is compared: ``tolerance`` (atol AND rtol, matched ratio), ``exact`` (every
element equal: the default for integer and bool outputs), ``set`` (per row, the same indices in
any order; ties at the k-th score allowed when the scores are an input), ``sampling`` (every
sample inside its row's top-k/top-p set, then the distribution by total variation distance);
``auto`` decides from the definition (see ``sandboxharness.stages.compare_modes``)."""


class SamplingRules(FrozenModel):
    """FlashInfer-Bench's sampling evaluator: validity mask, then total variation distance."""

    tvd_threshold: float = Field(default=0.2, ge=0, le=1)
    """Largest TVD between a row's sample frequencies and its expected distribution."""
    samples_per_row: int = Field(default=10000, ge=1)
    """Samples per row the worker is asked for when it supports repeated calls."""
    min_samples_per_row: int = Field(default=100, ge=1)
    """Below this many samples per row the TVD is not judged (noise), and the details say so."""
    top_p_eps: float = Field(default=0.05, ge=0)
    """Slack at the nucleus boundary (FlashInfer-Bench's 5e-2)."""
    budget_s: float = Field(default=60.0, gt=0, le=3600)
    """Wall clock for the repeated calls of one case (at most a quarter of the run timeout):
    past it the samples made so far are judged, and the details say how many per row."""


class ComparisonOverride(FrozenModel):
    """One rule for the definitions it matches (by name glob or op_type glob), like
    FlashInfer-Bench's ``op_type_config`` / ``definition_config``. Rules apply in list order,
    later ones win; the verdict's correctness details name every rule applied."""

    name: str = Field(min_length=1)
    definitions: list[str] = Field(default_factory=list)
    """``fnmatch`` globs over the definition's name."""
    op_types: list[str] = Field(default_factory=list)
    """``fnmatch`` globs over the definition's op_type."""
    tolerance: Tolerance | None = None
    """Replaces the tolerance for every dtype (the per-dtype table included)."""
    dtype_tolerance: dict[str, Tolerance] = Field(default_factory=dict)
    required_matched_ratio: float | None = Field(default=None, gt=0, le=1)
    modes: dict[str, ComparisonMode] = Field(default_factory=dict)
    """Output-name glob -> comparison mode (``"*"`` for every output)."""
    state_inputs: list[str] = Field(default_factory=list)
    """Input-name globs that are state (updated in place by the operator's contract), besides
    the inputs the reference itself mutates."""
    sampling: SamplingRules | None = None

    @model_validator(mode="after")
    def _check(self) -> ComparisonOverride:
        if not self.definitions and not self.op_types:
            raise ValueError(f"override {self.name!r} matches nothing: give definitions or "
                             "op_types")
        return self
# --- end of comparison overrides ------------------------------------------------------------


class CorrectnessRules(FrozenModel):
    trials: int = Field(default=3, ge=1)
    """Fresh seeded inputs per trial, for every workload."""
    max_workloads: int | None = Field(default=None, ge=1)
    """None: every workload of the file, as FlashInfer-Bench runs them. A number samples that
    many, spread over the file by size; the verdict's coverage notes say so."""
    heldout_values: list[int] = Field(default_factory=lambda: [1, 3, 37])
    """Extra values tried on every var axis, beyond the workload file."""
    tolerance: Tolerance = Tolerance(atol=1e-2, rtol=1e-2)
    dtype_tolerance: dict[str, Tolerance] = Field(default_factory=dict)
    """Per-output-dtype overrides (e.g. looser for bfloat16)."""
    required_matched_ratio: float = Field(default=1.0, gt=0, le=1)
    """FlashInfer-Bench semantics: an element fails only if abs err > atol AND rel err > rtol."""
    # --- comparison overrides (FlashInfer-Bench fidelity) -----------------------------------
    overrides: list[ComparisonOverride] = Field(default_factory=list)
    """Per-definition / per-op_type tolerances, matched ratios, comparison modes, state
    inputs; applied in order (see ComparisonOverride)."""
    sampling: SamplingRules = SamplingRules()
    """Stochastic outputs (``sampling`` mode): FlashInfer-Bench's thresholds by default."""
    # --- end of comparison overrides -------------------------------------------------------
    # --- input generation: roles, held-out distributions, secret held-out sizes ------------
    input_roles: dict[str, str] = Field(default_factory=dict)
    """Input-name glob (``kv_indices``, ``*_indptr``, ``<definition>/<input>``) -> role spec,
    ``role`` or ``role:<axis expression>`` (e.g. ``page:num_pages``, ``indptr:total_q``);
    overrides the built-in inference (a definition's own ``input_role:`` tag wins)."""
    distributions: list[Literal["plain", "scaled_up", "scaled_down", "outlier_channels",
                                "zero_rows", "negative", "nonunit_weights"]] = Field(
        default_factory=lambda: list[Literal[
            "plain", "scaled_up", "scaled_down", "outlier_channels", "zero_rows", "negative",
            "nonunit_weights"]](["plain", "scaled_up", "scaled_down", "outlier_channels",
                                 "zero_rows", "negative", "nonunit_weights"]))
    """Input distributions for trials after the first (trial 0 is always ``plain``): each
    later trial takes one that changes the case, per case in an order drawn from the seed."""
    heldout_count: int = Field(default=2, ge=0, le=16)
    """Secret held-out sizes drawn per evaluation from its seed, besides ``heldout_values``."""
    heldout_growth: float = Field(default=1.25, ge=1.0, le=4.0)
    """Drawn sizes stay in [1, growth x the workload file's largest value] per axis."""

    @model_validator(mode="after")
    def _known_roles(self) -> CorrectnessRules:
        known = {"data", "weight", "bias", "scale", "logits", "routing", "probs", "uniform",
                 "temperature", "top_p", "top_k", "eps", "mask", "flag", "const", "offset",
                 "indptr", "index", "page", "slot", "sparse", "length"}  # inputs.recipes.ROLES
        for pattern, spec in self.input_roles.items():
            role, _, bound = spec.partition(":")
            if role.strip() not in known:
                raise ValueError(f"input_roles[{pattern!r}]: unknown role {role!r} "
                                 f"(known: {sorted(known)})")
            if len(bound) > 200:
                raise ValueError(f"input_roles[{pattern!r}]: bound longer than 200 characters")
        return self
    # --- end of input generation -----------------------------------------------------------

    def tolerance_for(self, dtype: str) -> Tolerance:
        return self.dtype_tolerance.get(dtype, self.tolerance)


class BenchmarkRules(FrozenModel):
    warmup: int = Field(default=2, ge=0)
    iterations: int = Field(default=10, ge=1)
    """Timed calls per workload; each gets fresh inputs (new values, new addresses)."""
    sampled_checks: int = Field(default=2, ge=0)
    """Timed calls whose outputs are re-checked against the reference afterwards."""
    max_dispersion: float | None = None
    """Maximum (p75 - p25) / median; None: not enforced."""
    plausibility_margin: float | None = Field(default=0.7, gt=0, le=1)
    """GPU: a measured median below this share of the workload's memory speed-of-light time
    (every input and output byte once, over the measured copy bandwidth) is physically
    impossible and rejects (``IMPLAUSIBLE_SPEED``). Only where that bound is a true lower
    bound (no index/offset or blob inputs); elsewhere recorded only. None: record only."""
    unsteady_gpu: Literal["flag", "retime"] = "flag"
    """GPU: a timing window in which the GPU throttled or another process used it (NVML) is
    recorded with its flag; ``retime`` times that workload once more and keeps the second."""
    baselines: list[Literal["flashinfer"]] = Field(
        default_factory=lambda: list[Literal["flashinfer"]](["flashinfer"]))
    """GPU: baselines timed in the same run besides the reference (the FlashInfer function of
    the definition's ``fi_api`` tag, when flashinfer imports in the worker)."""


class Promotion(FrozenModel):
    min_speedup: float | None = None
    """Minimum baseline_time / candidate_time; None: speed does not gate promotion."""
    baseline: Literal["reference", "flashinfer"] = "reference"
    gate_speed_on_cpu: bool = False
    """CPU wall-clock is not comparable with GPU timing; by default it never gates."""
    min_repeats: int = Field(default=2, ge=1)
    """GPU: the speed gate must hold in this many independent repeats (consecutive blocks of
    the timed calls, each judged by its own median) on every workload (regime). A win on some
    regimes only is recorded as ``archive_only`` in the benchmark details, never promoted."""


SanitizerTool = Literal["memcheck", "racecheck", "initcheck", "synccheck"]


def _all_tools() -> list[SanitizerTool]:
    return ["memcheck", "racecheck", "initcheck", "synccheck"]


class SanitizerRules(FrozenModel):
    """compute-sanitizer on one small workload, one call, per tool (GPU only)."""

    tools: list[SanitizerTool] = Field(default_factory=_all_tools)
    """Tools to run; an empty list skips the stage."""
    fail_on: list[SanitizerTool] = Field(default_factory=_all_tools)
    """Tools whose findings reject the candidate; the others are recorded only."""
    api_errors_fail: bool = False
    """CUDA API errors the sanitizer reports (``Program hit ...``) reject too; off by default
    since frameworks probe the driver with calls that fail harmlessly."""
    timeout_s: float = Field(default=240.0, gt=0)
    """Wall clock per tool run, build included; past it the run is killed (TIMEOUT)."""
    print_limit: int = Field(default=50, ge=1)
    """``--print-limit``: reports kept per run."""
    max_log_bytes: int = Field(default=1024 * 1024, gt=0)
    parallel: bool = True
    """Run the tools side by side (separate sandboxed processes)."""


class ProfileRules(FrozenModel):
    """Nsight Compute on the candidate's call for one representative workload per regime (GPU
    only), parsed into a signature (``sandboxharness.profile``). Evidence for the optimisation
    loop, never a gate: a profile that cannot be made is recorded, not a reject."""

    enabled: bool = False
    """Off by default: ncu costs ~10 s to start plus replay passes per kernel; campaigns and
    agents' submissions turn it on."""
    timeout_s: float = Field(default=180.0, gt=0, le=3600)
    """Wall clock for the whole profile job (start, build, every regime's calls)."""
    max_regimes: int = Field(default=3, ge=1, le=16)
    """Regimes profiled at most (one representative workload each)."""
    max_kernels_per_call: int = Field(default=16, ge=1, le=256)
    """Kernels profiled per call at most (ncu replays each one many times)."""
    max_report_bytes: int = Field(default=4 * 1024 * 1024, gt=0, le=64 * 1024 * 1024)
    """ncu's CSV report, read from the sandbox's out directory; larger is refused."""


class SandboxRules(FrozenModel):
    backend: Literal["auto", "process", "docker"] = "auto"
    docker_runtime: Literal["runc", "runsc"] = "runc"
    """OCI runtime for the docker backend; ``runsc`` is gVisor (a user-space kernel)."""
    require: list[str] = Field(default_factory=list)
    """Isolation layers that must be in force (e.g. ``netns``, ``seccomp``, ``docker``)."""


class AuditRules(FrozenModel):
    require_signing_key: bool = False
    """Forbid the automatically created development key."""


class Policy(FrozenModel):
    name: str = Field(min_length=1)
    description: str = ""
    languages: list[Language] = Field(default_factory=lambda: [Language.TRITON, Language.PYTHON])
    imports: ImportRules = ImportRules()
    max_source_bytes: int = Field(default=256 * 1024, gt=0)
    max_sources: int = Field(default=32, gt=0)
    forbid_baseline_library: bool = True
    """Reject candidates that call the definition's FlashInfer API (``fi_api`` tag)."""
    static: StaticRules = StaticRules()
    limits: Limits = Limits()
    correctness: CorrectnessRules = CorrectnessRules()
    benchmark: BenchmarkRules = BenchmarkRules()
    required_stages: list[StageName] = Field(
        default_factory=lambda: list[StageName](["static", "compile", "correctness", "benchmark"]))
    """Stages that must pass; a required stage that was skipped rejects."""
    promotion: Promotion = Promotion()
    sanitizer: SanitizerRules = SanitizerRules()
    profile: ProfileRules = ProfileRules()
    sandbox: SandboxRules = SandboxRules()
    audit: AuditRules = AuditRules()

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if not self.languages:
            raise ValueError("languages: an empty list would reject everything")
        if self.imports.allow is not None:
            both = set(self.imports.allow) & set(self.imports.deny)
            if both:
                raise ValueError(f"imports: {sorted(both)} both allowed and denied")
        return self
