"""A huge file: write 8 GiB into the job's out dir (the one place that reaches host disk)."""
import os


def run(x):
    out = os.path.join(os.path.dirname(os.environ["TMPDIR"].rstrip("/")), "out")
    block = b"\0" * (16 * 1024 * 1024)
    with open(os.path.join(out, "huge.bin"), "wb") as fh:
        for _ in range(512):
            fh.write(block)
            fh.flush()
    return x + 1
