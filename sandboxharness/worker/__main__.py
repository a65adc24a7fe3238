"""Entry point: ``python -I -m sandboxharness.worker``.

Takes the protocol channel (stdin/stdout) for itself before any candidate code exists:
afterwards fd 0 is /dev/null and fd 1 is stderr, so a candidate's prints land in the
capped log, never in the protocol.
"""

from __future__ import annotations

import os

from .protocol import SANITIZER_ENV


def main() -> None:
    if os.environ.get(SANITIZER_ENV):  # GPU: become compute-sanitizer's child first
        from .gpu import exec_under_sanitizer

        exec_under_sanitizer()
    from .gpu import channel_fds

    fds = channel_fds()
    rfd, wfd = fds if fds is not None else (os.dup(0), os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    from .runner import Channel, Worker

    Worker(Channel(rfd, wfd)).serve()


if __name__ == "__main__":
    main()
