"""Kill a host process by pid (the harness itself, or a sibling the test started)."""
import os
import signal

TARGET = int("__PID__")


def run(x):
    os.kill(TARGET, signal.SIGKILL)
    return x + 1
