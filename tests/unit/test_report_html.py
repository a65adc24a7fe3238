"""report.html: self-contained, every document string escaped, one plot per view."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

from sandboxharness.report import svg
from sandboxharness.report.build import build_report
from sandboxharness.report.html import SELF_CHECK, STYLE, render
from tests.unit.test_report_tables import _dataset, _store, campaign_dir, gpu_verdict

NASTY = '<script>alert(1)</script>&"\'\x1b[31m'


def _report(tmp_path: Path, *, campaign: Path | None = None) -> str:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("good"), gpu_verdict(NASTY, author=NASTY, decision="reject"),
           gpu_verdict("bobs", author="bob", median=0.005))
    written = build_report(root, tmp_path / "out", campaign=campaign)
    assert {p.name for p in written.values()} >= {"report.html", "results.parquet"}
    return written["report"].read_text()


def test_candidate_text_is_escaped_everywhere(tmp_path: Path) -> None:
    page = _report(tmp_path)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the self-check, nothing else
    body = page.split("<body>", 1)[1].split("<script>", 1)[0]
    assert not re.search(r"<(?!/?(svg|title|rect|text|line|polyline|circle|h[123]|p|ul|li|a|"
                         r"table|thead|tbody|tr|th|td|script)\b)", body)


def test_page_is_self_contained_and_its_policy_pins_its_own_code(tmp_path: Path) -> None:
    page = _report(tmp_path)
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # a namespace name, never fetched
    assert "@import" not in page and "url(" not in page
    for code in (STYLE, SELF_CHECK):
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in html.unescape(page)
    assert "default-src &#x27;none&#x27;" in page


def test_every_view_has_its_plot(tmp_path: Path) -> None:
    page = _report(tmp_path, campaign=campaign_dir(tmp_path))
    ids = re.findall(r'data-plot="([^"]+)"', page)
    assert ids == ["reasons", "campaign-rounds", "speedup-0", "latency-0", "stages-0"]
    assert len(set(ids)) == len(ids)
    latency = page.split('data-plot="latency-0"', 1)[1].split("</svg>", 1)[0]
    assert "FlashInfer" in latency and "reference" in latency  # the baselines beside it
    board = page.split("Leaderboard", 1)[1].split("</table>", 1)[0]
    # best per author, best first: bob's faster one, alice's, the rejected one last
    assert board.count("<tr>") == 4
    assert board.index("bobs") < board.index(">good<") < board.index("&lt;script")


def test_plots_with_no_data_say_so() -> None:
    assert "no measurements" in svg.hbars("x", "t", [], [])
    assert "no round recorded" in svg.rounds("r", "t", [1], [None], ["reject"])
    drawn = svg.hbars("y", "t", ["a&b"], [svg.Series("<s>", [2.0])], unit="x", mark=1.0)
    assert "a&amp;b" in drawn and "&lt;s&gt;" in drawn and "stroke-dasharray" in drawn


def test_render_of_an_empty_dataset_is_a_page() -> None:
    page = render({"results": [], "verdicts": [], "rounds": []}, dataset="empty")
    assert page.startswith("<!DOCTYPE html>") and 'data-plot="reasons"' in page
