"""Result files held to the digests bound when the call returned (``stages.results``): the
outputs as a group, and each input the file carries on its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.results import check_bound
from sandboxharness.stages.session import KernelFault
from sandboxharness.worker.binding import digest, input_digests


def _bound(tensors: dict[str, torch.Tensor]) -> dict[str, str]:
    outs = {k: v for k, v in tensors.items() if k.startswith("out.")}
    return {"out": digest(outs), **input_digests(tensors)}


def test_a_file_matching_its_binding_passes() -> None:
    t = {"out.y": torch.ones(4), "in.x": torch.zeros(4)}
    check_bound(Path("r.safetensors"), t, _bound(t))
    # an input left out of the file (unchanged) is judged by its digest elsewhere
    check_bound(Path("r.safetensors"), {"out.y": t["out.y"]}, _bound(t))


@pytest.mark.parametrize("change", ["input rewritten", "input never bound", "output rewritten"])
def test_anything_else_in_the_file_is_an_integrity_violation(change: str) -> None:
    t = {"out.y": torch.ones(4), "in.x": torch.zeros(4)}
    bound = _bound(t)
    if change == "input rewritten":
        t = {**t, "in.x": torch.full((4,), 7.0)}
    elif change == "input never bound":
        t = {**t, "in.w": torch.zeros(2)}
    else:
        t = {**t, "out.y": torch.zeros(4)}
    with pytest.raises(KernelFault) as err:
        check_bound(Path("r.safetensors"), t, bound)
    assert err.value.code == ReasonCode.INTEGRITY_VIOLATION
