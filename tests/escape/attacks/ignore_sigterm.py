"""Ignore SIGTERM/SIGINT/SIGHUP (and block them), then hang: only SIGKILL can end it."""
import signal
import time


def run(x):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    time.sleep(3600)
    return x + 1
