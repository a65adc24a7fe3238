"""Trusted-side holds on timed calls, fed the facts the worker's frames carried."""

from __future__ import annotations

from sandboxharness.models import Solution
from sandboxharness.stages.cases import Case
from sandboxharness.stages.execute import BenchResult, TimedCall
from sandboxharness.stages.honesty import own_kernels, timed

PAYLOAD = {"inputs": [{"name": "x", "dtype": "float32", "shape": [4]}],
           "outputs": [{"name": "y", "dtype": "float32", "shape": [4]}]}


def _bench(**call: object) -> BenchResult:
    base = {"pre_in": "a", "bound": {"in": "a", "out": "o"}, "re_out": "o",
            "described": [{"type": "torch.Tensor"}], "launches": 1}
    base.update(call)
    return BenchResult(Case("w0", "u", {"n": 4}, False, PAYLOAD), [1],
                       calls=[TimedCall(**base)])  # type: ignore[arg-type]


def test_own_kernels_are_read_from_the_sources() -> None:
    sol = Solution.model_validate({
        "name": "s", "definition": "d", "author": "t",
        "spec": {"language": "cuda", "target_hardware": ["H100"],
                 "entry_point": "k.cu::run", "destination_passing_style": True},
        "sources": [{"path": "k.cu", "content":
                     "template <int N>\n__global__ void __launch_bounds__(256) axpy_k(float* y)"
                     " {}\nextern \"C\" __global__ void other(int n) {}\n"}]})
    assert own_kernels(sol) == ["axpy_k", "other"]


def test_a_cuda_call_running_only_library_kernels_is_rejected() -> None:
    """Attack: a `cuda` solution whose timed calls launch only torch/cuBLAS kernels (its own
    kernel is never called). Source: SOL-ExecBench reward-hack checks (backend substitution)."""
    got = timed("cuda", _bench(kernels=["ampere_sgemm_128x64_nn", "vectorized_elementwise"]),
                ["axpy_k"])
    assert [r.code.value for r in got] == ["LANGUAGE_NOT_USED"]
    assert timed("cuda", _bench(kernels=["_Z6axpy_kILi4EEvPf"]), ["axpy_k"]) == []
    assert timed("cuda", _bench(kernels=None), ["axpy_k"]) == []  # not traced: no verdict


def test_timed_holds() -> None:
    assert timed("triton", _bench()) == []
    assert [r.code.value for r in timed("triton", _bench(bound={"in": "b", "out": "o"}))] == [
        "INPUT_MUTATED"]
    assert [r.code.value for r in timed("triton", _bench(re_out="z"))] == ["INTEGRITY_VIOLATION"]
    assert [r.code.value for r in timed("triton", _bench(launches=0))] == ["LANGUAGE_NOT_USED"]
    assert timed("python", _bench(launches=0)) == []
