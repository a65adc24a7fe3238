"""Suppression comments in a candidate must hide nothing."""
import os
import subprocess

os.system("id")  # nosec  # expect: py-process-spawn | bandit: B605
subprocess.call("id", shell=True)  # nosec B602  # expect: py-process-spawn | bandit: B602
eval("1 + 1")  # nosemgrep  # expect: py-dynamic-code | bandit: B307
exec("x = 1")  # nosemgrep: py-dynamic-code  # expect: py-dynamic-code | bandit: B102
