"""Another candidate's files: read the previous job's sources and outputs (host paths given
by the test), and search the usual places for other job directories."""
import glob
import os

PATHS = "__PATHS__".split("|")
MARKER = "__MARKER__"


def run(x):
    found = []
    for path in PATHS:
        if os.path.isdir(path):
            found += os.listdir(path)
        else:
            with open(path, "rb") as fh:
                found.append(fh.read().decode("utf-8", "replace"))
    for pattern in ("/tmp/shx-job-*/*/*/*", "/var/tmp/shx-job-*/*/*/*"):
        for path in glob.glob(pattern):
            try:
                with open(path, "rb") as fh:
                    found.append(fh.read().decode("utf-8", "replace"))
            except OSError:
                pass
    if not any(MARKER in f for f in found):
        raise RuntimeError(f"nothing of the other job found ({len(found)} entries)")
    print("FOUND OTHER JOB:", found)
    return x + 1
