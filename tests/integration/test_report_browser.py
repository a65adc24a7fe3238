"""The report as a person sees it: report.html opened in headless Chromium (Debian's package).

Checked: a screenshot that is not blank (pixels decoded here), no console message at all (the
page writes none; a blocked script, style or fetch would each log one, Content-Security-
Policy violations included), and every plot laid out with something drawn in it (the page's
self-check marks each one; read back from the DOM after load). Skips where chromium is
missing, unless SANDBOXHARNESS_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.integration.report_data import HOSTILE_NAME, report_dataset, shx

REQUIRED = os.environ.get("SANDBOXHARNESS_REQUIRE_BROWSER") == "1"


def _browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if REQUIRED:
            pytest.fail("chromium is missing and SANDBOXHARNESS_REQUIRE_BROWSER=1 "
                        "(run scripts/ci_browser_setup.sh)")
        pytest.skip("chromium is not installed (scripts/ci_browser_setup.sh installs it)")
    return found


def _chromium(exe: str, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", "--enable-logging=stderr", "--v=0",
            *extra, page.resolve().as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(page.parent)})


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and raw RGB(A) rows of an 8-bit non-interlaced PNG (what Chromium
    writes): chunks joined, inflated and unfiltered."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6) and header[12] == 0
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) *
                                                           (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            pred = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(ftype)
            if pred is None:  # Paeth
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.fixture(scope="session")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dataset = report_dataset(tmp_path_factory.mktemp("report"))
    out = dataset.parent / "browser-report"
    res = shx("report", "--local", str(dataset), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out / "report.html"


def test_screenshot_is_not_blank(report_page: Path) -> None:
    exe = _browser()
    shot = report_page.parent / "shot.png"
    res = _chromium(exe, report_page, "--window-size=1000,1300", f"--screenshot={shot}")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    width, height, rows = _pixels(shot.read_bytes())
    bpp = len(rows[0]) // width
    colours, inked = set(), 0
    for row in rows[::4]:
        for x in range(0, width * bpp, bpp * 4):
            px = row[x:x + 3]
            colours.add(px)
            inked += px != b"\xff\xff\xff"
    sampled = (height // 4) * (width // 4)
    assert inked > sampled * 0.03, f"only {inked}/{sampled} sampled pixels are not white"
    assert len(colours) > 20  # text, bars in several colours, table borders


def test_no_console_messages_and_every_plot_rendered(report_page: Path) -> None:
    exe = _browser()
    res = _chromium(exe, report_page, "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    dom = res.stdout
    source = report_page.read_text()
    plots = len(re.findall(r'<svg class="plot"', source))
    assert plots >= 7
    assert f'data-plots-rendered="{plots}/{plots}"' in dom
    assert dom.count('data-rendered="yes"') == plots
    # the candidate's markup stayed text: no element came from it
    # the candidate's name and author (markup) stayed text: no element came from them
    assert HOSTILE_NAME not in dom and "<img" not in dom
    assert dom.count("<svg") == plots and dom.count("<script") == 1


def test_a_script_that_slipped_through_would_be_blocked_and_seen(report_page: Path) -> None:
    """The control: the same page with one injected inline script and one remote image. The
    policy blocks both and each block is a console message, so the test above can fail."""
    exe = _browser()
    bad = report_page.parent / "tampered.html"
    bad.write_text(report_page.read_text().replace(
        "<h1>", '<script>document.title="ran"</script><img src="http://192.0.2.1/x.png"><h1>',
        1))
    res = _chromium(exe, bad, "--dump-dom")
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    assert len(console) >= 2 and any("Content Security Policy" in c for c in console)
    assert "<title>ran</title>" not in res.stdout
