"""The direction catalogue: hypotheses keyed by bottleneck class and limiter, shipped as data
(``directions.yaml`` beside this module) and extensible by a user file.

Each round picks exactly one direction: the most specific entry for the heaviest regime's
signature (bottleneck and limiter, then bottleneck with any limiter, then ``any``), never a
blocked one, preferring recommended ones and those tried least, and never the previous round's
direction again when that round gained nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field

from ..errors import InputError, one_line
from ..intake import parse_model
from ..models._base import FrozenModel, Label, Text

__all__ = ["Catalogue", "Direction", "DirectionStatus", "load_catalogue", "load_yaml_model",
           "pick_direction"]

SHIPPED = Path(__file__).with_name("directions.yaml")
MAX_CATALOGUE_BYTES = 1024 * 1024
Bottleneck = Literal["compute", "memory", "latency", "launch", "unknown", "any"]
Param = Literal["block", "num_warps", "num_stages"]


class Direction(FrozenModel):
    id: Label
    bottleneck: Bottleneck
    limiter: Label = "*"
    hypothesis: Text
    moves: dict[Param, Literal["up", "down"]] = Field(default_factory=dict)
    """What a launch-parameter search changes; an agent reads the hypothesis."""

    def for_bundle(self, limiter_seen: str | None) -> dict[str, Any]:
        return {"id": self.id, "hypothesis": self.hypothesis, "bottleneck": self.bottleneck,
                "limiter": limiter_seen or self.limiter, "moves": dict(self.moves)}


class Catalogue(FrozenModel):
    directions: list[Direction] = Field(min_length=1, max_length=1024)

    def get(self, direction_id: str) -> Direction | None:
        return next((d for d in self.directions if d.id == direction_id), None)

    def merged(self, other: Catalogue) -> Catalogue:
        """``other``'s entries replace same-id entries and add the rest after them."""
        theirs = {d.id: d for d in other.directions}
        mine = [theirs.pop(d.id, d) for d in self.directions]
        return Catalogue(directions=[*mine, *theirs.values()])


class DirectionStatus(FrozenModel):
    tried: int = 0
    rejects: int = 0
    blocked: bool = False
    recommended: bool = False


M = TypeVar("M", bound=BaseModel)


def load_yaml_model(path: Path, model: type[M], what: str) -> M:
    """A small YAML document validated as ``model``: size-capped, safe loader, one-line
    errors naming the file."""
    try:
        if path.stat().st_size > MAX_CATALOGUE_BYTES:
            raise InputError(f"larger than {MAX_CATALOGUE_BYTES} bytes", where=str(path))
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - safe
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", where=str(path)) from None
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"invalid YAML: {one_line(exc, 200)}", where=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"{what} must be a YAML mapping", where=str(path))
    return parse_model(model, data, str(path))


def load_catalogue(user_file: Path | None = None) -> Catalogue:
    """The shipped catalogue, extended by ``user_file`` when given."""
    shipped = load_yaml_model(SHIPPED, Catalogue, "a direction catalogue")
    return shipped if user_file is None else shipped.merged(
        load_yaml_model(user_file, Catalogue, "a direction catalogue"))


def _matches(d: Direction, bottleneck: str, limiter: str | None) -> int:
    """Specificity of ``d`` for the signature (0: not applicable)."""
    if d.bottleneck == bottleneck and limiter is not None and d.limiter == limiter:
        return 3
    if d.bottleneck == bottleneck and d.limiter == "*":
        return 2
    if d.bottleneck == "any":
        return 1
    return 0


def pick_direction(catalogue: Catalogue, bottleneck: str | None, limiter: str | None, *,
                   status: Mapping[str, DirectionStatus], recent: Sequence[str],
                   last_gained: bool) -> Direction | None:
    """One direction for the round, or None when every applicable one is blocked."""
    klass = bottleneck or "unknown"
    options = [(spec, d) for d in catalogue.directions
               if (spec := _matches(d, klass, limiter)) and not status.get(
                   d.id, DirectionStatus()).blocked]
    if not options:
        return None
    if recent and not last_gained and len(options) > 1:
        options = [(s, d) for s, d in options if d.id != recent[-1]] or options

    def rank(item: tuple[int, Direction]) -> tuple[int, int, int, int]:
        spec, d = item
        st = status.get(d.id, DirectionStatus())
        return (-int(st.recommended), st.tried, -spec, catalogue.directions.index(d))

    return min(options, key=rank)[1]
