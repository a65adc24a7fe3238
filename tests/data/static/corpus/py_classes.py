"""Issue 16 classes 1, 4 and 9 as semgrep sees them (the AST rules: test_static_classes.py)."""
import atexit
import os
import platform
import socket
import sys
import weakref

import torch


class Keeper:
    def __del__(self):  # expect: py-deferred-write
        pass


mods = os.sys.modules  # expect: py-module-via-module
torch.os.system("id")  # expect: py-module-via-module
sync = torch.cuda.__dict__["synchronize"]  # expect: py-module-via-module
cuda = vars(torch)["cuda"]  # expect: py-module-via-module
host = socket.gethostname()  # expect: py-env-probe, py-network
node = platform.node()  # expect: py-env-probe
pid = os.getpid()  # expect: py-env-probe
args = sys.argv  # expect: py-env-probe
status = open("/proc/self/status").read()  # expect: py-env-probe
code = run.__code__  # expect: py-frame-introspection
cells = run.__closure__  # expect: py-frame-introspection


def run(x, out):
    weakref.finalize(out, print)  # expect: py-deferred-write
    atexit.register(print)  # expect: py-deferred-write
    out.register_hook(print)  # expect: py-deferred-write
    shared = torch.from_file("/dev/shm/o", shared=True, size=4)  # expect: py-deferred-write
    out.set_(shared)  # expect: py-deferred-write
    view = out.untyped_storage()  # expect: py-deferred-write
    return view
