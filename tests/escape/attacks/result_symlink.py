"""Symlink trick on results: replace every file in the out dir by a symlink to a host file
(given by the test), on every call after the first, hoping the host follows it."""
import os

DECOY = "__DECOY__"


def run(x):
    out = os.path.join(os.path.dirname(os.environ["TMPDIR"].rstrip("/")), "out")
    for name in os.listdir(out):
        path = os.path.join(out, name)
        if not os.path.islink(path):
            os.unlink(path)
            os.symlink(DECOY, path)
    return x + 1
