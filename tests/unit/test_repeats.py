"""Sample requests for stochastic outputs: sized from the policy, refused before anything runs
when the definition cannot be judged as a sampler."""

from __future__ import annotations

import pytest

from sandboxharness.errors import InputError
from sandboxharness.models import Definition
from sandboxharness.stages.cases import Case
from sandboxharness.stages.repeats import sample_request
from tests.conftest import fast_policy


def _definition(inputs: dict[str, object]) -> Definition:
    return Definition.model_validate({
        "name": "top_k_sampling_v16", "op_type": "sampling",
        "axes": {"b": {"type": "var"}, "v": {"type": "const", "value": 16}},
        "inputs": inputs, "outputs": {"samples": {"shape": ["b"], "dtype": "int64"}},
        "reference": "def run(*a):\n    pass\n"})


CASE = Case("w0", "u", {"b": 4}, False, {
    "inputs": [{"name": "probs", "dtype": "float32", "shape": [4, 16]},
               {"name": "top_k", "dtype": "int32", "shape": [4]}],
    "outputs": [{"name": "samples", "dtype": "int64", "shape": [4]}]})


def test_sampler_case_gets_tiled_repeats() -> None:
    d = _definition({"probs": {"shape": ["b", "v"], "dtype": "float32"},
                     "top_k": {"shape": ["b"], "dtype": "int32"}})
    req = sample_request(d, CASE, fast_policy(correctness={"sampling": {"samples_per_row": 600}}))
    assert req is not None and req.tile * req.calls >= 600
    assert req.tile_inputs == ["probs", "top_k"]
    assert req.tiled_case["outputs"][0]["shape"] == [4 * req.tile]


def test_sampler_without_its_inputs_is_bad_input_up_front() -> None:
    d = _definition({"probs": {"shape": ["b", "v"], "dtype": "float32"}})  # no top_k
    with pytest.raises(InputError, match="top_k"):
        sample_request(d, CASE, fast_policy())
