"""What the audit and keys commands share: one-line errors and warnings, safe output."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..errors import HarnessError

KeysOpt = Annotated[list[Path], typer.Option(
    "--public-key", help="Trusted public key (.pub vkey or .pub.pem); repeat after a rotation.")]

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


def _clean(value: object, limit: int = 200) -> str:
    """Untrusted text for a terminal: no control characters (ANSI escapes), bounded."""
    text = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in str(value))
    return text if len(text) <= limit else text[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _line(text: str, *, err: bool = False) -> None:
    (_err if err else _out).print(text, markup=False, highlight=False)


@contextmanager
def _cli() -> Iterator[None]:
    """Harness errors -> one line + their exit code; warnings -> one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except HarnessError as exc:
            _line(f"error: {_clean(exc, 2000)}", err=True)
            raise typer.Exit(exc.exit_code) from None
        finally:
            for w in caught:
                _line(f"warning: {_clean(w.message, 2000)}", err=True)
