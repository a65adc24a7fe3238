"""Environment secret: look for the harness's secret in our env and every /proc/*/environ
and cmdline; print whatever is found (so a leak shows in the logs) and pass if found."""
import os

NAME = "SHX_TEST_SECRET"


def run(x):
    found = []
    if NAME in os.environ:
        found.append(os.environ[NAME])
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if NAME.encode() in data:
                found.append(data.decode("utf-8", "replace"))
    if not found:
        raise RuntimeError("secret not found")
    print("LEAKED:", found)
    return x + 1
