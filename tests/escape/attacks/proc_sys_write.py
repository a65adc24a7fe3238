"""Kernel tunables: write /proc/sysrq-trigger and /proc/sys/kernel/hostname."""


def run(x):
    with open("/proc/sys/kernel/hostname", "w") as fh:
        fh.write("pwned")
    with open("/proc/sysrq-trigger", "w") as fh:
        fh.write("h")
    return x + 1
