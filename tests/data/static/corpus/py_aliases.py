"""Aliased imports: the rules are written for the canonical names."""
import importlib as il
import os as o
import time as t
from os import system as run_it

import torch as T

o.system("id")  # expect: py-process-spawn
run_it("id")  # expect: py-process-spawn
t.perf_counter = lambda: 0.0  # expect: py-timer-or-check-patch
T.allclose = lambda *a, **k: True  # expect: py-timer-or-check-patch
T.cuda.Event.elapsed_time = lambda s, e: 0.001  # expect: py-timer-or-check-patch
il.import_module("socket")  # expect: py-dynamic-code
home = o.environ.get("HOME")  # expect: py-env-read
