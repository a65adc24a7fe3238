"""What the commands write: files whole or not at all, compact JSON, one-line errors.

Its own module so that every command (and ``audit_hook``) can use it without importing
``main``, which imports the commands.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import typer

from ..errors import HarnessError, one_line


def write_atomic(path: Path, text: str) -> None:
    """Whole file or nothing: never a half-written output."""
    path = path.resolve()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=None, separators=(",", ":"), allow_nan=True)


def eprint(line: str) -> None:
    """Plain stderr, one line: rich would wrap a long path onto a second line."""
    print(one_line(line), file=sys.stderr, flush=True)


def fail(exc: BaseException) -> NoReturn:
    """One line, no traceback; the exit code says which family failed."""
    if isinstance(exc, HarnessError):
        eprint(f"error: {exc}")
        raise typer.Exit(exc.exit_code)
    eprint(f"internal error: {type(exc).__name__}: {exc}")
    if os.environ.get("SANDBOXHARNESS_DEBUG"):
        raise exc
    raise typer.Exit(3)
