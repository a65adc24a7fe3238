"""Write (append) to a host path the worker must not write (given by the test)."""

TARGET = "__TARGET__"


def run(x):
    with open(TARGET, "ab") as fh:
        fh.write(b"pwned by candidate\n")
    return x + 1
