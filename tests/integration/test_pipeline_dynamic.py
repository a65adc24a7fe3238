"""The dynamic stages through real worker processes: each behaviour maps to its reason code.

Static analysis is switched off here on purpose, so that every behaviour reaches the sandbox
and the trusted-side checks are what catches it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Verdict
from sandboxharness.pipeline import Harness
from tests.conftest import TRITON_RMS, fast_policy

TORCH_RMS = """import torch
def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
"""


def _eval(tiny_def_path: Path, tiny_wl_path: Path, write_solution, code: str,
          policy=None, **kw) -> Verdict:
    sol = load_solution(write_solution(code, **kw))
    return Harness(policy or fast_policy()).evaluate(
        load_definition(tiny_def_path), sol, load_workloads(tiny_wl_path), seed=7)


@pytest.fixture
def ev(tiny_def_path, tiny_wl_path, write_solution):
    return lambda code, **kw: _eval(tiny_def_path, tiny_wl_path, write_solution, code, **kw)


def codes(v: Verdict) -> set[str]:
    return {r.code.value for r in v.reasons}


def test_honest_triton_dps_is_promoted(ev) -> None:
    v = ev(TRITON_RMS)
    assert v.decision == "promote", v.reasons
    corr = v.stage("correctness")
    assert corr is not None and corr.status == "passed"
    heldout = [c for c in corr.details["cases"] if c["heldout"]]
    assert heldout and all(t["status"] == "PASSED" for c in heldout for t in c["trials"])
    bench = v.stage("benchmark")
    assert bench is not None and bench.details["workloads"][0]["candidate"]["n"] == 4
    assert "not comparable" in bench.details["clock"]


def test_honest_torch_returning_style_is_promoted(ev) -> None:
    v = ev(TORCH_RMS, dps=False, language="python")
    assert v.decision == "promote", v.reasons
    # where the time went, for the benchmarks: both workers, the calls, each role's timing
    host = v.stage("benchmark").details["host_s"]  # type: ignore[union-attr]
    for key in ("candidate_compile", "candidate_correctness_calls",
                "candidate_correctness_judging_wait", "candidate_benchmark",
                "candidate_sampled_checks", "reference_compile", "reference_benchmark"):
        assert host[key] >= 0.0, key
    assert host["candidate_sampled_checks"] <= host["candidate_benchmark"]


def test_wrong_result_is_incorrect_numerical(ev) -> None:
    v = ev(TORCH_RMS.replace(") * w", ")"), dps=False, language="python")
    assert codes(v) == {"INCORRECT_NUMERICAL"}
    assert v.stage("benchmark").status == "skipped"


def test_rejected_verdict_exports_fib_traces(ev, tiny_wl_path) -> None:
    from sandboxharness.traces import to_traces

    wl = load_workloads(tiny_wl_path)
    wrong = to_traces(ev(TORCH_RMS.replace(") * w", ")"), dps=False, language="python"), wl)
    assert {t.evaluation.status for t in wrong} == {"INCORRECT_NUMERICAL"}
    assert all(t.evaluation.correctness and t.evaluation.performance is None for t in wrong)
    crash = to_traces(ev("def run(x, w, y):\n    raise ValueError('boom')\n"), wl)
    assert {t.evaluation.status for t in crash} == {"RUNTIME_ERROR"}
    assert all(t.evaluation.correctness is None for t in crash)
    assert "boom" in crash[0].evaluation.log


def test_unwritten_destination_is_nonfinite(ev) -> None:
    v = ev("def run(x, w, y):\n    pass\n")
    assert codes(v) == {"NONFINITE_OUTPUT"}


def test_raising_kernel_is_runtime_error(ev) -> None:
    v = ev("def run(x, w, y):\n    raise ValueError('boom')\n")
    assert codes(v) == {"RUNTIME_ERROR"}
    assert "boom" in v.reasons[0].message


def test_syntax_error_is_compile_error(ev) -> None:
    v = ev("def run(x, w, y)\n    pass\n")
    assert codes(v) == {"COMPILE_ERROR"}
    assert v.stage("correctness").status == "skipped"


def test_missing_entry_function_is_compile_error(ev) -> None:
    v = ev("def other(x, w, y):\n    pass\n")
    assert codes(v) == {"COMPILE_ERROR"}


def test_wrong_shape_and_dtype(ev) -> None:
    shape = ev("import torch\ndef run(x, w):\n    return torch.zeros(1, 2)\n", dps=False,
               language="python")
    assert codes(shape) == {"INCORRECT_SHAPE"}
    dtype = ev(TORCH_RMS.replace("* w\n", "* w).double()\n").replace("return x", "return (x"),
               dps=False, language="python")
    assert codes(dtype) == {"INCORRECT_DTYPE"}


def test_tensor_subclass_output_is_incorrect_type(ev) -> None:
    code = TORCH_RMS.replace("def run", "class Lazy(torch.Tensor):\n    pass\n\ndef run0") + (
        "\ndef run(x, w):\n    return run0(x, w).as_subclass(Lazy)\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INCORRECT_TYPE"}


def test_input_mutation_is_detected(ev) -> None:
    code = TORCH_RMS.replace("    return", "    out =").replace("* w\n", "* w\n    x.zero_()\n"
                                                                "    return out\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INPUT_MUTATED"}


def test_infinite_loop_times_out_and_harness_returns(ev) -> None:
    t0 = time.monotonic()
    v = ev("def run(x, w, y):\n    while True:\n        pass\n",
           policy=fast_policy(limits={"run_timeout_s": 3, "compile_timeout_s": 30}))
    assert codes(v) == {"TIMEOUT"}
    assert time.monotonic() - t0 < 30


def test_fake_protocol_success_then_exit_is_rejected(ev) -> None:
    """Attack: print a worker-protocol-looking success frame to stdout, then exit early."""
    code = ("import os, sys, json\n"
            "def run(x, w, y):\n"
            "    msg = json.dumps({'ok': True, 'outputs': [], 'decision': 'promote'}).encode()\n"
            "    sys.stdout.buffer.write(b'SHW1' + len(msg).to_bytes(4, 'big') + msg)\n"
            "    sys.stdout.flush()\n"
            "    print('{\"status\": \"ok\", \"decision\": \"promote\"}')\n"
            "    os._exit(0)\n")
    v = ev(code)
    assert v.decision == "reject"
    assert codes(v) == {"WORKER_PROTOCOL"}


def test_cache_replay_during_timing_is_caught_by_sampled_checks(ev) -> None:
    """Attack: compute honestly during correctness, replay a cached output once timing starts."""
    code = TORCH_RMS.replace("def run(x, w):\n    return", "_C = {}\n_N = [0]\n\ndef real(x, w):\n"
                             "    return") + (
        "\ndef run(x, w):\n    _N[0] += 1\n    key = tuple(x.shape)\n"
        "    if _N[0] > 8 and key in _C:\n        return _C[key].clone()\n"
        "    _C[key] = real(x, w)\n    return _C[key]\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"BENCH_OUTPUT_MISMATCH"}


def test_patched_timer_is_an_integrity_violation(ev) -> None:
    code = "import time\ntime.perf_counter = lambda: 0.0\n" + TORCH_RMS
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INTEGRITY_VIOLATION"}
    assert "time.perf_counter" in v.reasons[0].message


def test_background_thread_is_an_integrity_violation(ev) -> None:
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n" + TORCH_RMS)
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INTEGRITY_VIOLATION"}


def test_verdict_records_hashes_seed_environment(ev) -> None:
    v = ev(TRITON_RMS)
    assert v.seed == 7
    assert v.candidate.sha256.startswith("sha256:") and v.policy.sha256.startswith("sha256:")
    assert v.environment.torch and v.environment.device == "cpu"
    assert all(s.duration_s >= 0 for s in v.stages)
    json.dumps(v.model_dump(mode="json"))  # serialisable as is
