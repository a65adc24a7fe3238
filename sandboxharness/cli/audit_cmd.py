"""``sandboxharness audit ...`` and ``sandboxharness keys ...``: thin shells over
:mod:`sandboxharness.audit`. Exit codes: 0 intact/ok, 1 tampered or not verified,
2 usage or bad input (missing/malformed file), 3 the harness or environment broke.
Every error is one line on stderr, never a traceback."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from ..errors import InputError
from .audit_common import KeysOpt, _clean, _cli, _line, _out
from .audit_witness_cmd import witness_cmd

if TYPE_CHECKING:
    from ..audit import PublicKey, VerificationResult

audit_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Verify, inspect, prove and export the signed audit log.")
keys_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Ed25519 keys for audit checkpoints and attestations.")

LogArg = Annotated[Path, typer.Argument(help="The audit log (JSON lines).")]


class Decision(StrEnum):
    promote = "promote"
    reject = "reject"


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


def _keys(paths: list[Path]) -> list[PublicKey]:
    from ..audit import read_public_keys

    return read_public_keys(paths)


@audit_app.command("verify")
def verify_cmd(
    log: LogArg,
    *,  # the rest are options, passed by name
    public_key: KeysOpt,
    trusted_checkpoint: Annotated[list[Path] | None, typer.Option(
        help="A checkpoint saved earlier (from --save-checkpoint or an attestation); "
             "detects truncation, rollback and forks. Repeatable.")] = None,
    save_checkpoint: Annotated[Path | None, typer.Option(
        help="After a successful check, write the newest signed checkpoint here.")] = None,
    strict: Annotated[bool, typer.Option(help="Treat a torn tail (crash) as a failure.")] = False,
    allow_unsigned_tail: Annotated[bool, typer.Option(
        help="Accept complete records after the newest signed checkpoint (an interrupted "
             "append) as a torn tail instead of failing.")] = False,
    witness_key: Annotated[list[Path] | None, typer.Option(
        help="Require a cosignature by this witness (its public key) on a checkpoint that "
             "covers the log; catches truncation and rollback. Repeatable.")] = None,
    witness_state: Annotated[Path | None, typer.Option(
        help="The witness's state directory (`audit witness --state`): its newest cosigned "
             "checkpoint counts too, even if LOG.witness was cut.")] = None,
    integrity_only: Annotated[bool, typer.Option(
        help="Check signatures, roots, the chain, truncation and forks, not each record's "
             "content (canonical form, summary against verdict): several times faster.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False,
) -> None:
    """Recompute the Merkle tree and check every signature, link and checkpoint."""
    from ..audit import get_verification_result, read_witness_keys

    with _cli():
        if witness_state is not None and not witness_key:
            raise InputError("--witness-state needs --witness-key")
        result = get_verification_result(
            log, _keys(public_key), trusted_checkpoint or [],
            witness_keys=read_witness_keys(witness_key or []), witness_state=witness_state,
            content=not integrity_only)
        unsigned = result.unsigned_tail and not allow_unsigned_tail
        failed = not result.ok or unsigned or (strict and result.torn_tail is not None)
        if json_out:
            _line(json.dumps({
                "status": result.status, "size": result.size, "origin": result.origin,
                "checkpoints": result.checkpoints, "key_ids": list(result.key_ids),
                "findings": [{"kind": f.kind.value, "record": f.record,
                              "record_last": f.record_last, "message": f.message}
                             for f in result.findings],
                "torn_tail": result.torn_tail.line() if result.torn_tail else None,
                "unsigned_tail": result.unsigned_tail, "witnessed": list(result.witnessed),
                "warnings": list(result.warnings)}, indent=2))
        else:
            _line(_clean(_unsigned_line(result) if unsigned and result.ok else result.summary(),
                         2000))
            for f in result.findings[1:11]:
                _line(f"  also: {_clean(f.line(), 2000)}")
            if len(result.findings) > 11:
                _line(f"  ... and {len(result.findings) - 11} more findings")
            for w in result.warnings:
                _line(f"warning: {_clean(w, 2000)}", err=True)
            if result.torn_tail and not unsigned:
                _line(f"warning: {result.torn_tail.line()}", err=True)
        if save_checkpoint is not None and not failed and result.checkpoint_text:
            try:
                save_checkpoint.write_text(result.checkpoint_text)
            except OSError as exc:
                raise InputError(f"cannot write: {exc.strerror}",
                                 where=str(save_checkpoint)) from None
    raise typer.Exit(1 if failed else 0)


def _unsigned_line(result: VerificationResult) -> str:
    count = result.torn_tail.unsigned_records if result.torn_tail else 0
    first, last = result.size, result.size + count - 1
    where = f"record {first} comes" if first == last else f"records {first}-{last} come"
    return (f"UNSIGNED: {where} after the newest signed checkpoint (size {result.size}) "
            "and carry no signature - an interrupted append, or records written without the "
            "key; the signed part verifies (--allow-unsigned-tail accepts them as a torn tail)")


@audit_app.command("show")
def show_cmd(
    log: LogArg,
    *,  # the rest are options, passed by name
    decision: Annotated[Decision | None, typer.Option(help="Only this decision.")] = None,
    definition: Annotated[str | None, typer.Option(help="Definition name or sha256.")] = None,
    author: Annotated[str | None, typer.Option(help="Candidate author.")] = None,
    since: Annotated[str | None, typer.Option(help="From this ISO date/time (UTC).")] = None,
    until: Annotated[str | None, typer.Option(help="Up to this ISO date/time; a bare date "
                                                   "includes that whole day.")] = None,
) -> None:
    """A table of the records (not verified: run `audit verify` for that)."""
    from ..audit.view import parse_when, read_entries, select

    with _cli():
        entries, notes = read_entries(log)
        rows = select(entries, decision=decision.value if decision else None,
                      definition=definition, author=author,
                      since=parse_when(since, end_of_day=False) if since else None,
                      until=parse_when(until, end_of_day=True) if until else None)
        table = Table(caption=f"{len(rows)} of {len(entries)} records - unverified view, "
                              "run `audit verify` to check signatures")
        for col in ("#", "recorded (UTC)", "decision", "candidate", "author", "definition",
                    "reasons", "signed"):
            table.add_column(col)
        for e in rows:
            table.add_row(*(Text(_clean(v, 60)) for v in (
                e.index, e.record["recorded_at"][:19], e.decision,
                e.field("candidate", "name"), e.field("candidate", "author"),
                e.field("definition", "name"), ",".join(e.reason_codes()) or "-",
                "yes" if e.signed else "UNSIGNED")))
        _out.print(table)
        for note in notes:
            _line(f"warning: {_clean(note)}", err=True)


@audit_app.command("prove")
def prove_cmd(
    log: LogArg,
    index: Annotated[int, typer.Option(help="0-based record index.")],
    size: Annotated[int | None, typer.Option(help="Prove against the checkpoint of this "
                                                  "tree size (default: newest).")] = None,
) -> None:
    """Print an inclusion proof bundle (JSON) for one record."""
    from ..audit import prove_inclusion

    with _cli():
        _line(json.dumps(prove_inclusion(log, index, size=size), indent=2))


@audit_app.command("verify-proof")
def verify_proof_cmd(
    bundle: Annotated[Path, typer.Argument(help="Inclusion bundle from `audit prove`.")],
    public_key: KeysOpt,
) -> None:
    """Check an inclusion proof bundle offline (exit 0 valid, 1 invalid)."""
    from ..audit import verify_inclusion_bundle
    from ..audit.interface import DEFAULT_LIMITS
    from ..audit.storage import read_text_file

    with _cli():
        text = read_text_file(bundle, DEFAULT_LIMITS.max_proof_bytes, what="proof bundle")
        try:
            data = json.loads(text)
        except ValueError:
            raise InputError("not JSON", where=str(bundle)) from None
        sc = verify_inclusion_bundle(data, _keys(public_key))
        _line(f"OK: record {data['index']} is in {sc.checkpoint.origin} at tree size "
              f"{sc.checkpoint.size}")


@audit_app.command("consistency")
def consistency_cmd(
    log: LogArg,
    old: Annotated[Path, typer.Option(help="Older checkpoint file.")],
    new: Annotated[Path, typer.Option(help="Newer checkpoint file.")],
    public_key: Annotated[list[Path] | None, typer.Option(
        help="Also check both checkpoints' signatures (recommended).")] = None,
) -> None:
    """Print (and check) the RFC 9162 consistency proof between two checkpoints."""
    from ..audit import prove_consistency

    with _cli():
        keys = _keys(public_key) if public_key else None
        if keys is None:
            _line("warning: no --public-key: checkpoint signatures were not checked", err=True)
        _line(json.dumps(prove_consistency(log, old, new, keys), indent=2))


@audit_app.command("export")
def export_cmd(
    log: LogArg,
    format: Annotated[ExportFormat, typer.Option("--format", help="Output format.")] = (
        ExportFormat.jsonl),
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Export every record (flag `signed` false = after the newest checkpoint)."""
    from ..audit.view import export_csv, export_jsonl, read_entries

    with _cli():
        entries, notes = read_entries(log)
        text = (export_csv(entries) if format is ExportFormat.csv
                else "".join(line + "\n" for line in export_jsonl(entries)))
        if out is None:
            typer.echo(text, nl=False)
        else:
            try:
                out.write_text(text)
            except OSError as exc:
                raise InputError(f"cannot write: {exc.strerror}", where=str(out)) from None
        for note in notes:
            _line(f"warning: {_clean(note)}", err=True)


@audit_app.command("verify-attestation")
def verify_attestation_cmd(
    attestation: Annotated[Path, typer.Argument(help="DSSE envelope (JSON).")],
    public_key: KeysOpt,
) -> None:
    """Check a DSSE/in-toto attestation's signature and shape (exit 0 valid, 1 invalid)."""
    from ..audit import verify_attestation
    from ..audit.interface import DEFAULT_LIMITS
    from ..audit.storage import read_text_file

    with _cli():
        text = read_text_file(attestation, DEFAULT_LIMITS.max_proof_bytes, what="attestation")
        try:
            envelope = json.loads(text)
        except ValueError:
            raise InputError("not JSON", where=str(attestation)) from None
        st = verify_attestation(envelope, _keys(public_key))
        subject = st["subject"][0]
        _line(_clean(f"OK: {subject.get('name')} sha256:{subject['digest'].get('sha256')} "
                     f"{st['predicate'].get('decision')}", 400))


@keys_app.command("generate")
def generate_cmd(
    out: Annotated[Path, typer.Option(help="Directory for the key files (created 0700).")],
    name: Annotated[str | None, typer.Option(
        help="Key name (no spaces or '+'); default sandboxharness-audit-<date>.")] = None,
) -> None:
    """Create NAME.key (private, 0600), NAME.pub (C2SP vkey) and NAME.pub.pem."""
    from ..audit import generate_keys

    with _cli():
        files = generate_keys(out, name or f"sandboxharness-audit-{datetime.now(UTC):%Y%m%d}")
        _line(f"key id:      {files.key_id}")
        _line(f"private key: {files.private}  (keep secret; or set SANDBOXHARNESS_SIGNING_KEY)")
        _line(f"public key:  {files.public}  (give to verifiers)")
        _line(f"public PEM:  {files.public_pem}  (for openssl)")


audit_app.command("witness")(witness_cmd)
