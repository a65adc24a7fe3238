"""Results bound at the moment of each call, every timed call held to its own results, plain
tensors only, the declared language honoured (issue 16, classes 1, 2, 3, 5 and the run-time
parts of 4 and 9).

Each test is one attack, run with the analysers switched off so that only the run-time
defenses stand between it and a promotion; each runs on the process backend and, where a
Docker engine and the test image are there (CI), on the Docker backend too. Honest controls
that look like the attacks must still be promoted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Verdict
from sandboxharness.pipeline import Harness
from sandboxharness.stages.benchmark.timing import clock_disagrees
from tests.conftest import TRITON_RMS, fast_policy

RMS = "def _rms(x, w):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"


def sandbox_for(name: str):  # type: ignore[no-untyped-def]
    if name == "process":
        return None
    from sandboxharness.sandbox.docker import DockerSandbox

    ok, why = DockerSandbox.available(runtime="runc")
    if not ok:
        if os.environ.get("SANDBOXHARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker backend required but unavailable: {why}")
        pytest.skip(f"Docker backend unavailable: {why}")
    return DockerSandbox(runtime="runc")


@pytest.fixture(params=["process", pytest.param("docker", marks=[pytest.mark.docker,
                                                                  pytest.mark.slow])])
def ev(request, tiny_def_path: Path, tiny_wl_path: Path, write_solution):  # type: ignore[no-untyped-def]
    sandbox = sandbox_for(request.param)

    def run(code: str, **kw: object) -> Verdict:
        sol = load_solution(write_solution(code, **kw))
        harness = Harness(fast_policy(), sandbox=sandbox) if sandbox else Harness(fast_policy())
        return harness.evaluate(load_definition(tiny_def_path), sol,
                                load_workloads(tiny_wl_path), seed=11)

    yield run
    if sandbox is not None:
        sandbox.close()


REMEMBER_SAVE_PATH = (  # the cheat walks the frames to the worker's request: where it saves
    "    f = sys._getframe(1)\n"
    "    while f is not None and 'msg' not in f.f_locals:\n"
    "        f = f.f_back\n"
    "    if f is not None and 'save' in f.f_locals['msg']:\n"
    "        _paths.append(f.f_locals['msg']['save'])\n")


def codes(v: Verdict) -> set[str]:
    return {r.code.value for r in v.reasons}


def test_atexit_rewrites_saved_outputs(ev) -> None:
    """Attack: return zeros fast, then rewrite every saved result file with correct outputs at
    interpreter exit (``atexit``), after the harness "saved" them but before it read them.
    Source: GPU MODE pygpubench exploit suite (post-hoc result rewriting); robust-kbench
    findings on outputs checked after the process exits."""
    code = ("import atexit, sys, torch\n" + RMS + "_paths = []\n"
            "def run(x, w):\n"
            + REMEMBER_SAVE_PATH +
            "    return torch.zeros_like(x)\n"
            "def _rewrite():\n"
            "    from safetensors.torch import load_file, save_file\n"
            "    for p in _paths:\n"
            "        t = load_file(p)\n"
            "        t['out.y'] = _rms(t['in.x'], t['in.w'])\n"
            "        save_file(t, p)\n"
            "atexit.register(_rewrite)\n")
    v = ev(code, dps=False, language="python")
    # each call is judged (and its file removed) as it returns: the rewrite at exit comes too
    # late to touch anything, and the zeros it returned are what is judged
    assert v.decision == "reject"
    assert codes(v) == {"INCORRECT_NUMERICAL"}, v.reasons


def test_weakref_finalizer_rewrites_saved_outputs(ev) -> None:
    """Attack: a ``weakref.finalize`` callback on an object that dies at shutdown rewrites the
    saved results with correct values. Source: issue 16 class 1 (finalizers, gc callbacks);
    KernelBench adversarial tests on state that outlives the call."""
    code = ("import sys, weakref, torch\n" + RMS + "_paths = []\n"
            "class _Anchor:\n    pass\n"
            "_anchor = _Anchor()\n"
            "def _rewrite(paths):\n"
            "    from safetensors.torch import load_file, save_file\n"
            "    for p in paths:\n"
            "        t = load_file(p)\n"
            "        t['out.y'] = _rms(t['in.x'], t['in.w'])\n"
            "        save_file(t, p)\n"
            "weakref.finalize(_anchor, _rewrite, _paths)\n"
            "def run(x, w):\n"
            + REMEMBER_SAVE_PATH +
            "    return torch.zeros_like(x)\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INCORRECT_NUMERICAL"}, v.reasons  # judged before any finalizer ran


def test_batch_and_flush_across_timed_calls(ev) -> None:
    """Attack: once timing starts, each call only queues its work on a module-level instance
    and the next call completes it, so every timed call looks nearly free while the outputs
    read after the loop are all correct. Source: SOL-ExecBench reward-hack checks (deferred
    computation); kernelbot fixes that re-check outputs per call."""
    code = ("import torch\n" + RMS +
            "class _Batcher:\n"
            "    def __init__(self):\n        self.pending, self.n = [], 0\n"
            "    def __call__(self, x, w, y):\n"
            "        self.n += 1\n"
            "        while self.pending:\n"
            "            px, pw, py = self.pending.pop()\n"
            "            py.copy_(_rms(px, pw))\n"
            "        if self.n <= 8:\n"
            "            y.copy_(_rms(x, w))\n"
            "        else:\n"
            "            self.pending.append((x, w, y))\n"
            "_batcher = _Batcher()\n"
            "def run(x, w, y):\n    _batcher(x, w, y)\n")
    v = ev(code, dps=True, language="python")
    assert v.decision == "reject"
    assert codes(v) & {"INTEGRITY_VIOLATION", "BENCH_OUTPUT_MISMATCH"}, v.reasons
    assert all(r.stage.value == "benchmark" for r in v.reasons)


def test_inputs_modified_during_timed_calls(ev) -> None:
    """Attack: honest outputs, but once timing starts each call scribbles over its input
    in place (e.g. reusing it as scratch), which a check made only on correctness calls
    never sees. Source: KernelBench adversarial tests (input mutation); issue 16 class 2."""
    code = ("import torch\n" + RMS + "_n = [0]\n"
            "def run(x, w):\n"
            "    _n[0] += 1\n"
            "    y = _rms(x, w)\n"
            "    if _n[0] > 8:\n"
            "        x.zero_()\n"
            "    return y\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INPUT_MUTATED"}, v.reasons
    assert v.reasons[0].stage.value == "benchmark"


def test_tensor_with_instance_method_overrides(ev) -> None:
    """Attack: return an exact ``torch.Tensor`` holding zeros whose own ``__dict__`` overrides
    ``detach``/``cpu``/``to``/``clone`` to hand back the right answer, so a harness that reads
    the output through those methods sees a correct result. Source: pygpubench exploit suite
    (lazy / lying tensors); issue 16 class 3."""
    code = ("import torch\n" + RMS +
            "def run(x, w):\n"
            "    out = torch.zeros_like(x)\n"
            "    real = _rms(x, w)\n"
            "    for name in ('detach', 'cpu', 'to', 'contiguous', 'clone', 'double', 'float'):\n"
            "        setattr(out, name, lambda *a, _r=real, **k: _r)\n"
            "    return out\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INCORRECT_TYPE"}, v.reasons
    assert "instance attributes" in v.reasons[0].message


def test_reused_output_arena(ev) -> None:
    """Attack: return the same preallocated buffer for every call of a shape, so each new call
    silently overwrites what earlier calls returned (and a cached answer can sit there).
    Source: KernelBench/robust-kbench findings on output aliasing; issue 16 class 9."""
    code = ("import torch\n_buf = {}\n"
            "def run(x, w):\n"
            "    key = tuple(x.shape)\n"
            "    if key not in _buf:\n"
            "        _buf[key] = torch.empty_like(x)\n"
            "    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
            "    torch.mul(x * r, w, out=_buf[key])\n"
            "    return _buf[key]\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INTEGRITY_VIOLATION"}, v.reasons
    assert "alias" in v.reasons[0].message


def test_triton_solution_computing_with_torch(ev) -> None:
    """Attack: declare ``triton``, define a Triton kernel, but do the work with torch ops and
    tensor methods (which static "torch compute" rules miss). Source: SOL-ExecBench
    reward-hack checks (language/backend substitution); KernelBench static checker."""
    code = ("import torch\nimport triton\nimport triton.language as tl\n\n"
            "@triton.jit\ndef _unused(X):\n    pass\n\n"
            "def run(x, w, y):\n"
            "    y.copy_((x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt()) * w)\n")
    v = ev(code, dps=True, language="triton")
    assert codes(v) == {"LANGUAGE_NOT_USED"}, v.reasons


def test_torch_function_mode_left_active(ev) -> None:
    """Attack: push a ``TorchFunctionMode`` at import that stays active, so the harness's own
    tensor operations after each call (copy to host, hashing, saving) run through candidate
    code. Source: issue 16 class 4 (every harness function on the call path)."""
    code = ("import torch\nfrom torch.overrides import TorchFunctionMode\n" + RMS +
            "class _Spy(TorchFunctionMode):\n"
            "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
            "        return func(*args, **(kwargs or {}))\n"
            "_Spy().__enter__()\n"
            "def run(x, w):\n    return _rms(x, w)\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INTEGRITY_VIOLATION"}, v.reasons
    assert "mode" in v.reasons[0].message


def test_harness_digest_function_patched(ev) -> None:
    """Attack: reach the worker's own module through ``sys.modules`` and replace the function
    that digests results, so rewritten results would still match. Source: issue 16 class 4
    (aliases reach what names don't; the integrity check must cover harness functions)."""
    code = ("import sys, torch\n" + RMS +
            "sys.modules['sandboxharness.worker.runner'].digest = lambda named: '0' * 64\n"
            "def run(x, w):\n    return _rms(x, w)\n")
    v = ev(code, dps=False, language="python")
    assert codes(v) == {"INTEGRITY_VIOLATION"}, v.reasons
    assert "digest" in v.reasons[0].message


def test_no_phase_tell_from_the_collector(ev) -> None:
    """Attack: tell the timed phase from the correctness phase by a harness side effect (the
    collector switched off only while timing) and cheat only then. The collector is off in
    every candidate call alike, so the cheat shows at correctness already. Source: issue 16
    class 9 (a candidate must not count or sense its way to the timed phase)."""
    code = ("import gc, torch\n" + RMS +
            "def run(x, w):\n"
            "    return _rms(x, w) if gc.isenabled() else torch.zeros_like(x)\n")
    v = ev(code, dps=False, language="python")
    assert v.decision == "reject"
    assert v.stage("correctness").status == "failed", v.reasons


# -- honest controls ------------------------------------------------------------------------
MULTI_KERNEL = '''import torch
import triton
import triton.language as tl

BLOCK = 128
EPS = tl.constexpr(1e-6)  # a jit kernel reads only constexpr globals


@triton.jit
def _inv_rms(X, R, H: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(X + row * H + tl.arange(0, H))
    tl.store(R + row, tl.rsqrt(tl.sum(x * x, axis=0) / H + EPS))


@triton.jit
def _scale(X, W, R, Y, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(X + row * H + offs)
    tl.store(Y + row * H + offs, x * tl.load(R + row) * tl.load(W + offs))


def run(x, w, y):
    r = x.new_empty((x.shape[0] + 8,))[: x.shape[0]]  # padded scratch, a contiguous view
    _inv_rms[(x.shape[0],)](x, r, H=BLOCK)
    _scale[(x.shape[0],)](x, w, r, y, H=BLOCK)
'''


def test_honest_multi_kernel_triton_is_promoted(ev) -> None:
    """Control: two Triton kernels in sequence, module-level constants, a padded scratch view."""
    v = ev(MULTI_KERNEL, dps=True, language="triton")
    assert v.decision == "promote", v.reasons


def test_honest_f_rms_norm_is_promoted(ev) -> None:
    """Control: a torch solution built on ``torch.nn.functional.rms_norm``."""
    code = ("import torch\nimport torch.nn.functional as F\n"
            "def run(x, w):\n    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)\n")
    v = ev(code, dps=False, language="python")
    assert v.decision == "promote", v.reasons


def test_honest_triton_reference_kernel_is_promoted(ev) -> None:
    v = ev(TRITON_RMS, dps=True, language="triton")
    assert v.decision == "promote", v.reasons


def test_clock_check_is_meaningful_for_short_spans() -> None:
    """The host's per-call spans catch a clock that claims a fraction of some ten
    milliseconds (the old batch-level floor was negative below ~240 ms in all), while a busy
    host (every span a scheduler slice long, or stalls on some calls) never rejects."""
    honest = [0.004] * 10
    assert clock_disagrees(honest, [0.0042] * 10) is None
    assert clock_disagrees(honest, [0.0042] * 7 + [0.080] * 3) is None  # stalls on 3 calls
    assert clock_disagrees([0.0002] * 2, [0.0042] * 2) is None  # loaded host, tiny kernel
    assert clock_disagrees([0.002] * 10, [0.020] * 10) is not None  # claims a tenth of 20 ms
    assert clock_disagrees([0.00002] * 10, [0.0004] * 10) is None  # tiny kernels: no verdict
