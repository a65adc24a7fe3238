"""Comparison modes beyond float tolerances: exact integers, top-k sets (with ties), policy
overrides per definition / op_type, and which inputs are state."""

from __future__ import annotations

from typing import Any

import torch

from sandboxharness.models import Definition
from sandboxharness.models.policy import CorrectnessRules, Tolerance
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.compare import compare, compare_exact
from sandboxharness.stages.compare_modes import compare_set, resolve, score_input
from sandboxharness.stages.state import InputDigests, check_inputs, declared_state
from sandboxharness.worker.binding import input_digests


def _definition(name: str, op_type: str, inputs: dict[str, Any], outputs: dict[str, Any],
                **kw: Any) -> Definition:
    axes = {"b": {"type": "var"}, "n": {"type": "const", "value": 8},
            "k": {"type": "const", "value": 3}}
    return Definition.model_validate({"name": name, "op_type": op_type, "axes": axes,
                                      "inputs": inputs, "outputs": outputs,
                                      "reference": "def run(*a):\n    pass\n", **kw})


INDEXER = _definition("dsa_topk_indexer_t", "dsa_paged",
                      {"scores": {"shape": ["b", "n"], "dtype": "float32"}},
                      {"topk_indices": {"shape": ["b", "k"], "dtype": "int32"}})


def test_an_index_off_by_one_is_never_within_tolerance() -> None:
    """Attack (issue 15, item 3): a top-k indexer adding 1 to every index >= 100 passed the
    float rule (100 vs 101 is within rtol 1e-2); integers now compare exactly."""
    ref = torch.tensor([[5, 100, 250]], dtype=torch.int32)
    cheat = torch.where(ref >= 100, ref + 1, ref)
    assert compare("i", cheat, ref, CorrectnessRules().tolerance, 1.0).code is None  # the old hole
    assert compare_exact("i", cheat, ref).code == ReasonCode.INCORRECT_NUMERICAL
    assert compare_set("i", cheat, ref, None).code == ReasonCode.INCORRECT_NUMERICAL


def test_the_same_top_k_set_in_another_order_passes_a_different_set_fails() -> None:
    ref = torch.tensor([[7, 2, 5, -1], [0, 1, 3, 4]], dtype=torch.int32)
    other_order = torch.tensor([[2, 5, 7, -1], [4, 3, 1, 0]], dtype=torch.int32)
    assert compare_set("i", other_order, ref, None).code is None
    assert compare_exact("i", other_order, ref).code == ReasonCode.INCORRECT_NUMERICAL
    fewer = torch.tensor([[2, 5, -1, -1], [4, 3, 1, 0]], dtype=torch.int32)  # padding differs
    res = compare_set("i", fewer, ref, None)
    assert res.code == ReasonCode.INCORRECT_NUMERICAL and res.matched_ratio == 0.5


def test_ties_at_the_kth_score_accept_any_tied_index() -> None:
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.1, 0.5]])
    ref = torch.tensor([[0, 1]])        # k = 2: index 1, 2 and 4 tie at 0.5
    assert compare_set("i", torch.tensor([[4, 0]]), ref, scores).code is None
    assert compare_set("i", torch.tensor([[3, 0]]), ref, scores).code is not None  # 0.1 < 0.5
    assert compare_set("i", torch.tensor([[2, 2]]), ref, scores).code is not None  # duplicate
    assert compare_set("i", torch.tensor([[4, 0]]), ref, None).code is not None    # no scores


def test_modes_follow_the_definition() -> None:
    modes = resolve(INDEXER, CorrectnessRules()).modes
    assert modes == {"topk_indices": "set"}
    counts = _definition("histogram", "misc", {"x": {"shape": ["b", "n"], "dtype": "float32"}},
                         {"counts": {"shape": ["b", "n"], "dtype": "int64"},
                          "y": {"shape": ["b", "n"], "dtype": "bfloat16"}})
    assert resolve(counts, CorrectnessRules()).modes == {"counts": "exact", "y": "tolerance"}
    sampler = _definition("top_k_sampling_from_probs_v8", "sampling",
                          {"probs": {"shape": ["b", "n"], "dtype": "float32"}},
                          {"samples": {"shape": ["b"], "dtype": "int64"}})
    assert resolve(sampler, CorrectnessRules()).modes == {"samples": "sampling"}
    scores = torch.rand(2, 8)
    assert score_input(INDEXER, "topk_indices", {"scores": scores}, (2, 3)) is scores


def test_overrides_by_glob_and_op_type_later_wins_and_are_named() -> None:
    rules = CorrectnessRules.model_validate({
        "dtype_tolerance": {"float32": {"atol": 1e-5, "rtol": 1e-5}},
        "overrides": [
            {"name": "all-dsa", "op_types": ["dsa_*"], "required_matched_ratio": 0.9,
             "tolerance": {"atol": 0.1, "rtol": 0.1}},
            {"name": "this-one", "definitions": ["dsa_topk_indexer_*"],
             "required_matched_ratio": 0.95, "modes": {"*": "exact"},
             "state_inputs": ["scores"]},
            {"name": "not-me", "definitions": ["gemm_*"], "required_matched_ratio": 0.5}]})
    r = resolve(INDEXER, rules)
    assert r.applied == ["all-dsa", "this-one"]
    assert r.required_matched_ratio == 0.95 and r.modes == {"topk_indices": "exact"}
    assert r.tolerance_for("float32").atol == 0.1  # the override's tolerance replaced the table
    assert r.describe()["overrides_applied"] == ["all-dsa", "this-one"]
    assert declared_state(INDEXER, r) == {"scores"}


ROPE = _definition("rope_t", "rope", {"q": {"shape": ["b", "n"], "dtype": "bfloat16"},
                                      "pos": {"shape": ["b"], "dtype": "int64"}},
                   {"q_out": {"shape": ["b", "n"], "dtype": "bfloat16",
                              "description": "Rotated q (in-place)."}})
MAMBA = _definition("ssu_t", "mamba", {"state": {"shape": ["b", "n"], "dtype": "float32"},
                                       "x": {"shape": ["b", "n"], "dtype": "float32"}},
                    {"out": {"shape": ["b", "n"], "dtype": "float32"}})


def _check(definition: Definition, original: dict[str, torch.Tensor],
           cand_after: dict[str, torch.Tensor], ref_after: dict[str, torch.Tensor],
           ref_out: dict[str, torch.Tensor] | None = None, *,
           unsaved: tuple[str, ...] = ()) -> tuple[Any, list[str]]:
    """As the workers report it: every input's digest before and after, and the bytes of the
    inputs that moved only (``unsaved``: a worker that keeps a moved input back)."""
    payload = [{"name": n, "dtype": str(t.dtype).removeprefix("torch.")}
               for n, t in original.items()]
    pre = input_digests({f"in.{k}": v for k, v in original.items()})
    cand = input_digests({f"in.{k}": v for k, v in cand_after.items()})
    ref = input_digests({f"in.{k}": v for k, v in ref_after.items()})
    got = {f"in.{k}": v for k, v in cand_after.items()
           if cand[f"in.{k}"] != pre[f"in.{k}"] and k not in unsaved}
    want = {f"in.{k}": v for k, v in ref_after.items() if ref[f"in.{k}"] != pre[f"in.{k}"]}
    want.update({f"out.{k}": v for k, v in (ref_out or {}).items()})
    made: list[int] = []

    def again() -> list[object]:
        made.append(1)
        return list(original.values())

    result = check_inputs(definition, resolve(definition, CorrectnessRules()), payload,
                          digests=InputDigests(ref_pre=pre, ref=ref, cand=cand), got=got,
                          ref_got=want, original=again)
    if cand == pre and ref == pre:
        assert not made, "inputs nobody changed are judged by digest alone"
    return result


def test_state_the_reference_updates_must_match_its_update() -> None:
    state, x = torch.randn(2, 8), torch.randn(2, 8)
    new_state = state * 0.5 + x
    bad, judged = _check(MAMBA, {"state": state, "x": x}, {"state": new_state, "x": x},
                         {"state": new_state, "x": x})
    assert bad is None and judged == ["state"]  # an honest in-place kernel
    bad, _ = _check(MAMBA, {"state": state, "x": x}, {"state": state, "x": x},
                    {"state": new_state, "x": x})
    assert bad is not None and bad.code == ReasonCode.INCORRECT_NUMERICAL  # never updated
    assert "state input 'state'" in bad.message


def test_inputs_the_reference_leaves_alone_must_stay_bit_identical() -> None:
    """Attack: zeroing an input during the call (caught before; still caught)."""
    state, x = torch.randn(2, 8), torch.randn(2, 8)
    bad, _ = _check(MAMBA, {"state": state, "x": x}, {"state": state, "x": torch.zeros(2, 8)},
                    {"state": state, "x": x})
    assert bad is not None and bad.code == ReasonCode.INPUT_MUTATED
    ok, _ = _check(MAMBA, {"state": state, "x": x}, {"state": state, "x": x},
                   {"state": state, "x": x})
    assert ok is None


def test_an_input_that_moved_but_did_not_travel_is_mutated() -> None:
    """A worker that reports a changed digest but keeps the bytes back is not believed."""
    state, x = torch.randn(2, 8), torch.randn(2, 8)
    bad, _ = _check(MAMBA, {"state": state, "x": x}, {"state": state, "x": x + 1},
                    {"state": state, "x": x}, unsaved=("x",))
    assert bad is not None and bad.code == ReasonCode.INPUT_MUTATED
    assert "did not save it" in bad.message


def test_a_resized_input_is_replaced() -> None:
    state, x = torch.randn(2, 8), torch.randn(2, 8)
    bad, _ = _check(MAMBA, {"state": state, "x": x}, {"state": state, "x": x[:1]},
                    {"state": state, "x": x})
    assert bad is not None and "replaced or resized" in bad.message


def test_declared_in_place_input_may_hold_its_outputs_value() -> None:
    q, pos = torch.randn(2, 8).to(torch.bfloat16), torch.arange(2)
    q_out = (q.float() * 2).to(torch.bfloat16)
    assert declared_state(ROPE, resolve(ROPE, CorrectnessRules())) == {"q"}
    ok, _ = _check(ROPE, {"q": q, "pos": pos}, {"q": q_out, "pos": pos},
                   {"q": q, "pos": pos}, {"q_out": q_out})
    assert ok is None
    bad, _ = _check(ROPE, {"q": q, "pos": pos}, {"q": torch.zeros_like(q), "pos": pos},
                    {"q": q, "pos": pos}, {"q_out": q_out})
    assert bad is not None and bad.code == ReasonCode.INPUT_MUTATED


def _indexer_inputs() -> dict[str, torch.Tensor]:
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location(
        "fib_make_blobs", REPO / "kernels" / "fib_families" / "make_blobs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    blob = mod.dsa_indexer([2100, 1500], 34, 40, 51)
    g = torch.Generator().manual_seed(3)
    return {**blob, "q_index_fp8": torch.randn(2, 64, 128, generator=g).to(torch.float8_e4m3fn),
            "weights": torch.randn(2, 64, generator=g)}


def test_a_recomputed_near_tie_at_the_kth_score_is_accepted_like_fib() -> None:
    """FIB's DSA indexer evaluator judges the scores at the returned indices: a kernel that
    accumulates in another order may pick the next token at the boundary."""
    from sandboxharness.stages.topk_scores import derived_scores

    indexer = _definition("dsa_topk_indexer_fp8_t", "dsa_paged", {}, {
        "topk_indices": {"shape": ["b", "k"], "dtype": "int32"}})
    scores = derived_scores(indexer, _indexer_inputs())
    assert scores is not None and scores.shape == (2, 40 * 64)
    order = scores[0].argsort(descending=True)
    ref = torch.full((2, 2048), -1, dtype=torch.int32)
    ref[0] = order[:2048].to(torch.int32)
    reach1 = int(torch.isfinite(scores[1]).sum())
    assert reach1 == 1500
    ref[1, :reach1] = scores[1].argsort(descending=True)[:reach1].to(torch.int32)
    tol = Tolerance(atol=1e-2, rtol=1e-2)
    near = ref.clone()
    near[0, -1] = order[2048]  # the first token left out instead of the last one taken
    assert compare_set("topk_indices", near, ref, None).code is not None  # as a bare set: no
    assert compare_set("topk_indices", near, ref, scores, tol=tol).code is None
    far = ref.clone()
    far[0, 0] = order[2099]  # the lowest-scoring reachable token instead of the best
    assert compare_set("topk_indices", far, ref, scores, tol=tol).code is not None
    unreachable = ref.clone()
    unreachable[1, 0] = int((~torch.isfinite(scores[1])).nonzero()[0])
    assert compare_set("topk_indices", unreachable, ref, scores, tol=tol).code is not None
