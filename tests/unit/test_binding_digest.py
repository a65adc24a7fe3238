"""The digest that binds a call's results (both sides compute it): pieces hashed side by side
for large tensors, the same answer for the same tensor, a different one for any change."""

from __future__ import annotations

import pytest
import torch

import sandboxharness.worker.binding as binding
from sandboxharness.worker.binding import combine, digest, input_digests


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "PIECE", 100)  # many pieces, boundaries inside elements


def test_every_byte_of_every_piece_counts(small_pieces: None) -> None:
    x = torch.randn(1000, generator=torch.Generator().manual_seed(1))  # 4000 bytes: 40 pieces
    base = digest({"out.y": x})
    assert digest({"out.y": x.clone()}) == base
    for i in (0, 24, 25, 500, 999):  # first, piece boundaries, middle, last element
        y = x.clone()
        y[i] += 1
        assert digest({"out.y": y}) != base, i


def test_name_dtype_and_shape_are_bound(small_pieces: None) -> None:
    x = torch.zeros(64, 16)
    base = digest({"out.y": x})
    assert digest({"out.z": x}) != base
    assert digest({"out.y": x.reshape(16, 64)}) != base
    assert digest({"out.y": x.view(torch.int32)}) != base


def test_per_input_digests_and_their_combination() -> None:
    a, b = torch.ones(3), torch.zeros(2)
    per = input_digests({"in.a": a, "in.b": b, "out.y": a, "in.s": 3})
    assert set(per) == {"in.a", "in.b"}  # tensors only, inputs only
    assert per["in.a"] == digest({"in.a": a})
    assert combine(per) == combine(dict(reversed(per.items())))  # name order
    assert combine(per) != combine({**per, "in.b": per["in.a"]})
