"""CPU spin: an endless busy loop inside the kernel call."""


def run(x):
    n = 0
    while True:
        n += 1
    return x + 1
