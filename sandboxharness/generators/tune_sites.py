"""Where a Triton source's launch parameters live, and a rewrite that changes only them.

A *site* is an integer literal the search may change: a module-level ``BLOCK*``/``TILE*``
(block class), ``NUM_WARPS``/``NUM_STAGES`` constant, or a keyword of the same names (or
``num_warps``/``num_stages``) passed to a kernel launch ``kernel[grid](...)``. A launch that
passes no ``num_warps``/``num_stages`` gets an *insertion* site (Triton's defaults assumed).

The rewrite splices new literals into the original bytes at the literals' exact positions, so
formatting and comments stay; then it parses the result and checks that its syntax tree equals
the original's once every site's literal is blanked and inserted keywords removed. Anything
else differing (a name, a call, an operator) is refused: the rewrite can change constants only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Param = Literal["block", "num_warps", "num_stages"]
LADDERS: dict[Param, tuple[int, ...]] = {
    "block": tuple(2 ** i for i in range(0, 15)),
    "num_warps": (1, 2, 4, 8, 16, 32),
    "num_stages": (1, 2, 3, 4, 5, 6),
}
DEFAULTS: dict[Param, int] = {"num_warps": 4, "num_stages": 3}
_BLOCK = re.compile(r"^(BLOCK|TILE)(_[A-Z0-9]+)*$")
_LAUNCH_KW = {"num_warps": "num_warps", "num_stages": "num_stages"}


class RewriteError(ValueError):
    """A rewrite that would change more than launch-parameter literals."""


@dataclass(frozen=True)
class Site:
    path: str
    klass: Param
    name: str
    value: int
    start: int
    """Byte offset of the literal (or of the insertion point)."""
    end: int
    insert: bool = False

    @property
    def id(self) -> str:
        return f"{self.path}:{self.start}:{self.name}"


def classify_name(name: str) -> Param | None:
    if _BLOCK.match(name.upper()) and name.upper() == name:
        return "block"
    low = name.lower()
    if low in ("num_warps", "num_stages") and (name == low or name == name.upper()):
        return "num_warps" if low == "num_warps" else "num_stages"
    return None


def _offsets(src: bytes) -> list[int]:
    starts = [0]
    for i, b in enumerate(src):
        if b == 0x0A:
            starts.append(i + 1)
    return starts


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        return node.value
    return None


def find_sites(path: str, text: str) -> list[Site]:
    """Every tunable literal of one Python source (none when it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    raw = text.encode()
    lines = _offsets(raw)

    def at(node: ast.AST) -> tuple[int, int]:
        return (lines[node.lineno - 1] + node.col_offset,  # type: ignore[attr-defined]
                lines[node.end_lineno - 1] + node.end_col_offset)  # type: ignore[attr-defined]

    sites: list[Site] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name):
            klass, value = classify_name(stmt.targets[0].id), _int_literal(stmt.value)
            if klass is not None and value is not None:
                sites.append(Site(path, klass, stmt.targets[0].id, value, *at(stmt.value)))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            continue
        named = set()
        for kw in node.keywords:
            if kw.arg is None:
                continue
            named.add(kw.arg)
            klass, value = classify_name(kw.arg), _int_literal(kw.value)
            if klass is not None and value is not None:
                sites.append(Site(path, klass, kw.arg, value, *at(kw.value)))
        given: list[ast.AST] = [*node.args, *node.keywords]
        if not given or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        end = max(at(a)[1] for a in given)
        launch: tuple[Param, ...] = ("num_warps", "num_stages")
        for param in launch:
            if param not in named:
                sites.append(Site(path, param, param, DEFAULTS[param], end, end, insert=True))
    return sites


def step(value: int, klass: Param, direction: int, n: int = 1) -> int | None:
    """``value`` moved ``n`` rungs up (direction 1) or down (-1) its ladder; None off the end."""
    ladder = LADDERS[klass]
    if value in ladder:
        i = ladder.index(value) + direction * n
    else:  # off the ladder: the first rung past it in that direction is one step
        past = [j for j, r in enumerate(ladder) if (r > value if direction > 0 else r < value)]
        if not past:
            return None
        i = (past[0] if direction > 0 else past[-1]) + direction * (n - 1)
    return ladder[i] if 0 <= i < len(ladder) else None


def _normalised(tree: ast.AST, blank: Sequence[tuple[int, int]], lines: list[int],
                drop_kw: bool) -> str:
    """The tree's dump with literals at ``blank`` positions zeroed (and, when ``drop_kw``,
    ``num_warps``/``num_stages`` keywords of launches removed)."""
    spots = set(blank)

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            pos = lines[node.lineno - 1] + node.col_offset
            return ast.Constant(value=0) if pos in {s for s, _ in spots} else node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if drop_kw and isinstance(node.func, ast.Subscript):
                node.keywords = [k for k in node.keywords if k.arg not in _LAUNCH_KW]
            return node

    return ast.dump(Blank().visit(tree), include_attributes=False)


def rewrite(text: str, sites: Sequence[Site], values: Mapping[str, int]) -> str:
    """``text`` with each site in ``values`` (by id) set to its new value; RewriteError when
    the result would differ in anything but those literals."""
    raw = text.encode()
    chosen = sorted((s for s in sites if s.id in values), key=lambda s: s.start, reverse=True)
    out = raw
    for s in chosen:
        lit = str(int(values[s.id])).encode()
        piece = b", " + s.name.encode() + b"=" + lit if s.insert else lit
        out = out[:s.start] + piece + out[s.end:]
    new = out.decode()
    try:
        before, after = ast.parse(text), ast.parse(new)
    except SyntaxError as exc:
        raise RewriteError(f"rewritten source does not parse: {exc.msg}") from None
    keep = [s for s in sites if not s.insert]
    old_pos = [(s.start, s.end) for s in keep]
    # positions shift by earlier splices: recompute each kept literal's place in the new text
    shift, new_pos = 0, []
    for s in sorted(sites, key=lambda s: s.start):
        grow = 0
        if s.id in values:
            width = len(str(int(values[s.id])))
            grow = (len(", =") + len(s.name.encode()) + width) if s.insert \
                else width - (s.end - s.start)
        if not s.insert:
            new_pos.append((s.start + shift, s.end + shift))
        shift += grow
    if _normalised(before, old_pos, _offsets(raw), True) != _normalised(
            after, new_pos, _offsets(out), True):
        raise RewriteError("the rewrite changed more than launch-parameter literals")
    return new
