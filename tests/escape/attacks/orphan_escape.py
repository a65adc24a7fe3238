"""Leave a process behind: double fork + setsid (out of the process group), ignoring SIGTERM,
appending to a heartbeat file in the out dir twice a second; then hang until killed."""
import os
import signal
import time


def run(x):
    out = os.path.join(os.path.dirname(os.environ["TMPDIR"].rstrip("/")), "out")
    heartbeat = os.path.join(out, "heartbeat")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            for _ in range(600):
                try:
                    with open(heartbeat, "a") as fh:
                        fh.write("alive\n")
                except OSError:
                    pass
                time.sleep(0.5)
        os._exit(0)
    os.wait()
    time.sleep(3600)  # keep the worker busy: the harness must kill the whole tree
    return x + 1
