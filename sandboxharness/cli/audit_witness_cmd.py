"""``sandboxharness audit witness``: cosign a log's newest checkpoint as a witness
(C2SP tlog-witness semantics: refuses a rollback or a split view, exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .audit_common import KeysOpt, _clean, _cli, _line


def witness_cmd(
    log: Annotated[Path, typer.Option("--log", help="The audit log to witness.")],
    public_key: KeysOpt,
    witness_key: Annotated[Path, typer.Option(
        help="The witness's own signing key (NAME.key from `keys generate`), not the log's.")],
    state: Annotated[Path, typer.Option(
        help="The witness's state directory (created 0700): the checkpoint it last "
             "cosigned for each log. Keep it off the log's machine, never reset it.")],
) -> None:
    """Cosign the log's newest checkpoint if consistent with this witness's last one.

    The cosigned checkpoint is appended to LOG.witness; a rollback or split view is
    refused (exit 1)."""
    from ..audit import load_signer, read_public_keys, witness_log
    from ..audit.witness import cosigner_of

    with _cli():
        signer = load_signer(witness_key, allow_dev_key=False, dev_key_dir=state)
        sc, _ = witness_log(log, read_public_keys(public_key), signer, state)
        _line(_clean(f"OK: cosigned size {sc.checkpoint.size} of {sc.checkpoint.origin} as "
                     f"{cosigner_of(signer).key_id()} (witness vkey "
                     f"{cosigner_of(signer).vkey()})", 600))
