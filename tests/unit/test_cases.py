"""Case selection, held-out sizes, seeds and input generation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from sandboxharness.inputs.tensorgen import make_inputs, make_outputs
from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.stages.cases import build_cases, derive_seed, satisfies
from tests.conftest import fast_policy


def test_heldout_sizes_go_beyond_the_workload_file(tiny_def_path, tiny_wl_path) -> None:
    d, w = load_definition(tiny_def_path), load_workloads(tiny_wl_path)
    cases = build_cases(d, w, fast_policy(correctness={"heldout_values": [1, 4, 37]}))
    file_sizes = {c.axes["b"] for c in cases if not c.heldout}
    held = {c.axes["b"] for c in cases if c.heldout}
    assert file_sizes == {4, 16}
    assert held == {1, 37}  # 4 is already in the file
    assert cases[0].payload["outputs"] == [{"name": "y", "dtype": "float32", "shape": [4, 128]}]


def test_constraints_filter_heldout_sizes_without_eval(tiny_def_path) -> None:
    d = load_definition(tiny_def_path)
    d2 = d.model_copy(update={"constraints": ["b % 2 == 0", "__import__('os')"]})
    assert satisfies(d2, {"b": 4}) and not satisfies(d2, {"b": 3})


def test_seeds_are_derived_and_distinct() -> None:
    seeds = {derive_seed(1, "trial", "w0", t) for t in range(100)}
    assert len(seeds) == 100 and derive_seed(1, "x") == derive_seed(1, "x")


def test_inputs_are_reproducible_across_processes(tiny_def_path, tiny_wl_path) -> None:
    case = build_cases(load_definition(tiny_def_path), load_workloads(tiny_wl_path),
                       fast_policy())[0]
    here = make_inputs(case.payload, 1234, "cpu", ".")[0]
    code = ("import json,sys,torch;from sandboxharness.inputs.tensorgen import make_inputs;"
            "p=json.loads(sys.argv[1]);print(float(make_inputs(p,1234,'cpu','.')[0].sum()))")
    import json

    out = subprocess.run([sys.executable, "-c", code, json.dumps(case.payload)],
                         capture_output=True, text=True, check=True)
    assert abs(float(out.stdout) - float(here.sum())) < 1e-6
    other = make_inputs(case.payload, 1235, "cpu", ".")[0]
    assert not torch.equal(here, other)


def test_destination_buffers_are_poisoned(tiny_def_path, tiny_wl_path) -> None:
    case = build_cases(load_definition(tiny_def_path), load_workloads(tiny_wl_path),
                       fast_policy())[0]
    (y,) = make_outputs(case.payload, "cpu")
    assert torch.isnan(y).all()


def test_every_workload_by_default_and_a_sample_is_said() -> None:
    """FlashInfer-Bench parity: the whole file unless the policy samples, and then the
    verdict's coverage notes say how many of how many."""
    from sandboxharness.intake import load_definition, load_workloads
    from sandboxharness.models import Policy
    from sandboxharness.stages.cases import build_cases

    fib = Path(__file__).resolve().parents[1] / "data" / "fib"
    d = load_definition(fib / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")
    wl = load_workloads(fib / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl")
    assert len(wl) == 14
    every = build_cases(d, wl, Policy.model_validate({"name": "all"}))
    assert len([c for c in every if not c.heldout]) == 14
    assert not any("sampled" in n for n in every.notes)
    some = build_cases(d, wl, Policy.model_validate(
        {"name": "four", "correctness": {"max_workloads": 4}}))
    assert len([c for c in some if not c.heldout]) == 4
    assert "sampled 4 of the file's 14 workloads (correctness.max_workloads: 4)" in some.notes
