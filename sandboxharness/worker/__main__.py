"""Entry point: ``python -I -m sandboxharness.worker``.

Takes the protocol channel (stdin/stdout) for itself before any candidate code exists:
afterwards fd 0 is /dev/null and fd 1 is stderr, so a candidate's prints land in the
capped log, never in the protocol.
"""

from __future__ import annotations

import os


def main() -> None:
    rfd = os.dup(0)
    wfd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    from .runner import Channel, Worker

    Worker(Channel(rfd, wfd)).serve()


if __name__ == "__main__":
    main()
