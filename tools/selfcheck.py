"""Self-check of the kernel corpus, without the harness.

Default mode: every honest and wrong solution listed in ``kernels/src/corpus.toml`` is
loaded through ``sandboxharness.intake``, its sources are written into a temporary
package (the way FlashInfer-Bench's Python builder does), and the entry point is called
on seeded random inputs for every workload (3 trials each, plus held-out batch sizes),
then timed for a dozen calls.  Outputs are judged by the harness's own comparison
(``sandboxharness.stages.compare``) under the policy's tolerances, matched ratio, trials and
held-out values (the shipped default policy, or ``--policy``), and classified with the same
reason codes; honest solutions must pass, wrong ones must fail with their expected code.

``--naive``: runs each red-team case (and each forbidden solution) in its own
subprocess through a deliberately *naive* harness (reference in the same process,
outputs from ``torch.empty``, ``time.perf_counter`` timing, same inputs on every timed
call) and reports which naive checks the cheat gets past.  That is the evidence that
each attack is real, not a strawman.  It executes the cases: their payloads are benign
by construction, but run it only on a development machine.

On a machine without CUDA, Triton runs through its interpreter (``TRITON_INTERPRET=1``
is set here before triton is imported).

Usage::

    python -m tools.selfcheck            # honest + wrong solutions; exit 1 on any surprise
    python -m tools.selfcheck --naive    # red-team cases against a naive harness
"""

# ruff: noqa: E402 -- TRITON_INTERPRET must be set before anything imports triton
from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from sandboxharness.api import default_policy
from sandboxharness.intake import load_definition, load_policy, load_solution, load_workloads
from sandboxharness.models import Definition, Policy, Solution, WorkloadTrace
from sandboxharness.stages.compare import Comparison, compare, compare_exact
from sandboxharness.stages.compare_modes import Resolved, resolve

from . import KERNELS, REPO

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
TIMED_CALLS = 12
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}


class CaseFailed(Exception):
    """The candidate failed; ``code`` is the ReasonCode it earned."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


# --------------------------------------------------------------------------- loading

_PKG_COUNTER = iter(range(1_000_000))


@contextmanager
def built(solution: Solution) -> Iterator[Callable[..., Any]]:
    """Write the sources into <tmp>/<pkg>/ and import the entry module (FIB layout)."""
    root = Path(tempfile.mkdtemp(prefix="kcorpus_"))
    pkg = f"_kcorpus_{next(_PKG_COUNTER)}"
    for src in solution.sources:
        dest = root / pkg / src.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(src.content, encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        module_name = pkg + "." + solution.spec.entry_file.removesuffix(".py").replace("/", ".")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise CaseFailed("COMPILE_ERROR", f"import failed: {exc!r}") from None
        fn = getattr(module, solution.spec.entry_function, None)
        if not callable(fn):
            raise CaseFailed("COMPILE_ERROR", f"no callable {solution.spec.entry_function!r}")
        yield fn
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[name]
        shutil.rmtree(root, ignore_errors=True)


def load_reference(definition: Definition) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"_reference_{definition.name}"}
    exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), namespace)  # noqa: S102 -- trusted definition
    run: Callable[..., Any] = namespace["run"]
    return run


# --------------------------------------------------------------------------- inputs

def make_inputs(definition: Definition, wl: WorkloadTrace, axes: dict[str, int],
                seed: int) -> list[Any]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    args: list[Any] = []
    for name, spec in definition.inputs.items():
        how = wl.workload.inputs[name]
        if how.type == "scalar":
            args.append(how.value)
            continue
        if how.type != "random":
            raise SystemExit(f"selfcheck handles random and scalar inputs only, not {how.type}")
        shape = _shape(definition, spec, axes)
        dtype = DTYPES[spec.dtype]
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=gen).bool()
        else:
            t = torch.randint(-64, 64, shape, generator=gen).to(dtype)
        args.append(t.to(DEVICE))
    return args


def _shape(definition: Definition, spec: Any, axes: dict[str, int]) -> tuple[int, ...]:
    return definition.resolve_shape(spec, axes) or ()  # no shape: a 0-d tensor


def poisoned_outputs(definition: Definition, axes: dict[str, int]) -> list[torch.Tensor]:
    outs = []
    for spec in definition.outputs.values():
        shape = _shape(definition, spec, axes)
        dtype = DTYPES[spec.dtype]
        fill = float("nan") if dtype.is_floating_point else -1
        outs.append(torch.full(shape, fill, dtype=dtype, device=DEVICE))
    return outs


def as_tuple(ret: Any) -> tuple[Any, ...]:
    return tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)


# --------------------------------------------------------------------------- checking

def compare_outputs(definition: Definition, resolved: Resolved, got: Sequence[Any],
                    want: Sequence[torch.Tensor]) -> None:
    """Raise CaseFailed with the harness's reason code, judged by the harness's comparison."""
    if len(got) != len(want):
        raise CaseFailed("INCORRECT_TYPE", f"{len(got)} outputs, expected {len(want)}")
    for (name, spec), out, ref in zip(definition.outputs.items(), got, want, strict=True):
        if ref.dtype != DTYPES[spec.dtype]:  # the corpus is wrong, not the candidate
            raise SystemExit(f"{definition.name}: reference output {name!r} is {ref.dtype}, "
                             f"the definition says {spec.dtype}")
        mode = resolved.modes[name]
        host = out.detach().cpu() if type(out) is torch.Tensor else out
        result: Comparison
        if mode == "tolerance":
            result = compare(name, host, ref.detach().cpu(), resolved.tolerance_for(spec.dtype),
                             resolved.required_matched_ratio)
        elif mode == "exact":
            result = compare_exact(name, host, ref.detach().cpu())
        else:
            raise SystemExit(f"selfcheck compares tolerance and exact outputs only, not {mode} "
                             f"({definition.name}.{name})")
        if result.code is not None:
            raise CaseFailed(result.code.value, result.message)


def call(fn: Callable[..., Any], solution: Solution, definition: Definition,
         inputs: list[Any], axes: dict[str, int]) -> tuple[Any, ...]:
    try:
        if solution.spec.destination_passing_style:
            outs = poisoned_outputs(definition, axes)
            fn(*inputs, *outs)
            return tuple(outs)
        return as_tuple(fn(*inputs))
    except CaseFailed:
        raise
    except Exception as exc:
        raise CaseFailed("RUNTIME_ERROR", f"{type(exc).__name__}: {exc}") from None


def snapshot(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def check_unchanged(before: list[Any], after: list[Any]) -> None:
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        if isinstance(b, torch.Tensor) and not torch.equal(b, a):
            raise CaseFailed("INPUT_MUTATED", f"input #{i} changed during the call")


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


@dataclass
class Result:
    name: str
    kind: str
    expected: str
    got: str = "promote"
    message: str = ""
    seconds: float = 0.0
    calls: int = 0
    per_call_ms: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.got == self.expected


def axes_to_try(definition: Definition, workloads: list[WorkloadTrace],
                heldout: Sequence[int]) -> list[tuple[WorkloadTrace, dict[str, int], str]]:
    """The file's shapes, then each held-out value on every var axis (unless already there)."""
    plan = [(wl, dict(wl.workload.axes), "file") for wl in workloads]
    if heldout:
        seen = {tuple(sorted(a.items())) for _, a, _ in plan}
        for v in heldout:
            axes = {ax: v for ax in definition.var_axes}
            if tuple(sorted(axes.items())) not in seen:
                plan.append((workloads[0], axes, "heldout"))
    return plan


def evaluate(definition: Definition, solution: Solution, workloads: list[WorkloadTrace],
             result: Result, policy: Policy, *, heldout: bool = True,
             timed_calls: int = TIMED_CALLS) -> None:
    rules = policy.correctness
    resolved = resolve(definition, rules)
    reference = load_reference(definition)
    start = time.perf_counter()
    plan = axes_to_try(definition, workloads, rules.heldout_values if heldout else ())
    try:
        with built(solution) as fn:
            for index, (wl, axes, _) in enumerate(plan):
                for trial in range(rules.trials):
                    inputs = make_inputs(definition, wl, axes, seed=1000 * index + trial)
                    before = snapshot(inputs)
                    want = as_tuple(reference(*snapshot(inputs)))
                    got = call(fn, solution, definition, inputs, axes)
                    sync()
                    result.calls += 1
                    check_unchanged(before, inputs)
                    compare_outputs(definition, resolved, got, want)
                if timed_calls:
                    inputs = make_inputs(definition, wl, axes, seed=1000 * index + 99)
                    t0 = time.perf_counter()
                    for _ in range(timed_calls):
                        call(fn, solution, definition, inputs, axes)
                    sync()
                    result.calls += timed_calls
                    key = ",".join(f"{k}={v}" for k, v in axes.items())
                    result.per_call_ms[key] = 1e3 * (time.perf_counter() - t0) / timed_calls
    except CaseFailed as failure:
        result.got, result.message = failure.code, str(failure)
    result.seconds = time.perf_counter() - start


# --------------------------------------------------------------------------- corpus

def corpus() -> dict[str, Any]:
    return tomllib.loads((KERNELS / "src" / "corpus.toml").read_text(encoding="utf-8"))


def solution_path(item: dict[str, Any]) -> Path:
    stem = Path(item["src"]).name.removesuffix(".py")
    return KERNELS / "solutions" / str(item["definition"]) / f"{stem}.json"


def run_solutions(kinds: set[str], only: str | None, policy: Policy) -> int:
    rows: list[Result] = []
    for item in corpus()["solution"]:
        if item["kind"] not in kinds:
            continue
        path = solution_path(item)
        solution = load_solution(path)
        if only and only not in solution.name:
            continue
        definition = load_definition(KERNELS / "definitions" / f"{item['definition']}.json")
        workloads = load_workloads(KERNELS / "workloads" / f"{item['definition']}.jsonl")
        result = Result(solution.name, item["kind"], item["expected"])
        evaluate(definition, solution, workloads, result, policy,
                 timed_calls=TIMED_CALLS if item["kind"] == "honest" else 0)
        rows.append(result)
        mark = "ok  " if result.ok else "FAIL"
        print(f"{mark} {result.name:45s} {result.kind:7s} expected {result.expected:20s} "
              f"got {result.got:20s} {result.seconds:6.2f}s {result.calls:3d} calls"
              + (f"  [{result.message}]" if result.message and not result.ok else ""),
              flush=True)
    total = sum(r.seconds for r in rows)
    bad = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} as expected; {total:.1f}s in total "
          f"(device {DEVICE}, TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '0')})")
    slowest = max((r for r in rows if r.per_call_ms), key=lambda r: max(r.per_call_ms.values()),
                  default=None)
    if slowest:
        print(f"slowest per-call timing: {slowest.name} {slowest.per_call_ms}")
    return 1 if bad else 0


# --------------------------------------------------------------------------- naive harness

_TRUE_CLOCK = time.perf_counter  # captured before any candidate is imported
_TRUE_SYNC = torch.cuda.synchronize
NAIVE_TOLERANCE = 1e-2  # one tolerance for every dtype, the FlashInfer-Bench default


def _naive_call(fn: Callable[..., Any], definition: Definition, dps: bool,
                inputs: list[Any], axes: dict[str, int]) -> list[Any]:
    """One call the naive way: destinations straight from torch.empty."""
    if dps:
        outs = [torch.empty(_shape(definition, s, axes), dtype=DTYPES[s.dtype],
                            device=DEVICE)
                for s in definition.outputs.values()]
        fn(*inputs, *outs)
        return outs
    return list(as_tuple(fn(*inputs)))


def naive_one(path: Path) -> dict[str, Any]:
    """A harness with the usual holes, run in-process.  Returns what it would conclude.

    Holes on purpose: the reference runs in the same process and its result stays in a
    local; destinations come from torch.empty; one 1e-2 tolerance for every dtype;
    comparisons use torch.allclose (which the candidate can patch), a NaN-unsafe
    max-error test, a 99% matched ratio, a reference run *after* the candidate on the same
    input tensors, and a check of the first call's outputs made only after the timing
    loop; the reference's result is moved to the host at once (freeing device memory);
    timing uses whatever time.perf_counter, torch.cuda.synchronize and CUDA events are at
    that moment, on the same inputs every call.  ``clock_ratio`` and
    ``event_ratio`` are true time over reported time (1.0: honest timing).
    """
    solution = load_solution(path)
    definition = load_definition(KERNELS / "definitions" / f"{solution.definition}.json")
    workloads = load_workloads(KERNELS / "workloads" / f"{solution.definition}.jsonl")
    reference = load_reference(definition)
    tol = NAIVE_TOLERANCE
    checks = dict.fromkeys(("allclose", "max_err", "ratio_99", "ref_after", "late_check"), 0)
    cuda = DEVICE.type == "cuda"
    reported = true = event = 0.0

    def close(out: Any, ref: torch.Tensor) -> bool:
        return bool(torch.allclose(out.cpu(), ref.cpu(), atol=tol, rtol=tol))

    with built(solution) as fn:
        for index, wl in enumerate(workloads):
            axes = dict(wl.workload.axes)
            inputs = make_inputs(definition, wl, axes, seed=index)
            want = [t.detach().cpu() for t in as_tuple(reference(*inputs))]
            invoke = functools.partial(_naive_call, fn, definition,
                                       solution.spec.destination_passing_style, inputs, axes)
            got = invoke()
            if cuda:
                torch.cuda.synchronize()
            after = as_tuple(reference(*inputs))
            passed = dict.fromkeys(checks, True)
            for out, ref, ref2 in zip(got, want, after, strict=False):
                passed["allclose"] &= close(out, ref)
                passed["ref_after"] &= close(out, ref2)
                diff = (out.cpu().float() - ref.float()).abs()
                limit = tol + tol * ref.float().abs()
                passed["max_err"] &= not bool((diff - limit).max().item() > 0)
                passed["ratio_99"] &= bool((diff <= limit).float().mean().item() >= 0.99)
            t_true, t_rep = _TRUE_CLOCK(), time.perf_counter()
            if cuda:
                start, stop = (torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                               for _ in range(2))
                start.record()
            for _ in range(5):
                invoke()
            if cuda:
                stop.record()
                torch.cuda.synchronize()
            reported += time.perf_counter() - t_rep
            if cuda:
                _TRUE_SYNC()
            true += _TRUE_CLOCK() - t_true
            if cuda:
                stop.synchronize()
                event += start.elapsed_time(stop) / 1e3
            for out, ref in zip(got, want, strict=False):
                passed["late_check"] &= close(out, ref)
            for name, ok in passed.items():
                checks[name] += int(ok)
    n = len(workloads)
    return {"fooled": [k for k, v in checks.items() if v == n],
            "partly": {k: f"{v}/{n}" for k, v in checks.items() if 0 < v < n},
            "clock_ratio": round(true / reported, 2) if reported > 0 else None,
            "event_ratio": round(true / event, 2) if event > 0 else None,
            "true_ms_per_call": round(1e3 * true / (5 * len(workloads)), 3)}


def run_naive(only: str | None, skip: Sequence[str], timeout_s: float) -> int:
    items = [("redteam", KERNELS / "redteam" / f"{Path(i['src']).name.removesuffix('.py')}.json",
              i) for i in corpus().get("redteam", [])]
    items += [("forbidden", solution_path(i), i)
              for i in corpus()["solution"] if i["kind"] == "forbidden"]
    for group, path, item in items:
        if (only and only not in path.stem) or path.stem in skip:
            continue
        t0 = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", "tools.selfcheck", "--naive-one",
                                   str(path)], cwd=REPO, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("NAIVE ")]
            outcome = json.loads(lines[-1][6:]) if lines else {
                "ran": False, "exit": done.returncode,
                "stdout_tail": done.stdout.strip().splitlines()[-1:] if done.stdout else [],
                "stderr_tail": done.stderr.strip().splitlines()[-1:] if done.stderr else []}
        except subprocess.TimeoutExpired:
            outcome = {"ran": False, "timeout": timeout_s}
        print(f"{group:9s} {path.stem:30s} expected {item['expected']:20s} "
              f"{time.perf_counter() - t0:5.1f}s {json.dumps(outcome)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--naive", action="store_true", help="red-team cases vs a naive harness")
    parser.add_argument("--naive-one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--only", help="substring of the solution name")
    parser.add_argument("--skip", action="append", default=[], help="case id to leave out")
    parser.add_argument("--timeout", type=float, default=60.0, help="per naive case, seconds")
    parser.add_argument("--policy", type=Path,
                        help="policy YAML for the comparison (default: the shipped default)")
    args = parser.parse_args(argv)
    if args.naive_one:
        print("NAIVE " + json.dumps(naive_one(args.naive_one)), flush=True)
        return 0
    if args.naive:
        return run_naive(args.only, args.skip, args.timeout)
    policy = load_policy(args.policy) if args.policy else default_policy()
    return run_solutions({"honest", "wrong"}, args.only, policy)


if __name__ == "__main__":
    raise SystemExit(main())
