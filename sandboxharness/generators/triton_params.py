"""``triton-params``: a launch-parameter search over a Triton solution, no model needed.

From the round's best solution it finds the tunable literals (:mod:`.tune_sites`), orders the
moves the round's direction asks for (``block``/``num_warps``/``num_stages``, up or down),
demotes moves the profile signature argues against (more warps or wider tiles when registers
cap occupancy; wider tiles when the grid is under one wave; deeper pipelines when shared
memory caps occupancy), and returns the first ``k`` candidates it has not proposed before.
Each candidate is a FlashInfer-Bench Solution whose sources differ from the best's in those
literals only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import combinations
from typing import TYPE_CHECKING, Any

from ..models import Solution, SourceFile
from ..models.solution import Language
from .interface import GeneratorError
from .tune_sites import LADDERS, Param, RewriteError, Site, find_sites, rewrite, step

if TYPE_CHECKING:
    from ..loop.bundle import TaskBundle

__all__ = ["TritonParamsGenerator"]

_ALL: tuple[Param, ...] = ("block", "num_warps", "num_stages")


def _demoted(change: dict[Site, int], sig: Any) -> bool:
    """True when the signature argues against this change (it is tried last)."""
    if sig is None:
        return False
    ups = {s.klass for s, v in change.items() if v > s.value}
    downs = {s.klass for s, v in change.items() if v < s.value}
    limiter = str(getattr(sig, "limiter", "") or "")
    occ = str(getattr(sig, "occupancy_limiter", "") or "")
    regs = getattr(sig, "registers_per_thread", None)
    waves = getattr(sig, "waves_per_sm", None)
    if ("registers" in limiter or occ == "registers" or (regs or 0) >= 168) and (
            ups & {"block", "num_warps"}):
        return True
    if waves is not None and waves < 1.0 and "block" in ups:
        return True
    if ("shared_mem" in limiter or occ == "shared_mem") and "num_stages" in ups:
        return True
    return getattr(sig, "bottleneck", None) == "launch" and "block" in downs and waves is not None \
        and waves >= 1.0


def _changes(sites: list[Site], moves: dict[Param, int]) -> Iterator[dict[Site, int]]:
    """Changes in the order the direction prefers: each site one rung, each class together,
    classes combined; the same two rungs away; one rung the opposite way (exploration); then
    three rungs and further, so a direction picked again from the same best (after an
    archive) still has candidates it has not proposed."""
    by_class = {k: [s for s in sites if s.klass == k] for k in _ALL}
    prefs = [(k, d) for k, d in moves.items() if by_class[k]] or [
        (k, 1) for k in _ALL if by_class[k]]
    yield from _along(by_class, prefs, (1, 2))
    for k, d in prefs:
        for s in by_class[k]:
            if (v := step(s.value, k, -d)) is not None:
                yield {s: v}
    yield from _along(by_class, prefs, range(3, max(len(r) for r in LADDERS.values())))


def _along(by_class: dict[Param, list[Site]], prefs: list[tuple[Param, int]],
           spans: Iterable[int]) -> Iterator[dict[Site, int]]:
    for rungs in spans:
        for k, d in prefs:
            for s in by_class[k]:
                if (v := step(s.value, k, d, rungs)) is not None:
                    yield {s: v}
            together = {s: v for s in by_class[k] if (v := step(s.value, k, d, rungs))}
            if len(together) > 1:
                yield together
        for (k1, d1), (k2, d2) in combinations(prefs, 2):
            both = {s: v for k, d in ((k1, d1), (k2, d2)) for s in by_class[k]
                    if (v := step(s.value, k, d, rungs)) is not None}
            if both:
                yield both


class TritonParamsGenerator:
    """The built-in search (``--generator triton-params``)."""

    name = "triton-params"

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def seen(self, keys: Iterable[str]) -> None:
        """Candidates measured already (the campaign's trajectory): not proposed again."""
        self._seen.update(keys)

    def propose(self, task: TaskBundle, k: int) -> list[Solution]:
        from ..loop.state import candidate_key

        if task.best_solution is None:
            raise GeneratorError("triton-params needs a starting solution to tune")
        best = Solution.model_validate(task.best_solution)
        if best.spec.language != Language.TRITON:
            raise GeneratorError(f"triton-params tunes Triton solutions, not "
                                 f"{best.spec.language.value}")
        sites = [s for src in best.sources if src.path.endswith(".py")
                 for s in find_sites(src.path, src.content)]
        real = [s for s in sites if not s.insert]
        if not real and not sites:
            raise GeneratorError("no launch parameter to tune (no BLOCK*/TILE* constant, "
                                 "num_warps or num_stages literal, and no kernel launch)")
        moves: dict[Param, int] = {}
        for key, way in ((task.direction or {}).get("moves") or {}).items():
            if key in LADDERS:
                moves[key] = 1 if way == "up" else -1
        sig = self._signature(task)
        ordered = list(_changes(sites, moves))
        ordered.sort(key=lambda ch: _demoted(ch, sig))  # stable: preferred order kept
        out: list[Solution] = []
        for change in ordered:
            cand = self._apply(best, change, task)
            if cand is None:
                continue
            key = candidate_key(cand)
            if key in self._seen or key == candidate_key(best):
                continue
            self._seen.add(key)
            out.append(cand)
            if len(out) >= k:
                break
        if not out:  # the interface: GeneratorError when none can be made (the round says why)
            raise GeneratorError(f"every launch-parameter move of direction "
                                 f"{(task.direction or {}).get('id', 'explore')!r} from this "
                                 "best was proposed already")
        return out

    @staticmethod
    def _signature(task: TaskBundle) -> Any:
        """The signature of the heaviest regime the bundle carries (first non-empty)."""
        return next((s for s in task.signatures.values() if s is not None), None)

    @staticmethod
    def _apply(best: Solution, change: dict[Site, int], task: TaskBundle) -> Solution | None:
        sources = []
        for src in best.sources:
            mine = {s.id: v for s, v in change.items() if s.path == src.path}
            if not mine:
                sources.append(src)
                continue
            all_sites = find_sites(src.path, src.content)
            try:
                text = rewrite(src.content, all_sites, mine)
            except RewriteError:
                return None
            sources.append(SourceFile(path=src.path, content=text))
        said = ", ".join(f"{s.name}={v}" for s, v in sorted(change.items(),
                                                            key=lambda i: i[0].start))
        tag = "-".join(f"{s.name.lower().replace('_', '')}{v}" for s, v in change.items())
        direction = (task.direction or {}).get("id", "explore")
        return Solution(name=f"{best.name[:120]}-tp-{tag}"[:200], definition=best.definition,
                        author="triton-params", spec=best.spec, sources=sources,
                        description=f"launch parameters {said} (direction {direction}, round "
                        f"{task.round})")
