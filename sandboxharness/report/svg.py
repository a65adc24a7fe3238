"""Plots as inline SVG, written here: no script, no font, nothing fetched.

Every string placed in a plot goes through :func:`esc` (names come from untrusted documents)
and is cut to a length the layout can hold. Each plot is an ``<svg class="plot">`` with a
``data-plot`` id and a ``<title>``, so a reader (or the browser test) can find every one.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 760
LEFT = 230
RIGHT = 70
PALETTE = ("#3366cc", "#dc7a1e", "#2a9d5c", "#b8336a", "#7a5cc2", "#8c6d31", "#1aa0b8",
           "#d9b310", "#5f6b7a", "#e0555a")
VERDICT_COLOURS = {"baseline": "#5f6b7a", "promote": "#2a9d5c", "archive": "#3366cc",
                   "reject": "#dc3545"}


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def cut(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))  # counts, and round numbers, without decimals
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    colour: str = ""


def _open(plot_id: str, title: str, height: int) -> list[str]:
    return [f'<svg class="plot" data-plot="{esc(plot_id)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
            f'aria-label="{esc(title)}">', f"<title>{esc(title)}</title>",
            f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
            f'<text x="8" y="18" class="ptitle">{esc(cut(title, 100))}</text>']


def _legend(series: Sequence[Series], y: int) -> list[str]:
    out, x = [], 8
    for s in series:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{s.colour}"/>'
                   f'<text x="{x + 14}" y="{y}" class="small">{esc(cut(s.name, 22))}</text>')
        x += 24 + 7 * min(len(s.name), 22)
    return out


def empty(plot_id: str, title: str, note: str) -> str:
    parts = _open(plot_id, title, 60)
    parts.append(f'<text x="8" y="44" class="small">{esc(note)}</text></svg>')
    return "".join(parts)


def _coloured(series: Sequence[Series]) -> list[Series]:
    return [Series(s.name, s.values, s.colour or PALETTE[i % len(PALETTE)])
            for i, s in enumerate(series)]


def hbars(plot_id: str, title: str, labels: Sequence[str], series: Sequence[Series], *,
          unit: str = "", mark: float | None = None) -> str:
    """Grouped horizontal bars: one group per label, one bar per series; ``mark`` draws a
    dashed line at that value (1.0 for speedups)."""
    series = _coloured(series)
    values = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    if not labels or not values:
        return empty(plot_id, title, "no measurements")
    top = max([*values, mark or 0.0]) or 1.0
    bar, gap = 13, 9
    group = bar * len(series) + gap
    height = 48 + group * len(labels) + 24
    span = WIDTH - LEFT - RIGHT
    parts = _open(plot_id, title, height)
    parts += _legend(series, 36)
    y = 48
    for i, label in enumerate(labels):
        parts.append(f'<text x="{LEFT - 6}" y="{y + bar * len(series) / 2 + 4:.1f}" '
                     f'class="small" text-anchor="end">{esc(cut(label))}</text>')
        for s in series:
            v = s.values[i] if i < len(s.values) else None
            if v is not None and math.isfinite(v):
                w = max(1.0, span * v / top)
                parts.append(f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{bar - 2}" '
                             f'fill="{s.colour}"><title>{esc(s.name)}: {esc(fmt(v))}{esc(unit)}'
                             f'</title></rect><text x="{LEFT + w + 4:.1f}" y="{y + bar - 3}" '
                             f'class="tiny">{esc(fmt(v))}{esc(unit)}</text>')
            y += bar
        y += gap
    axis = f'<line x1="{LEFT}" y1="44" x2="{LEFT}" y2="{y}" stroke="#444"/>'
    if mark is not None:
        mx = LEFT + span * mark / top
        axis += (f'<line x1="{mx:.1f}" y1="44" x2="{mx:.1f}" y2="{y}" stroke="#888" '
                 f'stroke-dasharray="4 3"/><text x="{mx + 3:.1f}" y="{y + 14}" class="tiny">'
                 f'{esc(fmt(mark))}{esc(unit)}</text>')
    parts.append(axis + "</svg>")
    return "".join(parts)


def stacked(plot_id: str, title: str, labels: Sequence[str], parts_: Sequence[Series],
            unit: str = " s") -> str:
    """One horizontal bar per label, split into the series' shares (stage times)."""
    parts_ = _coloured(parts_)
    totals = [sum(v for s in parts_ if i < len(s.values) and (v := s.values[i]) is not None)
              for i in range(len(labels))]
    if not labels or not any(totals):
        return empty(plot_id, title, "no stage times")
    top = max(totals) or 1.0
    bar = 16
    height = 48 + (bar + 6) * len(labels) + 10
    span = WIDTH - LEFT - RIGHT
    out = _open(plot_id, title, height)
    out += _legend(parts_, 36)
    y = 48
    for i, label in enumerate(labels):
        out.append(f'<text x="{LEFT - 6}" y="{y + 12}" class="small" text-anchor="end">'
                   f'{esc(cut(label))}</text>')
        x = float(LEFT)
        for s in parts_:
            v = s.values[i] if i < len(s.values) else None
            if v:
                w = span * v / top
                out.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" '
                           f'height="{bar}" fill="{s.colour}"><title>{esc(s.name)}: '
                           f'{esc(fmt(v))}{esc(unit)}</title></rect>')
                x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 12}" class="tiny">{esc(fmt(totals[i]))}'
                   f'{esc(unit)}</text>')
        y += bar + 6
    out.append(f'<line x1="{LEFT}" y1="44" x2="{LEFT}" y2="{y}" stroke="#444"/></svg>')
    return "".join(out)


def rounds(plot_id: str, title: str, xs: Sequence[int], ys: Sequence[float | None],
           verdicts: Sequence[str | None]) -> str:
    """Best mean latency over rounds, each round's point coloured by its verdict."""
    pts = [(x, y, v) for x, y, v in zip(xs, ys, verdicts, strict=True)
           if y is not None and math.isfinite(y)]
    if not pts:
        return empty(plot_id, title, "no round recorded a latency")
    height, top_y, bottom = 260, 40, 220
    lo, hi = min(p[1] for p in pts), max(p[1] for p in pts)
    hi = hi if hi > lo else lo + 1.0
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    span_x = max(x1 - x0, 1)

    def px(x: int) -> float:
        return 60 + (WIDTH - 100) * (x - x0) / span_x

    def py(y: float) -> float:
        return bottom - (bottom - top_y) * (y - lo) / (hi - lo)

    out = _open(plot_id, title, height)
    out.append(f'<line x1="60" y1="{bottom}" x2="{WIDTH - 30}" y2="{bottom}" stroke="#444"/>'
               f'<line x1="60" y1="{top_y}" x2="60" y2="{bottom}" stroke="#444"/>'
               f'<text x="56" y="{top_y + 4}" class="tiny" text-anchor="end">{esc(fmt(hi))}'
               f'</text><text x="56" y="{bottom}" class="tiny" text-anchor="end">'
               f'{esc(fmt(lo))}</text><text x="{WIDTH / 2:.0f}" y="{bottom + 30}" '
               f'class="small" text-anchor="middle">round (best mean latency, ms)</text>')
    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="#5f6b7a" stroke-width="1.5"/>')
    for x, y, v in pts:
        colour = VERDICT_COLOURS.get(v or "", "#888888")
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4.5" fill="{colour}">'
                   f'<title>round {x}: {esc(fmt(y))} ms, {esc(v or "no verdict")}</title>'
                   f'</circle><text x="{px(x):.1f}" y="{bottom + 14}" class="tiny" '
                   f'text-anchor="middle">{x}</text>')
    legend = [Series(k, [], c) for k, c in VERDICT_COLOURS.items()]
    out += _legend(legend, 34)
    out.append("</svg>")
    return "".join(out)
