"""Generated inputs are valid for what they mean (issue 15 #6, #8, #9).

Each recipe is checked on the tensors ``make_inputs`` really makes, for the workload-file
cases and the held-out ones, on definitions whose inputs have structure: indptr arrays, page
tables, state slots, sparse indices with -1 padding, probabilities, positions, scalars. The
FlashInfer-Bench definitions come from tests/data/fib; the small ones below are the team's own,
shaped like the public dataset's gqa_paged, rope, sampling and mamba_ssu definitions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from sandboxharness.errors import InputError
from sandboxharness.inputs import recipes
from sandboxharness.inputs.tensorgen import make_inputs
from sandboxharness.intake import load_definition
from sandboxharness.models import Definition, WorkloadTrace
from sandboxharness.stages.cases import Case, build_cases
from tests.conftest import fast_policy

FIB = Path(__file__).resolve().parents[1] / "data" / "fib" / "definitions"
REF = "def run(*args):\n    return args[0]\n"


def _t(shape: list[str] | None, dtype: str, **kw: Any) -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype, **kw}


def _definition(name: str, axes: dict[str, int | None], inputs: dict[str, Any],
                constraints: list[str] | None = None, **kw: Any) -> Definition:
    ax = {a: ({"type": "var"} if v is None else {"type": "const", "value": v})
          for a, v in axes.items()}
    first = next(iter(inputs.values()))
    return Definition.model_validate({
        "name": name, "op_type": name.split("_")[0], "axes": ax, "inputs": inputs,
        "outputs": {"out": _t(first["shape"], first["dtype"])}, "reference": REF,
        "constraints": constraints, **kw})


def _workloads(d: Definition, *axes: dict[str, int], scalars: dict[str, Any] | None = None,
               ) -> list[WorkloadTrace]:
    out = []
    for i, ax in enumerate(axes):
        inputs = {n: ({"type": "scalar", "value": (scalars or {})[n]} if n in (scalars or {})
                      else {"type": "random"}) for n in d.inputs}
        out.append(WorkloadTrace.model_validate({"definition": d.name, "workload": {
            "uuid": f"w{i}", "axes": ax, "inputs": inputs}}))
    return out


def _each(d: Definition, wls: list[WorkloadTrace], seeds: range = range(3),
          **policy: Any) -> list[tuple[Case, dict[str, Any]]]:
    """Every case of a few evaluations (held-out ones too), each with its generated inputs."""
    out = []
    for root in seeds:
        for case in build_cases(d, wls, fast_policy(correctness=policy), seed=root):
            for seed in (root, root + 100):
                values = make_inputs(case.payload, seed, "cpu", ".")
                out.append((case, dict(zip(d.inputs, values, strict=True))))
    return out


GQA_DECODE = _definition(
    "gqa_paged_decode_h4_kv2_d16_ps4",
    {"batch_size": None, "num_qo_heads": 4, "num_kv_heads": 2, "head_dim": 16,
     "num_pages": None, "page_size": 4, "len_indptr": None, "num_kv_indices": None},
    {"q": _t(["batch_size", "num_qo_heads", "head_dim"], "bfloat16"),
     "k_cache": _t(["num_pages", "page_size", "num_kv_heads", "head_dim"], "bfloat16"),
     "kv_indptr": _t(["len_indptr"], "int32"),
     "kv_indices": _t(["num_kv_indices"], "int32"),
     "kv_last_page_len": _t(["batch_size"], "int32"),
     "sm_scale": _t(None, "float32")},
    ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"])
GQA_PREFILL = _definition(
    "gqa_paged_prefill_h4_kv2_d16_ps4",
    {"total_q": None, "num_qo_heads": 4, "head_dim": 16, "num_pages": None, "page_size": 4,
     "len_indptr": None, "num_kv_indices": None},
    {"q": _t(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
     "k_cache": _t(["num_pages", "page_size", "num_qo_heads", "head_dim"], "bfloat16"),
     "qo_indptr": _t(["len_indptr"], "int32"), "kv_indptr": _t(["len_indptr"], "int32"),
     "kv_indices": _t(["num_kv_indices"], "int32")},
    ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"])
MAMBA = _definition(
    "mamba_ssu_decode_h4_d8_s16_ng1",
    {"batch_size": None, "state_cache_size": None, "nheads": 4, "dim": 8, "dstate": 16},
    {"x": _t(["batch_size", "nheads", "dim"], "bfloat16"),
     "state": _t(["state_cache_size", "nheads", "dim", "dstate"], "bfloat16"),
     "state_batch_indices": _t(["batch_size"], "int32")})


def test_indptr_is_monotone_from_zero_to_the_extent_it_indexes() -> None:
    gdn = load_definition(FIB / "gdn" / "gdn_prefill_qk4_v8_d128_k_last.json")
    wls = _workloads(gdn, {"total_seq_len": 9, "num_seqs": 2, "len_cu_seqlens": 3},
                     {"total_seq_len": 20, "num_seqs": 4, "len_cu_seqlens": 5})
    checked = 0
    for case, ins in _each(gdn, wls):
        cu = ins["cu_seqlens"]
        assert cu.dtype == torch.int64 and int(cu[0]) == 0
        assert bool((cu.diff() >= 0).all()), cu
        assert int(cu[-1]) == case.axes["total_seq_len"]  # cu_seqlens[-1] == the token axis
        assert cu.numel() == case.axes["num_seqs"] + 1
        checked += case.heldout
    assert checked
    for case, ins in _each(GQA_DECODE, _workloads(GQA_DECODE, {
            "batch_size": 3, "num_pages": 20, "len_indptr": 4, "num_kv_indices": 9},
            scalars={"sm_scale": 0.25})):
        ptr, idx = ins["kv_indptr"], ins["kv_indices"]
        assert int(ptr[0]) == 0 and bool((ptr.diff() >= 1).all())  # every sequence has a page
        assert int(ptr[-1]) == idx.numel() == case.axes["num_kv_indices"]


def test_page_indices_are_in_range_and_never_shared() -> None:
    for case, ins in _each(GQA_DECODE, _workloads(GQA_DECODE, {
            "batch_size": 3, "num_pages": 20, "len_indptr": 4, "num_kv_indices": 9},
            scalars={"sm_scale": 0.25})):
        idx, pages = ins["kv_indices"], case.axes["num_pages"]
        assert bool(((idx >= 0) & (idx < pages)).all())
        assert idx.unique().numel() == idx.numel(), "a KV page given to two sequences"
        last = ins["kv_last_page_len"]
        assert bool(((last >= 1) & (last <= 4)).all())  # 1..page_size
        assert isinstance(ins["sm_scale"], float)


def test_queries_never_outnumber_the_kv_tokens_they_attend_to() -> None:
    """Causal prefill: a sequence's queries are the last of its kv tokens."""
    wls = _workloads(GQA_PREFILL, {"total_q": 10, "num_pages": 40, "len_indptr": 4,
                                   "num_kv_indices": 12})
    for case, ins in _each(GQA_PREFILL, wls):
        q_len, kv_pages = ins["qo_indptr"].diff(), ins["kv_indptr"].diff()
        assert int(ins["qo_indptr"][-1]) == case.axes["total_q"]
        assert bool((q_len <= (kv_pages - 1).clamp_min(0) * 4 + (kv_pages > 0).long()).all())


@pytest.mark.parametrize("which", ["mamba", "gdn_mtp"])
def test_state_slots_never_repeat_across_the_batch(which: str) -> None:
    if which == "mamba":
        d, wls, name, pool = MAMBA, _workloads(MAMBA, {"batch_size": 6, "state_cache_size": 8}), \
            "state_batch_indices", "state_cache_size"
    else:
        d = load_definition(FIB / "gdn" / "gdn_mtp_qk4_v8_d128_k_last.json")
        wls = _workloads(d, {"batch_size": 3, "seq_len": 2, "pool_size": 5},
                         scalars={"scale": 0.0})
        name, pool = "initial_state_indices", "pool_size"
    for case, ins in _each(d, wls):
        slots = ins[name]
        assert slots.unique().numel() == slots.numel(), "duplicate slots change the batch"
        assert bool(((slots >= 0) & (slots < case.axes[pool])).all())


def test_sparse_indices_are_distinct_per_row_in_range_with_tail_padding() -> None:
    d = load_definition(FIB / "dsa_paged" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
                        ".json")
    wls = _workloads(d, {"num_tokens": 2, "num_pages": 40}, scalars={"sm_scale": 0.07})
    padded = 0
    for case, ins in _each(d, wls, seeds=range(2)):
        tokens = case.axes["num_pages"] * 64  # token-level: page_idx * 64 + offset
        for row in ins["sparse_indices"]:
            valid = row[row != -1]
            assert bool(((valid >= 0) & (valid < tokens)).all())
            assert valid.unique().numel() == valid.numel()
            n = valid.numel()
            assert bool((row[n:] == -1).all()), "-1 padding only at the tail"
            padded += n < row.numel()
    assert padded  # the definition allows -1 padding, and it is exercised


def test_probabilities_and_sampling_parameters_are_valid() -> None:
    d = _definition("top_k_top_p_sampling_from_probs_v512", {"batch_size": None, "vocab": 512},
                    {"probs": _t(["batch_size", "vocab"], "float32"),
                     "top_k": _t(["batch_size"], "int32"),
                     "top_p": _t(["batch_size"], "float32")})
    for _, ins in _each(d, _workloads(d, {"batch_size": 4}, {"batch_size": 9})):
        p = ins["probs"]
        assert bool((p >= 0).all()) and torch.allclose(p.sum(-1), torch.ones(p.shape[0]))
        assert bool(((ins["top_k"] >= 1) & (ins["top_k"] <= 64)).all())  # what serving uses
        assert bool(((ins["top_p"] > 0) & (ins["top_p"] <= 1)).all())


def test_positions_index_the_cache_and_scalars_keep_their_dtype() -> None:
    d = _definition("rope_with_cos_sin_cache_neox_style_d16_rd16",
                    {"nnz": None, "max_seq_len": None, "rotary_dim": 16, "head_size": 16},
                    {"query": _t(["nnz", "rotary_dim"], "bfloat16"),
                     "cos_sin_cache": _t(["max_seq_len", "rotary_dim"], "float32"),
                     "positions": _t(["nnz"], "int64"),
                     "head_size": _t(None, "int32"), "is_neox": _t(None, "int32"),
                     "theta": _t(None, "float32"), "count": _t(None, "int64"),
                     "flag": _t(None, "bool")})
    for case, ins in _each(d, _workloads(d, {"nnz": 5, "max_seq_len": 30})):
        pos = ins["positions"]
        assert bool(((pos >= 0) & (pos < case.axes["max_seq_len"])).all())
        assert ins["head_size"] == 16 and type(ins["head_size"]) is int
        assert type(ins["is_neox"]) is int and ins["is_neox"] in (0, 1)
        assert type(ins["count"]) is int and type(ins["theta"]) is float
        assert type(ins["flag"]) is bool
    item = {"dtype": "int32", "role": "data"}
    assert type(recipes.make_scalar(item, torch.Generator().manual_seed(1))) is int


def test_workload_scalars_keep_the_declared_kind() -> None:
    d = _definition("moe_t", {"n": None, "h": 8}, {"x": _t(["n", "h"], "bfloat16"),
                                                   "offset": _t(None, "int32"),
                                                   "factor": _t(None, "float32")})
    case = build_cases(d, _workloads(d, {"n": 2}, scalars={"offset": 48, "factor": 2}),
                       fast_policy())[0]
    _, offset, factor = make_inputs(case.payload, 1, "cpu", ".")
    assert (type(offset), type(factor)) == (int, float) and factor == 2.0
    bad = _workloads(d, {"n": 2}, scalars={"offset": 1.5, "factor": 2})
    with pytest.raises(InputError, match="'offset' is int32"):
        build_cases(d, bad, fast_policy())


def test_inputs_are_deterministic_per_seed_in_their_own_dtype() -> None:
    d = _definition("moe_fp8", {"n": None, "h": 64},
                    {"hidden": _t(["n", "h"], "float8_e4m3fn"),
                     "hidden_scale": _t(["n"], "float32"), "w": _t(["h"], "bfloat16"),
                     "topk_ids": _t(["n"], "int32")})
    case = build_cases(d, _workloads(d, {"n": 33}), fast_policy(), seed=5)[0]
    a, b = make_inputs(case.payload, 9, "cpu", "."), make_inputs(case.payload, 9, "cpu", ".")
    c = make_inputs(case.payload, 10, "cpu", ".")
    assert all(torch.equal(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x,
                           y.view(torch.uint8) if y.dtype == torch.float8_e4m3fn else y)
               for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[2], c[2])
    assert [x.dtype for x in a] == [torch.float8_e4m3fn, torch.float32, torch.bfloat16,
                                    torch.int32]
    assert float(a[0].float().abs().max()) <= 2.0
    assert bool((a[1] > 0).all()), "scales are positive"


def test_large_low_precision_inputs_are_made_in_bounded_memory(tmp_path: Path) -> None:
    """64M fp8 + 64M bf16 elements: a float32 copy of either would add 256 MB."""
    payload = {"inputs": [
        {"name": n, "dtype": dt, "shape": [1 << 26], "spec": {"type": "random"},
         "role": "data", "params": {}} for n, dt in (("a", "float8_e4m3fn"), ("b", "bfloat16"))],
        "outputs": []}
    code = ("import json, resource, sys\nimport torch\n"
            "from sandboxharness.inputs.tensorgen import make_inputs\n"
            "p = json.loads(sys.argv[1])\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "a, b = make_inputs(p, 3, 'cpu', '.')\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], capture_output=True,
                         text=True, check=True, timeout=120)
    grown_mb = int(out.stdout.strip())
    assert grown_mb < 64 + 128 + 100, f"peak grew {grown_mb} MB"  # the tensors + chunk slack


def test_an_input_that_cannot_be_made_valid_is_bad_input_before_anything_runs() -> None:
    with pytest.raises(InputError, match="'state_batch_indices' cannot be made valid"):
        build_cases(MAMBA, _workloads(MAMBA, {"batch_size": 8, "state_cache_size": 4}),
                    fast_policy())
    d = _definition("ragged_t", {"n": None, "total": None, "len": None},
                    {"vals": _t(["n"], "float32"), "seg_indptr": _t(["len"], "int32")})
    wls = _workloads(d, {"n": 3, "total": 7, "len": 4})
    with pytest.raises(InputError, match="'seg_indptr' cannot be made valid: has role 'indptr'"):
        build_cases(d, wls, fast_policy())
    # from a blob it needs no recipe: the file's cases run, held-out sizes are skipped, noted
    blob = WorkloadTrace.model_validate({"definition": d.name, "workload": {
        "uuid": "b", "axes": {"n": 3, "total": 7, "len": 4}, "inputs": {
            "vals": {"type": "random"},
            "seg_indptr": {"type": "safetensors", "path": "x.st", "tensor_key": "p"}}}})
    plan = build_cases(d, [blob], fast_policy(), seed=1)
    assert [c.id for c in plan] == ["w0"]
    assert any("'seg_indptr'" in n and "skipped" in n for n in plan.notes), plan.notes
    # the policy can name what it adds up to, and so can the definition itself
    plan = build_cases(d, wls, fast_policy(correctness={"input_roles": {
        "seg_*": "indptr:total"}}))
    assert int(make_inputs(plan[0].payload, 1, "cpu", ".")[1][-1]) == 7
    tagged = d.model_copy(update={"tags": ["input_role:seg_indptr=indptr:total"]})
    assert build_cases(tagged, wls, fast_policy())[0].payload["inputs"][1]["params"] == {
        "total": 7}
    with pytest.raises(ValidationError, match="unknown role"):
        fast_policy(correctness={"input_roles": {"x": "mystery"}})


def test_the_policy_role_names_match_the_recipe_table() -> None:
    from sandboxharness.models.policy import CorrectnessRules

    for role in sorted(recipes.ROLES):
        CorrectnessRules(input_roles={"x": role})
    with pytest.raises(ValidationError):
        CorrectnessRules(input_roles={"x": "bogus"})
