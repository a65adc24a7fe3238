"""Flood stdout and stderr without end (the harness must cap what it keeps and stay alive)."""
import os
import sys


def run(x):
    line = ("A" * 1023 + "\n")
    while True:
        sys.stdout.write(line * 1024)
        sys.stderr.write(line * 1024)
        os.write(2, b"B" * 65536)
    return x + 1
