"""FlashInfer-Bench's operator families on CPU, through the library (issue 15's corpus).

For each family (rmsnorm, gemm, fp8 block-scale MoE, GDN decode/prefill/MTP, DSA sparse
attention and top-k indexer, RoPE, Mamba SSU, top-k sampling, paged GQA) the definition's own
reference is the honest solution, ``kernels/fib_families/solutions/`` holds honest rewrites
(in place where the family's FlashInfer kernel is), and one line of the reference changed is
the wrong one. Under ``policies/fib.yaml`` every honest one must be promoted and every wrong
one rejected with its code. Blobs are written at test time, mode 0600, behind Hugging Face
cache-style relative links (``kernels/fib_families/make_blobs.py``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandboxharness.api import evaluate_files
from sandboxharness.models import Policy, Verdict
from tests.conftest import REPO, make_solution

FAM = REPO / "kernels" / "fib_families"
MANIFEST: dict[str, Any] = json.loads((FAM / "manifest.json").read_text())
BY_NAME = {f["definition"]: f for f in MANIFEST["families"]}


def _short(name: str) -> str:
    return "_".join(name.split("_")[:3])


def _params() -> list[Any]:
    out = []
    for fam in MANIFEST["families"]:
        name = fam["definition"]
        out.append(pytest.param(name, "reference", id=f"{_short(name)}-reference"))
        waiting = fam.get("xfail", {})
        out += [pytest.param(name, r, id=f"{_short(name)}-{Path(r).stem}", marks=[
            pytest.mark.xfail(strict=False, reason=waiting[r])] if r in waiting else [])
            for r in fam["rewrites"]]
        out.append(pytest.param(name, "wrong", id=f"{_short(name)}-wrong"))
        if "needs_repeats" in fam:
            out.append(pytest.param(name, "needs_repeats", id=f"{_short(name)}-top_k_plus_one"))
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("fib_make_blobs", FAM / "make_blobs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    snapshot: Path = mod.write_dataset(tmp_path_factory.mktemp("fib"))
    return snapshot


def fib_policy(static: bool = False) -> Policy:
    """policies/fib.yaml as shipped, with fewer calls (and the analysers off unless asked)."""
    data = yaml.safe_load((REPO / "policies" / "fib.yaml").read_text())
    data["name"] = "fib-ci"
    data["correctness"]["trials"] = 2
    data["correctness"]["sampling"]["samples_per_row"] = 200  # FIB's 500k is a GPU's work
    data["benchmark"].update(warmup=0, iterations=2, sampled_checks=1)
    data["limits"].update(compile_timeout_s=60, run_timeout_s=120)
    if not static:
        data["static"].update(bandit=False, semgrep=False, ast_rules=False)
    return Policy.model_validate(data)


def _code(name: str, variant: str) -> str:
    from sandboxharness.intake import load_definition

    ref = load_definition(FAM / "definitions" / f"{name}.json").reference
    if variant == "reference":
        return ref
    if variant in ("wrong", "needs_repeats"):
        patch = BY_NAME[name][variant]
        assert ref.count(patch["old"]) == 1, "the wrong variant changes exactly one line"
        return ref.replace(patch["old"], patch["new"])
    return (FAM / "solutions" / name / variant).read_text()


def _evaluate(name: str, variant: str, dataset: Path, tmp_path: Path,
              policy: Policy | None = None) -> Verdict:
    sol = tmp_path / "solution.json"
    sol.write_text(json.dumps(make_solution(_code(name, variant), name=f"{name}-{variant}",
                                            dps=False, language="python", definition=name)))
    return evaluate_files(FAM / "definitions" / f"{name}.json", sol,
                          FAM / "workloads" / f"{name}.jsonl", policy or fib_policy(),
                          seed=7, blob_root=dataset)


def _trials(v: Verdict) -> list[dict[str, Any]]:
    corr = v.stage("correctness")
    assert corr is not None
    return [t for c in corr.details["cases"] for t in c["trials"]]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), _params())
def test_family(name: str, variant: str, dataset: Path, tmp_path: Path) -> None:
    v = _evaluate(name, variant, dataset, tmp_path)
    codes = {r.code.value for r in v.reasons}
    said = [f"{r.code.value} ({r.stage.value}): {r.message}" for r in v.reasons]
    if variant in ("wrong", "needs_repeats"):
        want = BY_NAME[name][variant]["expect"]
        assert v.decision == "reject" and codes == {want}, (BY_NAME[name][variant]["why"], said)
        return
    assert v.decision == "promote", said
    corr = v.stage("correctness")
    assert corr is not None and corr.details["cases"] and all(
        t["status"] == "PASSED" for t in _trials(v))
    comparison = corr.details["comparison"]
    outputs = [o for t in _trials(v) for o in t["outputs"].values()]
    if name.startswith("moe_fp8_block_scale"):  # FIB's low-bit rule, named in the verdict
        assert comparison["required_matched_ratio"] == 0.95
        assert "fib-lowbit-moe-fp8-block-scale" in comparison["overrides_applied"]
    if name.startswith("dsa_topk_indexer"):
        assert comparison["modes"] == {"topk_indices": "set"}
    if name.startswith("top_k_sampling"):
        assert {o["mode"] for o in outputs} == {"sampling"}
    state = {s for t in _trials(v) for s in t.get("state_inputs", [])}
    expected_state = {"selective_state_update_d64_s16": {"state"},
                      "gdn_mtp_qk4_v8_d128_k_last": {"intermediate_states_buffer"},
                      "rope_with_cos_sin_cache_neox_style_d128_rd64": {"q", "k"}}
    if name in expected_state:
        assert state == expected_state[name]


@pytest.mark.slow
def test_fib_reference_passes_static_analysis(dataset: Path, tmp_path: Path) -> None:
    """The analysers on (bandit, semgrep, AST rules) must not reject a FIB reference: the MoE
    one, the longest, with its asserts and in-place index_add_."""
    name = "moe_fp8_block_scale_ds_routing_topk4_ng4_kg2_e4_h256_i128"
    v = _evaluate(name, "reference", dataset, tmp_path, fib_policy(static=True))
    static = v.stage("static")
    assert static is not None and static.status == "passed"
    assert v.decision == "promote", v.reasons


def test_fib_policy_keeps_the_default_security_settings() -> None:
    """fib.yaml changes how outputs are judged, never what a candidate may do."""
    fib = yaml.safe_load((REPO / "policies" / "fib.yaml").read_text())
    default = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    for key in ("languages", "imports", "max_source_bytes", "max_sources",
                "forbid_baseline_library", "static", "required_stages", "sandbox", "audit"):
        assert fib[key] == default[key], key
    for key in ("memory_mb", "cpu_time_s", "max_processes", "max_open_files", "max_file_size_mb",
                "max_log_bytes", "max_result_mb"):
        assert fib["limits"][key] == default["limits"][key], key
