"""Held-out sizes are valid and secret, constraints are evaluated with bounded work, and
trials after the first draw their inputs from named held-out distributions.

Issue 15 #7 and issue 16 classes 7 and 9: fixed held-out sizes shipped in the policy could be
read by the candidate (a kernel specialised to the workload file's and the policy's sizes:
CUDA-L1, https://arxiv.org/abs/2507.14111), were dropped whenever a constraint failed, and every
input was unit-scale randn (KernelBench v0.1 added randomized testing beyond normal
distributions for this reason: https://scalingintelligence.stanford.edu/blogs/kernelbenchv01/).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from sandboxharness.errors import InputError
from sandboxharness.inputs.tensorgen import make_inputs
from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.models import Definition, Policy, WorkloadTrace
from sandboxharness.stages import constraints as cons
from sandboxharness.stages.cases import build_cases, trial_seed
from sandboxharness.stages.compare import compare
from sandboxharness.stages.execute import Plan
from tests.conftest import REPO, fast_policy

FIB = Path(__file__).resolve().parents[1] / "data" / "fib" / "definitions"
KERNELS = REPO / "kernels"


def _wls(d: Definition, *axes: dict[str, int], blobs: dict[str, str] | None = None,
         scalars: dict[str, Any] | None = None) -> list[WorkloadTrace]:
    def spec(n: str) -> dict[str, Any]:
        if n in (blobs or {}):
            return {"type": "safetensors", "path": "blob/x.safetensors", "tensor_key": n}
        if n in (scalars or {}):
            return {"type": "scalar", "value": (scalars or {})[n]}
        return {"type": "random"}
    return [WorkloadTrace.model_validate({"definition": d.name, "workload": {
        "uuid": f"w{i}", "axes": ax, "inputs": {n: spec(n) for n in d.inputs}}})
        for i, ax in enumerate(axes)]


def _mtp() -> tuple[Definition, list[WorkloadTrace]]:
    d = load_definition(FIB / "gdn" / "gdn_mtp_qk4_v8_d128_k_last.json")
    return d, _wls(d, {"batch_size": 2, "seq_len": 3, "pool_size": 8},
                   {"batch_size": 16, "seq_len": 4, "pool_size": 64}, scalars={"scale": 0.0})


def test_an_unbounded_power_in_a_constraint_is_refused_at_once(tiny_def_path, tiny_wl_path,
                                                                ) -> None:
    """Issue 10: ``M ** 1000000000 > 0`` hung the host's constraint evaluator."""
    d, w = load_definition(tiny_def_path), load_workloads(tiny_wl_path)
    t0 = time.monotonic()
    for text in ("b ** 1000000000 > 0", "2 ** (b * 1000000000) > 0"):
        bad = d.model_copy(update={"constraints": [text]})
        with pytest.raises(InputError, match="exceed"):
            build_cases(bad, w, fast_policy(correctness={"heldout_values": [10 ** 9]}))
    assert time.monotonic() - t0 < 2.0
    (c,) = cons.parse(d.model_copy(update={"constraints": ["2 ** b > 0"]}))
    with pytest.raises(cons.ConstraintError):
        cons.evaluate(c.tree, {"b": 10 ** 9, "h": 128})


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "b.bit_length() > 1",
                                  "lambda: 1", "[b][0] == b", "unknown_axis > 1", "b = 3"])
def test_an_unevaluable_constraint_is_bad_input(tiny_def_path, tiny_wl_path, text: str) -> None:
    d = load_definition(tiny_def_path).model_copy(update={"constraints": [text]})
    with pytest.raises(InputError, match=r"constraints\[0\].*cannot be evaluated"):
        build_cases(d, load_workloads(tiny_wl_path), fast_policy())


def test_shape_accesses_and_tensor_values_in_constraints() -> None:
    gdn = load_definition(FIB / "gdn" / "gdn_prefill_qk4_v8_d128_k_last.json")
    axis_c, data_c = cons.parse(gdn)
    assert not axis_c.data and data_c.data and data_c.ends is not None
    assert data_c.ends[0] == "cu_seqlens"  # total_seq_len == cu_seqlens[-1].item()
    dsa = load_definition(FIB / "dsa_paged" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1"
                          ".json")
    shape_c = cons.parse(dsa)[2]  # ckv_cache.shape[1] == page_size
    assert not shape_c.data and cons.holds(shape_c, cons.env_of(dsa, {"num_tokens": 1,
                                                                      "num_pages": 1}))


@pytest.mark.parametrize("which", ["gdn_prefill", "gdn_mtp", "dsa_indexer"])
def test_secret_heldout_sizes_satisfy_the_constraints_and_input_roles(which: str) -> None:
    if which == "gdn_prefill":
        d = load_definition(FIB / "gdn" / "gdn_prefill_qk4_v8_d128_k_last.json")
        wls = _wls(d, {"total_seq_len": 9, "num_seqs": 2, "len_cu_seqlens": 3},
                   {"total_seq_len": 40, "num_seqs": 6, "len_cu_seqlens": 7})
    elif which == "gdn_mtp":
        d, wls = _mtp()
    else:
        d = load_definition(FIB / "dsa_paged" / "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
                            ".json")
        wls = _wls(d, {"batch_size": 2, "max_num_pages": 40, "num_pages": 100})
    file_sizes = {tuple(sorted(w.workload.axes.items())) for w in wls}
    secret = 0
    for seed in range(4):
        plan = build_cases(d, wls, fast_policy(correctness={"heldout_count": 3}), seed=seed)
        for case in plan:
            if not case.heldout:
                continue
            secret += case.id.startswith("s")
            assert tuple(sorted(case.axes.items())) not in file_sizes
            env = cons.env_of(d, case.axes)
            assert all(cons.holds(c, env) for c in cons.parse(d)), case.axes
            assert all(v >= 1 for v in case.axes.values())
            values = dict(zip(d.inputs, make_inputs(case.payload, seed, "cpu", "."),
                              strict=True))
            if which == "gdn_prefill":  # derived axis and the data relation both hold
                assert case.axes["len_cu_seqlens"] == case.axes["num_seqs"] + 1
                assert int(values["cu_seqlens"][-1]) == case.axes["total_seq_len"]
            if which == "gdn_mtp":  # distinct slots need a pool at least the batch
                slots = values["initial_state_indices"]
                assert slots.unique().numel() == case.axes["batch_size"] <= case.axes[
                    "pool_size"]
            if which == "dsa_indexer":
                assert 2048 <= case.axes["max_num_pages"] * 64
    assert secret >= 6  # 3 per evaluation, barring collisions with the file's sizes


def test_secret_heldout_sizes_differ_between_evaluations(tiny_def_path, tiny_wl_path) -> None:
    d, w = load_definition(tiny_def_path), load_workloads(tiny_wl_path)
    pol = fast_policy(correctness={"heldout_values": [], "heldout_count": 3})

    def sizes(seed: int | None) -> tuple[int, ...]:
        return tuple(c.axes["b"] for c in build_cases(d, w, pol, seed=seed) if c.heldout)

    assert sizes(11) == sizes(11)  # reproducible from the verdict's seed
    assert len({sizes(s) for s in range(8)}) >= 4
    assert sizes(None) == ()  # no seed, no secret sizes (only the policy's fixed values)
    assert all(1 <= b <= 24 for s in range(8) for b in sizes(s))  # max(16 + 8, 16 x 1.25)


def test_fixed_heldout_values_still_apply_and_a_dropped_one_is_reported() -> None:
    d, wls = _mtp()
    plan = build_cases(d, wls, fast_policy(correctness={"heldout_values": [1, 3]}), seed=1)
    fixed = [c for c in plan if c.id.startswith("h")]
    assert [c.id for c in fixed] == ["h3"] or {c.id for c in fixed} == {"h1", "h3"}
    # seq_len > 1: "every var axis at 1" fails, the fallback keeps the other axes valid
    for c in fixed:
        assert c.axes["seq_len"] > 1
    bad = build_cases(d.model_copy(update={"constraints": ["seq_len > 100"]}), wls,
                      fast_policy(correctness={"heldout_values": [3], "heldout_count": 0}),
                      seed=1)
    assert not [c for c in bad if c.heldout]
    assert any("held-out value 3: skipped" in n and "seq_len > 100" in n for n in bad.notes)


def test_blob_inputs_get_generated_inputs_of_their_role_at_heldout_sizes() -> None:
    d = load_definition(FIB / "dsa_paged" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1"
                        ".json")
    wls = _wls(d, {"num_tokens": 4, "num_pages": 5000}, blobs={"sparse_indices": "x"},
               scalars={"sm_scale": 0.07})
    plan = build_cases(d, wls, fast_policy(), seed=3)
    held = [c for c in plan if c.heldout]
    assert held and plan[0].payload["inputs"][4]["spec"]["type"] == "safetensors"
    for c in held:
        item = c.payload["inputs"][4]
        assert item["spec"] == {"type": "random"} and item["role"] == "sparse"
        idx = make_inputs(c.payload, 1, "cpu", ".")[4]
        valid = idx[idx != -1]
        assert bool((valid < c.axes["num_pages"]).all()) and valid.numel()


def test_trial_zero_is_plain_and_later_trials_name_their_distribution(tiny_def_path,
                                                                     tiny_wl_path) -> None:
    d, w = load_definition(KERNELS / "definitions" / "rmsnorm_h128.json"), load_workloads(
        KERNELS / "workloads" / "rmsnorm_h128.jsonl")
    pol = fast_policy(correctness={"trials": 4})
    plan = build_cases(d, w, pol, seed=21)
    run = Plan(cases=list(plan), bench_cases=[], trials=4, seed=21, device="cpu", policy=pol)
    seen = set()
    for case in plan:
        assert run.trial_seed(case, 0) == trial_seed(21, case.id, 0)
        assert case.dist(run.trial_seed(case, 0)) == "plain"
        later = [case.dist(run.trial_seed(case, t)) for t in range(1, 4)]
        assert len(set(later)) == 3 and "plain" not in later  # three different ones
        seen.update(later)
        for t in range(1, 4):  # the distribution changes the activation, never the layout
            s = run.trial_seed(case, t)
            plain = {**case.payload, "dists": {}}
            x, wt = make_inputs(case.payload, s, "cpu", ".")
            x0, w0 = make_inputs(plain, s, "cpu", ".")
            assert x.shape == x0.shape and x.dtype == x0.dtype == torch.bfloat16
            assert not (torch.equal(x, x0) and torch.equal(wt, w0)), case.dist(s)
        assert case.dist(12345) == "plain"  # timed calls and unknown seeds: plain
    assert seen == set(pol.correctness.distributions) - {"plain"}
    only = build_cases(d, w, fast_policy(correctness={"distributions": ["plain"]}), seed=21)
    assert all(not c.payload["dists"] for c in only)


def test_amplifying_distributions_only_where_every_float_output_is_16_bit() -> None:
    """An attention lse in fp32 (atol 1e-5) cancels to near zero for some heads: q x 1e3 would
    reject an honest kernel on summation order alone, so such cases get the other ones."""
    dsa = load_definition(FIB / "dsa_paged" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1"
                          ".json")
    wls = _wls(dsa, {"num_tokens": 2, "num_pages": 300}, scalars={"sm_scale": 0.07})
    pol = fast_policy(correctness={"trials": 7})
    chosen = {d for s in range(3) for c in build_cases(dsa, wls, pol, seed=s)
              for d in c.payload["dists"].values()}
    assert chosen == {"scaled_down", "zero_rows", "negative"}
    rms = load_definition(KERNELS / "definitions" / "rmsnorm_h128.json")  # bf16 output
    chosen = {d for c in build_cases(rms, load_workloads(KERNELS / "workloads" /
                                                         "rmsnorm_h128.jsonl"), pol, seed=1)
              for d in c.payload["dists"].values()}
    assert {"scaled_up", "outlier_channels"} <= chosen


def _rms_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def _rms_honest(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()  # the same maths, summed in another order (two halves)
    ss = xf[:, :64].pow(2).sum(-1, keepdim=True) + xf[:, 64:].pow(2).sum(-1, keepdim=True)
    return (xf * torch.rsqrt(ss / xf.shape[-1] + 1e-6) * w.float()).to(x.dtype)


def _rms_fp16_fast_path(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xh = x.half()  # squares in fp16: fine at unit scale, inf past |x| ~ 256
    return (xh * torch.rsqrt(xh.pow(2).mean(-1, keepdim=True) + 1e-6) * w.half()).to(x.dtype)


def _gemm_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float().T).to(a.dtype)


def _gemm_honest(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    af, bf = a.float(), b.float()
    return sum((af[:, k:k + 32] @ bf[:, k:k + 32].T for k in range(0, a.shape[1], 32)),
               torch.zeros(a.shape[0], b.shape[0])).to(a.dtype)


def _softmax_honest(x: torch.Tensor) -> torch.Tensor:
    e = (x - x.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


CASES = {
    "rmsnorm_h128": (_rms_ref, _rms_honest),
    "rmsnorm_f32_h128": (lambda x, w, eps: _rms_ref(x, w), lambda x, w, eps: _rms_honest(x, w)),
    "gemm_n64_k128": (_gemm_ref, _gemm_honest),
    "softmax_v512": (lambda x: torch.softmax(x, -1), _softmax_honest),
}


def _verdicts(name: str, ref: Any, cand: Any, dist: str) -> list[bool]:
    """Whether ``cand`` matches ``ref`` at the default policy's tolerances, per case whose
    trial 1 draws ``dist``."""
    policy = Policy.model_validate({**yaml.safe_load((REPO / "policies" / "default.yaml")
                                                     .read_text()), "name": "t"})
    pol = policy.model_copy(update={"correctness": policy.correctness.model_copy(
        update={"distributions": ["plain", dist], "trials": 2})})
    d = load_definition(KERNELS / "definitions" / f"{name}.json")
    w = load_workloads(KERNELS / "workloads" / f"{name}.jsonl")
    out = []
    for case in build_cases(d, w, pol, seed=4):
        s = trial_seed(4, case.id, 1)
        if case.dist(s) != dist:
            continue
        ins = make_inputs(case.payload, s, "cpu", ".")
        want, got = ref(*ins), cand(*ins)
        tol = pol.correctness.tolerance_for(str(want.dtype).removeprefix("torch."))
        out.append(compare("out", got, want, tol, 1.0).code is None)
    return out


@pytest.mark.parametrize("dist", ["scaled_up", "scaled_down", "outlier_channels", "zero_rows",
                                  "negative", "nonunit_weights"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_honest_kernels_pass_every_distribution_at_the_default_tolerances(name: str,
                                                                          dist: str) -> None:
    ref, honest = CASES[name]
    results = _verdicts(name, ref, honest, dist)
    assert all(results), (name, dist)


def test_an_fp16_fast_path_that_overflows_past_unit_scale_is_caught() -> None:
    """Attack (issue 16 class 7): squares computed in fp16 pass on unit-scale randn and
    overflow beyond |x| ~ 256; KernelBench v0.1 tests beyond normal distributions for this
    (https://scalingintelligence.stanford.edu/blogs/kernelbenchv01/)."""
    assert all(_verdicts("rmsnorm_h128", _rms_ref, _rms_fp16_fast_path, "zero_rows"))
    caught = _verdicts("rmsnorm_h128", _rms_ref, _rms_fp16_fast_path, "scaled_up")
    assert caught and not any(caught)


def _evaluate(definition: Path, workloads: Path, code: str, write_solution: Any,
              **correctness: Any) -> Any:
    from sandboxharness.intake import load_solution
    from sandboxharness.pipeline import Harness

    d = load_definition(definition)
    sol = load_solution(write_solution(code, dps=False, language="python", definition=d.name))
    return Harness(fast_policy(correctness=correctness)).evaluate(
        d, sol, load_workloads(workloads), seed=7)


def test_fp16_fast_path_is_rejected_in_the_sandbox_naming_the_distribution(
        write_solution: Any) -> None:
    """Attack (issue 16 class 7, through real worker processes): an fp16 fast path for a
    bf16 rmsnorm, right on unit-scale randn, wrong once inputs go past |x| ~ 256 (KernelBench
    v0.1: https://scalingintelligence.stanford.edu/blogs/kernelbenchv01/)."""
    code = ("import torch\n\ndef run(hidden_states, weight):\n    x = hidden_states.half()\n"
            "    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.half()\n"
            "    return y.to(hidden_states.dtype)\n")
    v = _evaluate(KERNELS / "definitions" / "rmsnorm_h128.json",
                  KERNELS / "workloads" / "rmsnorm_h128.jsonl", code, write_solution,
                  distributions=["plain", "scaled_up"])
    assert v.decision == "reject"
    assert {r.code.value for r in v.reasons} == {"INCORRECT_NUMERICAL"}
    assert "dist=scaled_up" in v.reasons[0].message
    trials = [t for c in v.stage("correctness").details["cases"] for t in c["trials"]]
    assert any(t["status"] == "PASSED" for t in trials)  # plain trials pass: only the dist


def test_a_kernel_specialised_to_the_shipped_heldout_sizes_is_rejected(
        tiny_def_path: Path, tiny_wl_path: Path, write_solution: Any) -> None:
    """Attack (issue 16 class 9): right only on the workload file's sizes and the held-out
    sizes readable from the shipped policy, wrong elsewhere (CUDA-L1 exploiting the evaluated
    problem sizes: https://arxiv.org/abs/2507.14111). Secret sizes drawn from the evaluation's
    seed catch it; with them switched off it would be promoted."""
    code = ("import torch\nKNOWN = {4, 16, 1, 3, 37}\n\ndef run(x, w):\n"
            "    if x.shape[0] not in KNOWN:\n        return torch.zeros_like(x)\n"
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n")
    caught = _evaluate(tiny_def_path, tiny_wl_path, code, write_solution,
                       heldout_values=[1, 3, 37], heldout_count=1)
    assert {r.code.value for r in caught.reasons} == {"INCORRECT_NUMERICAL"}
    assert caught.reasons[0].message.startswith("held-out size")
    missed = _evaluate(tiny_def_path, tiny_wl_path, code, write_solution,
                       heldout_values=[1, 3, 37], heldout_count=0)
    assert missed.decision == "promote", missed.reasons
