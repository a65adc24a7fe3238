"""``sandboxharness archive ...``: a thin shell over :mod:`sandboxharness.archive`.
Exit codes: 0 intact/ok, 1 missing or changed artifacts (or a log that does not verify),
2 bad input, 3 the harness or environment broke. Errors are one line on stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .audit_common import _cli, _line

if TYPE_CHECKING:
    from ..archive import Archive
    from ..audit import PublicKey

archive_app = typer.Typer(no_args_is_help=True, add_completion=False,
                          help="The content-addressed archive of every evaluation's artifacts.")

ArchiveOpt = Annotated[Path, typer.Option(
    "--archive", envvar="SANDBOXHARNESS_ARCHIVE",
    help="The archive folder (evaluate/run --archive; a dataset's DATASET/archive).")]
LogsOpt = Annotated[list[Path] | None, typer.Option(
    "--audit-log", help="A signed audit log whose records the archive serves. Repeatable.")]
KeysOpt = Annotated[list[Path] | None, typer.Option(
    "--public-key", help="Trusted public key of the audit log. Repeatable.")]


def _open(path: Path) -> Archive:
    from ..archive import Archive

    return Archive(path)


def _keys(paths: list[Path] | None, logs: list[Path] | None) -> list[PublicKey]:
    from ..audit import read_public_keys
    from ..errors import InputError

    if logs and not paths:
        raise InputError("--audit-log needs --public-key (the log's trusted key)")
    return read_public_keys(paths) if paths else []


@archive_app.command("verify")
def verify_cmd(archive: ArchiveOpt, audit_log: LogsOpt = None, public_key: KeysOpt = None,
               all_objects: Annotated[bool, typer.Option(
                   "--all", help="With --audit-log, also re-hash objects no record names.")]
               = False) -> None:
    """Re-hash the archive. With --audit-log: verify the log, then prove every artifact
    its signed records name is present and intact. One line per finding; exit 1 on any."""
    from ..archive.verify import verify_against_log, verify_store

    with _cli():
        store = _open(archive)
        keys = _keys(public_key, audit_log)
        reports = [verify_against_log(store, log, keys) for log in audit_log or []]
        if not audit_log or all_objects:
            reports.append(verify_store(store))
        failed = False
        for log, report in zip([*(audit_log or []), None], reports, strict=False):
            for finding in report.findings:
                _line(f"FAILED {finding.line()}")
            _line(f"{log or store.root}: {report.summary()}")
            failed = failed or not report.ok
    raise typer.Exit(1 if failed else 0)


@archive_app.command("show")
def show_cmd(digest: Annotated[str, typer.Argument(help="sha256:<hex> of an artifact")],
             archive: ArchiveOpt) -> None:
    """Print an artifact after re-hashing it (exit 1 if it changed). On a terminal, control
    characters are escaped: a candidate's log cannot drive the reviewer's terminal."""
    from ..archive.store import parse_hash

    with _cli():
        data = _open(archive).get(parse_hash(digest))
    if sys.stdout.isatty():
        text = data.decode("utf-8", errors="replace")
        sys.stdout.write("".join(c if c.isprintable() or c in "\n\t" else
                                 c.encode("unicode_escape").decode() for c in text))
    else:
        sys.stdout.buffer.write(data)
    sys.stdout.flush()


@archive_app.command("export")
def export_cmd(verdict: Annotated[str, typer.Argument(
                   help="The verdict: its sha256 (audit record's verdict_sha256), a unique "
                        "prefix, or a verdict JSON file")],
               out: Annotated[Path, typer.Option(help="A new or empty folder for the bundle")],
               archive: ArchiveOpt) -> None:
    """Write one verdict's bundle: verdict.json, artifacts/, manifest.json."""
    from ..archive import resolve_verdict
    from ..archive.export import export_bundle

    with _cli():
        store = _open(archive)
        bundle = export_bundle(store, resolve_verdict(store, verdict), out)
        _line(f"exported {bundle.verdict}: {bundle.files} file(s), {bundle.bytes} artifact "
              f"byte(s) in {bundle.out}")


@archive_app.command("gc")
def gc_cmd(archive: ArchiveOpt, audit_log: LogsOpt = None, public_key: KeysOpt = None,
           keep_days: Annotated[float, typer.Option(
               min=0, help="Keep anything archived or used within this many days")] = 30.0,
           dry_run: Annotated[bool, typer.Option(help="Say what would go; delete nothing")]
           = False) -> None:
    """Delete what no signed record names and no recent evaluation used. Never deletes an
    object a signed record of the given logs names; a log that does not verify stops it."""
    from ..archive.retention import collect_garbage

    with _cli():
        store = _open(archive)
        result = collect_garbage(store, audit_log or [], _keys(public_key, audit_log),
                                 keep_s=keep_days * 86400, dry_run=dry_run)
        _line(result.summary())
