"""Sleep far past the timeout."""
import time


def run(x):
    time.sleep(3600)
    return x + 1
