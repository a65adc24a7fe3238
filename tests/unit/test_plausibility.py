"""Class 8 of issue 16: a time below the speed-of-light bound is impossible, not a win."""

from __future__ import annotations

from sandboxharness.intake import load_definition
from sandboxharness.stages.benchmark.roofline import bytes_per_call, implausible
from tests.conftest import DATA

CEIL = {"copy_bandwidth_Bps": 4.0e12}  # ~ the H200's measured D2D copy rate


def _payload(rows: int, index_input: bool = False) -> dict:  # type: ignore[type-arg]
    ins = [{"name": "x", "dtype": "bfloat16", "shape": [rows, 4096], "spec": {"type": "random"}},
           {"name": "w", "dtype": "bfloat16", "shape": [4096], "spec": {"type": "random"}}]
    if index_input:
        ins.append({"name": "idx", "dtype": "int32", "shape": [rows],
                    "spec": {"type": "random"}})
    return {"inputs": ins,
            "outputs": [{"name": "y", "dtype": "bfloat16", "shape": [rows, 4096]}]}


def test_a_time_faster_than_the_bytes_allow_is_implausible() -> None:
    """A cached or skipped computation reading 40 us for 240 MB (SOL ~60 us) is rejected."""
    d = load_definition(DATA / "tiny" / "rms_t.json")
    p = _payload(14509)
    sol_ms = bytes_per_call(p) / CEIL["copy_bandwidth_Bps"] * 1e3
    assert implausible(d, p, 0.5 * sol_ms, CEIL, 0.7) is not None
    assert implausible(d, p, 0.9 * sol_ms, CEIL, 0.7) is None  # near the bound: honest
    assert implausible(d, p, 0.5 * sol_ms, CEIL, None) is None  # policy: record only


def test_indexed_inputs_are_recorded_only() -> None:
    """With an index input a kernel may read only part of a tensor: no lower bound."""
    d = load_definition(DATA / "tiny" / "rms_t.json")
    p = _payload(14509, index_input=True)
    assert implausible(d, p, 1e-6, CEIL, 0.7) is None
