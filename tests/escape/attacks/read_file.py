"""Read a host file the worker must not read (path given by the test) and print it."""

TARGET = "__TARGET__"


def run(x):
    with open(TARGET, "rb") as fh:
        data = fh.read()
    print("READ:", data[:4096])
    return x + 1
