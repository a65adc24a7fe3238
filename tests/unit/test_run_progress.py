"""What a dataset run shows: a live panel on a terminal, one plain line per candidate when piped,
JSON lines in the event log."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from sandboxharness.cli.run_progress import Progress, RunLog
from sandboxharness.dataset import Outcome, RunEvent, Task
from sandboxharness.errors import InfrastructureError
from sandboxharness.models import Stage, StageResult


def _events() -> list[RunEvent]:
    a, b = Task("rms", "good", 1, 0), Task("rms", "bad\x1b[31m", 1, 1)
    stage = StageResult(stage=Stage.COMPILE, status="passed", duration_s=1.5)
    return [RunEvent("start", a), RunEvent("start", b), RunEvent("stage", a, stage=stage),
            RunEvent("done", b, outcome=Outcome(b, error=InfrastructureError("disk full"),
                                                wall_s=2.0))]


def test_piped_output_is_one_plain_line_per_finished_candidate(
        capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(Console(file=io.StringIO()), total=2, live=False)
    with progress:
        for e in _events():
            progress(e)
    err = capsys.readouterr().err.splitlines()
    assert err == ["[1/2] ERROR    rms/bad\\x1b[31m     2.0 s  disk full"]  # escaped, one line
    assert progress.failed == 1 and progress.running == {"rms/good": "compile passed"}


def test_the_live_panel_shows_counts_running_candidates_and_eta() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    progress = Progress(console, total=2, live=True)
    with progress:
        for e in _events():
            progress(e)
        panel = progress._panel()
    rendered = io.StringIO()
    Console(file=rendered, width=120).print(panel)
    text = rendered.getvalue()
    assert "1/2 done, 1 not promoted, 1 running" in text and "ETA" in text
    assert "rms/good" in text and "compile passed" in text


def test_event_log_is_json_lines_at_the_chosen_level(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = RunLog(path, "info")
    for e in _events():
        log(e)
    log.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["candidate.start", "candidate.start", "stage.end",
                                          "candidate.error"]
    assert lines[2]["stage"] == "compile" and lines[3]["error_type"] == "InfrastructureError"
    assert all("timestamp" in x and x["level"] for x in lines)
    quiet = RunLog(tmp_path / "quiet.jsonl", "error")
    for e in _events():
        quiet(e)
    quiet.close()
    assert [json.loads(x)["event"] for x in (tmp_path / "quiet.jsonl").read_text().splitlines()] \
        == ["candidate.error"]
