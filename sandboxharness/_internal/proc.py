"""The one choke point for running external tools: argv lists, a timeout, a known environment.

Never a shell string. On timeout the whole process group is killed (tools such as semgrep
start helper processes that would otherwise keep the output pipes open).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import ToolError

__all__ = ["find_executable", "private_env", "run", "stage_sources", "tool_version"]

_VERSIONS: dict[tuple[str, int], str] = {}


def find_executable(name: str, search_dirs: Sequence[Path] | None = None) -> str:
    """Absolute path of the tool ``name``.

    With ``search_dirs`` only those directories are searched. Otherwise the directory of
    ``sys.executable`` (the virtual environment's ``bin``) comes first, then ``PATH``.
    Raises :class:`ToolError` when nothing executable is found.
    """
    dirs = list(search_dirs) if search_dirs is not None else [Path(sys.executable).parent]
    for d in dirs:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    if search_dirs is None:
        found = shutil.which(name)
        if found:
            return found
    where = ", ".join(str(d) for d in dirs) + ("" if search_dirs is not None else " and PATH")
    raise ToolError(f"{name}: executable not found (searched {where})")


def private_env(tmp: Path, exe: str) -> dict[str, str]:
    """A minimal environment for a tool: nothing inherited, home and caches under ``tmp``.

    Host variables that steer tools (``SEMGREP_*``, ``PYTHONPATH``, proxies, tokens) never
    reach them; ``exe``'s directory leads ``PATH`` so a venv tool finds its siblings.
    """
    home = tmp / "home"
    for sub in ("", ".config", ".cache", ".local/share", ".local/state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{Path(exe).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (no shell) and capture its output as text.

    ``env`` replaces the environment entirely when given. Raises :class:`ToolError` when the
    program is missing or not runnable, or runs past ``timeout`` seconds (its process group
    is then killed). A non-zero exit status is *not* an error here: callers judge it.
    """
    if not argv:
        raise ToolError("empty command line")
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd, text=True, encoding="utf-8",
            errors="replace", start_new_session=True, close_fds=True,
        )
    except OSError as exc:  # FileNotFoundError, PermissionError, ENOEXEC, ...
        raise ToolError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToolError(f"{Path(argv[0]).name}: timed out after {timeout:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # pipes held by something that escaped the group
        proc.kill()
        proc.wait()


def stage_sources(root: Path, paths: Sequence[str], dest: Path,
                  suffix_for: Callable[[str], str]) -> dict[str, str]:
    """Copy ``paths`` (relative to ``root``) into ``dest`` as ``f0000<suffix>``, ``f0001...``.

    Tools have their own ideas about which paths to skip (bandit ignores ``__pycache__``,
    semgrep ``tests/`` when it walks a tree); neutral names take that off the table and a
    leading ``-`` can never read as an option. ``suffix_for(path)`` picks the suffix that
    tells the tool the language. Returns staged name -> original path. Anything but a
    regular file is refused.
    """
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    staged: dict[str, str] = {}
    for i, rel in enumerate(paths):
        src = root / rel
        if src.is_symlink() or not src.is_file():
            raise ToolError(f"{rel}: not a regular file under {root}")
        name = f"f{i:04d}{suffix_for(rel)}"
        shutil.copyfile(src, dest / name, follow_symlinks=False)
        staged[name] = rel
    return staged


def tool_version(exe: str, timeout_s: float = 30.0,
                 extra_env: Mapping[str, str] | None = None) -> str:
    """``<exe> --version``'s first line, cached per executable and modification time."""
    key = (exe, os.stat(exe).st_mtime_ns)
    if key not in _VERSIONS:
        with tempfile.TemporaryDirectory(prefix="shx-version-") as tmp:
            env = private_env(Path(tmp), exe) | dict(extra_env or {})
            cp = run([exe, "--version"], timeout_s, env=env)
        lines = (cp.stdout or cp.stderr).strip().splitlines()
        if cp.returncode != 0 or not lines:
            raise ToolError(f"{exe} --version failed (exit {cp.returncode})")
        _VERSIONS[key] = lines[0].strip()
    return _VERSIONS[key]
