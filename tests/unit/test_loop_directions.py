"""The direction catalogue: shipped data keyed by bottleneck and limiter, extensible."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.errors import InputError
from sandboxharness.loop.directions import DirectionStatus, load_catalogue, pick_direction

CAT = load_catalogue()


def pick(b: str | None, lim: str | None, status: dict[str, DirectionStatus] | None = None,
         recent: tuple[str, ...] = (), gained: bool = False) -> str | None:
    d = pick_direction(CAT, b, lim, status=status or {}, recent=recent, last_gained=gained)
    return d.id if d else None


def test_the_most_specific_direction_for_the_signature_wins() -> None:
    assert pick("latency", "occupancy:registers") == "latency-registers"
    assert pick("memory", "l2_bandwidth") == "memory-l2-reuse"
    assert pick("memory", "dram_bandwidth") == "memory-wider-tiles"
    assert pick("launch", "small_grid") == "launch-small-grid"
    assert pick(None, None) == "explore-wider-tiles"  # no profile (CPU)


def test_latency_with_stalls_first_widens_the_loads_then_adds_warps() -> None:
    """A latency-bound kernel whose warps stall (occupancy not the cap, e.g. a one-warp row
    loop over small chunks) is offered wider tiles first, not only more warps."""
    assert pick("latency", "stalls") == "latency-wider-loads"
    assert CAT.get("latency-wider-loads").moves == {"block": "up"}  # type: ignore[union-attr]
    st = {"latency-wider-loads": DirectionStatus(tried=1, rejects=1)}
    assert pick("latency", "stalls", st, recent=("latency-wider-loads",)) == "latency-more-warps"


def test_blocked_directions_are_skipped_and_recommended_ones_preferred() -> None:
    st = {"latency-registers": DirectionStatus(tried=2, rejects=2, blocked=True)}
    assert pick("latency", "occupancy:registers", st) == "latency-more-warps"
    st = {"explore-narrower-tiles": DirectionStatus(tried=1, recommended=True)}
    assert pick(None, None, st) == "explore-narrower-tiles"


def test_a_direction_that_just_gained_nothing_is_not_picked_again() -> None:
    st = {"explore-wider-tiles": DirectionStatus(tried=1, rejects=1)}
    assert pick(None, None, st, recent=("explore-wider-tiles",)) != "explore-wider-tiles"


def test_every_direction_blocked_is_none() -> None:
    st = {d.id: DirectionStatus(blocked=True) for d in CAT.directions}
    assert pick("memory", "dram_bandwidth", st) is None


def test_a_user_file_adds_and_replaces(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("directions:\n"
                 "  - {id: memory-wider-tiles, bottleneck: memory, hypothesis: mine, "
                 "moves: {num_warps: down}}\n"
                 "  - {id: my-split-k, bottleneck: compute, limiter: balanced, "
                 "hypothesis: split K}\n")
    cat = load_catalogue(f)
    assert cat.get("memory-wider-tiles").hypothesis == "mine"  # type: ignore[union-attr]
    assert pick_direction(cat, "compute", "balanced", status={}, recent=(),
                          last_gained=False).id == "my-split-k"  # type: ignore[union-attr]
    assert len(cat.directions) == len(CAT.directions) + 1


@pytest.mark.parametrize("text", ["[1, 2]", "directions: []", "directions:\n  - {id: x}\n",
                                  "directions: [{id: x, bottleneck: gpu, hypothesis: h}]",
                                  "a: [unclosed"])
def test_a_bad_user_file_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as exc:
        load_catalogue(f)
    assert str(f) in str(exc.value) and "\n" not in str(exc.value)
