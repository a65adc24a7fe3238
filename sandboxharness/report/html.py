"""One self-contained ``report.html``: tables and inline SVG plots, nothing from the network.

Every string from a document or a verdict is escaped (:func:`svg.esc`). A Content-Security-
Policy allows only this page's own style block and self-check script (by hash), so markup
that escaped escaping could still run nothing and fetch nothing. The script only marks each
plot that the browser laid out (``data-rendered``): the report reads the same without it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._internal import host
from .schema import SCHEMA_VERSION, STAGES
from .svg import Series, cut, esc, fmt, hbars, rounds, stacked
from .tables import Row
from .views import CandidateView, candidates, leaderboard, per_workload, rejection_counts, workloads

MAX_SERIES = 6
"""Candidates drawn side by side in one plot (the leaderboard's head)."""
MAX_BARS = 40
"""Candidates in one stage-time plot (the slowest first are the interesting ones)."""

STYLE = """
body{font-family:sans-serif;margin:24px;color:#1d2330;background:#fff;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ccd}
h3{font-size:15px}table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
td,th{border:1px solid #ccd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef1f6}.num{text-align:right;font-variant-numeric:tabular-nums}
.promote,.passed{color:#17804a;font-weight:bold}.reject,.failed{color:#c0392b;font-weight:bold}
.msg{font-family:monospace;font-size:12px;white-space:pre-wrap;word-break:break-all}
svg.plot{display:block;margin:10px 0 18px;border:1px solid #e3e6ee}
.ptitle{font-size:13px;font-weight:bold;fill:#1d2330}.small{font-size:11px;fill:#1d2330}
.tiny{font-size:10px;fill:#4a5160}.meta{color:#5f6b7a;font-size:12px}
"""
SELF_CHECK = (
    "(function(){var p=document.querySelectorAll('svg.plot'),ok=0;"
    "for(var i=0;i<p.length;i++){var r=p[i].getBoundingClientRect(),b=p[i].getBBox(),"
    "n=p[i].querySelectorAll('rect,circle,polyline,line,text').length;"
    "if(r.width>0&&r.height>0&&b.width>0&&b.height>0&&n>2){"
    "p[i].setAttribute('data-rendered','yes');ok++;}}"
    "document.body.setAttribute('data-plots-rendered',ok+'/'+p.length);})();")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _csp() -> str:
    return (f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SELF_CHECK)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _cell(value: Any, cls: str = "") -> str:
    if isinstance(value, float):
        return f'<td class="num">{esc(fmt(value))}</td>'
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<td{attr}>{esc('' if value is None else value)}</td>"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _label(axes: str, uuid: str) -> str:
    return f"{axes} ({cut(uuid, 10)})"


def _definition(name: str, views: list[CandidateView], idx: int) -> str:
    board = leaderboard(views)
    order = workloads(views)
    labels = [_label(a, u) for u, a in order]
    out = [f'<h2 id="def-{idx}">Definition {esc(name)}</h2>',
           f'<p class="meta">{len(views)} candidate(s), {len(order)} workload(s)</p>',
           "<h3>Leaderboard: best solution per author</h3>",
           _table(["#", "author", "solution", "language", "outcome", "workloads passed",
                   "speedup (geomean)", "reasons"],
                  [[_cell(i + 1), _cell(v.author), _cell(v.solution), _cell(v.language),
                    _cell(v.outcome, v.outcome), _cell(f"{v.passed}/{len(v.rows)}"),
                    _cell(v.geomean), _cell(" ".join(v.reasons))]
                   for i, v in enumerate(board)])]
    head = board[:MAX_SERIES]
    out.append(hbars(f"speedup-{idx}", f"{name}: speedup over the reference per workload",
                     labels, [Series(f"{v.solution} ({v.author})",
                                     per_workload(v, "speedup", order)) for v in head],
                     unit="x", mark=1.0))
    lat = [Series(f"{v.solution} ({v.author})", per_workload(v, "latency_ms", order))
           for v in head[:3]]
    for col, title in (("reference_ms", "reference"), ("flashinfer_ms", "FlashInfer")):
        values = next((vals for v in board if any(vals := per_workload(v, col, order))), [])
        if any(x is not None for x in values):
            lat.append(Series(title, values, "#5f6b7a" if col == "reference_ms" else "#d9b310"))
    out.append(hbars(f"latency-{idx}", f"{name}: median latency per workload (ms)", labels,
                     lat, unit=" ms"))
    timed = sorted(views, key=lambda v: -sum(x or 0.0 for x in v.stage_s.values()))[:MAX_BARS]
    out.append(stacked(f"stages-{idx}", f"{name}: time per stage, per candidate",
                       [f"{v.solution} ({v.author})" for v in timed],
                       [Series(s, [v.stage_s.get(s) for v in timed]) for s in STAGES]))
    out.append("<h3>Every candidate: pass/fail and reasons</h3>")
    out.append(_table(["solution", "author", "outcome", "passed", "reasons (first lines)"],
                      [[_cell(v.solution), _cell(v.author), _cell(v.outcome, v.outcome),
                        _cell(f"{v.passed}/{len(v.rows)}"),
                        _cell("\n".join(v.messages.splitlines()[:3])[:600] or
                              " ".join(v.reasons), "msg")] for v in views]))
    return "".join(out)


def _rounds(rows: list[Row]) -> str:
    if not rows:
        return ""
    name = str(rows[0].get("campaign") or "campaign")
    out = [f"<h2 id=\"campaign\">Campaign {esc(name)}: progress over rounds</h2>",
           rounds("campaign-rounds", f"{name}: best mean latency after each round",
                  [int(r["round"]) for r in rows], [r.get("best_mean_ms") for r in rows],
                  [r.get("verdict") for r in rows]),
           _table(["round", "definition", "verdict", "best mean (ms)", "candidates",
                   "hypothesis"],
                  [[_cell(r["round"]), _cell(r.get("definition")),
                    _cell(r.get("verdict"), str(r.get("verdict") or "")),
                    _cell(r.get("best_mean_ms")), _cell(r.get("candidates")),
                    _cell(r.get("hypothesis"), "msg")] for r in rows])]
    return "".join(out)


def render(tables: dict[str, list[Row]], *, dataset: str) -> str:
    """The whole page for ``tables`` (as ``tables.all_tables`` builds them)."""
    views = candidates(tables)
    counts = rejection_counts(views)
    n_cand = sum(len(v) for v in views.values())
    promoted = sum(1 for vs in views.values() for v in vs if v.decision == "promote")
    toc = "".join(f'<li><a href="#def-{i}">{esc(name)}</a></li>'
                  for i, name in enumerate(views))
    reasons = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    body = [f"<h1>sandboxharness report: {esc(dataset)}</h1>",
            f'<p class="meta">generated {esc(datetime.now(UTC).isoformat(timespec="seconds"))}'
            f" by sandboxharness {esc(host.harness_version())}; export schema "
            f"{SCHEMA_VERSION}; tables beside this file: results, verdicts, rounds "
            "(.parquet)</p>",
            _table(["definitions", "candidates", "promoted", "rejected or failed",
                    "result rows"],
                   [[_cell(len(views)), _cell(n_cand), _cell(promoted),
                     _cell(n_cand - promoted), _cell(len(tables.get("results", [])))]]),
            f"<ul>{toc}</ul>", '<h2 id="reasons">Rejection reasons across the dataset</h2>',
            hbars("reasons", "candidates carrying each reason", [r for r, _ in reasons],
                  [Series("candidates", [float(c) for _, c in reasons], "#dc3545")]),
            _rounds(tables.get("rounds", [])),
            *(_definition(name, vs, i) for i, (name, vs) in enumerate(views.items()))]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{esc(_csp())}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>sandboxharness report: {esc(dataset)}</title><style>{STYLE}</style>"
            f"</head><body>{''.join(body)}<script>{SELF_CHECK}</script></body></html>\n")
