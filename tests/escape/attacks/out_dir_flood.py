"""Flood the out dir (the one writable host directory): 200k files of 64 KiB (~12 GiB)."""
import os


def run(x):
    out = os.path.join(os.path.dirname(os.environ["TMPDIR"].rstrip("/")), "out")
    block = b"x" * 65536
    for i in range(200_000):
        with open(os.path.join(out, f"flood{i:06d}"), "wb") as fh:
            fh.write(block)
    return x + 1
