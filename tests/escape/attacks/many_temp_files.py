"""Thousands of temp files: fill the scratch directory (up to 200k files) to exhaust inodes/disk."""
import os
import tempfile


def run(x):
    base = tempfile.gettempdir()
    for i in range(200_000):
        with open(os.path.join(base, f"f{i:06d}"), "wb") as fh:
            fh.write(b"x" * 4096)
    return x + 1
