"""Policy checks over the sources (imports, baseline library, shadowing, loadable files).

No external tool runs here: these are pure functions of the sources and the policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandboxharness.models import Definition, Policy
from sandboxharness.static import check_policy

REFERENCE = "import torch\ndef run(x, w):\n    return x * w\n"


def definition(fi_api: str | None = "flashinfer.norm.rmsnorm") -> Definition:
    return Definition.model_validate({
        "name": "rms", "op_type": "rmsnorm", "axes": {"b": {"type": "var"}},
        "inputs": {"x": {"shape": ["b"], "dtype": "float32"},
                   "w": {"shape": ["b"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["b"], "dtype": "float32"}},
        "reference": REFERENCE, "tags": [f"fi_api:{fi_api}"] if fi_api else [],
    })


def policy(**kw: Any) -> Policy:
    return Policy.model_validate({"name": "t", **kw})


def check(files: dict[str, str], pol: Policy | None = None,
          d: Definition | None = None, tmp: Path | None = None) -> set[tuple[str, str, int]]:
    assert tmp is not None
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    found = check_policy(tmp, list(files), pol or policy(), d)
    assert all(f.tool == "policy" and f.severity == "high" for f in found)
    return {(f.rule_id, f.path, f.line) for f in found}


DENY = policy(imports={"deny": ["socket", "torch.utils.cpp_extension", "builtins", "os"]})


@pytest.mark.parametrize("src, line", [
    ("import socket\n", 1),
    ("import socket as s\n", 1),
    ("from socket import create_connection\n", 1),
    ("x = 1\nimport torch.utils.cpp_extension\n", 2),
    ("from torch.utils import cpp_extension\n", 1),
    ("import torch\n\nm = torch.utils.cpp_extension.load_inline('m', '')\n", 3),
    ("import importlib\nimportlib.import_module('socket')\n", 2),
    ("__import__('socket')\n", 1),
    ("import os.path\n", 1),
])
def test_denied_imports(src: str, line: int, tmp_path: Path) -> None:
    """Attack: reach a denied module directly, through a parent package or dynamically."""
    assert ("policy.import-denied", "k.py", line) in check({"k.py": src}, DENY, tmp=tmp_path)


@pytest.mark.parametrize("src", [
    "import torch.utils.data\n",
    "import socketserverless_name_that_does_not_exist\n",
    "n = len([1, 2])\nprint(n)\n",          # 'builtins' denied: implicit builtins do not count
    "from . import socket\n",              # the candidate's own module
])
def test_denied_near_misses(src: str, tmp_path: Path) -> None:
    assert not {r for r in check({"k.py": src}, DENY, tmp=tmp_path)
                if r[0] == "policy.import-denied"}


ALLOW = policy(imports={"allow": ["torch", "triton", "math"], "deny": []})


@pytest.mark.parametrize("src, ok", [
    ("import torch\nimport triton.language as tl\nimport math\n", True),
    ("from __future__ import annotations\nimport torch\n", True),
    ("import helpers\nfrom helpers import f\n", True),      # a sibling source file
    ("from .helpers import f\n", True),
    ("import numpy\n", False),
    ("from os import path\n", False),
    ("import importlib\nimportlib.import_module('numpy')\n", False),
])
def test_allow_list(src: str, ok: bool, tmp_path: Path) -> None:
    files = {"k.py": src, "helpers.py": "def f():\n    return 1\n"}
    got = {r for r in check(files, ALLOW, tmp=tmp_path) if r[0] == "policy.import-not-allowed"}
    assert (not got) is ok, got


@pytest.mark.parametrize("files", [
    {"k.py": "import flashinfer\n"},
    {"k.py": "from flashinfer.norm import rmsnorm\n"},
    {"k.py": "import flashinfer.norm as fn\n"},
    {"k.py": "import importlib\nm = importlib.import_module('flashinfer')\n"},
    {"k.cu": "#include <flashinfer/norm.cuh>\n"},
    {"k.cuh": "auto s = flashinfer::norm::RMSNorm<float>;\n"},
])
def test_baseline_library_is_forbidden(files: dict[str, str], tmp_path: Path) -> None:
    """Attack: call the definition's FlashInfer baseline instead of writing a kernel."""
    rules = {r[0] for r in check(files, policy(), definition(), tmp=tmp_path)}
    assert "policy.baseline-call" in rules


@pytest.mark.parametrize("pol, d", [
    (policy(forbid_baseline_library=False), definition()),
    (policy(), definition(fi_api=None)),
    (policy(), None),
])
def test_baseline_allowed_when_policy_or_definition_say_so(pol: Policy, d: Definition | None,
                                                           tmp_path: Path) -> None:
    assert check({"k.py": "import flashinfer\n"}, pol, d, tmp=tmp_path) == set()


def test_baseline_near_miss(tmp_path: Path) -> None:
    files = {"k.py": "flashinfer_like = 1\nname = 'flashinfer'\n",
             "k.cu": "// see flashinfer's rmsnorm for the idea\nint flashinfer_x = 0;\n"}
    assert check(files, policy(), definition(), tmp=tmp_path) == set()


@pytest.mark.parametrize("rel", ["torch.py", "inspect.py", "triton/__init__.py",
                                 "numpy/core.py", "sitecustomize.py"])
def test_module_shadowing(rel: str, tmp_path: Path) -> None:
    """Attack: ship 'torch.py' or 'inspect.py' to replace a module the harness imports."""
    rules = check({rel: "x = 1\n", "kernel.py": "x = 1\n"}, tmp=tmp_path)
    assert ("policy.module-shadowing", rel, 1) in rules


def test_no_shadowing_for_ordinary_names(tmp_path: Path) -> None:
    files = {"kernel.py": "x = 1\n", "helpers.py": "x = 1\n", "cuda/kernel.cu": "int x;\n",
             "csrc/ops.cpp": "int y;\n", "README.md": "notes\n"}
    assert check(files, tmp=tmp_path) == set()


@pytest.mark.parametrize("rel", ["fast.so", "pkg/mod.cpython-311-x86_64-linux-gnu.so",
                                 "kernel.pyc", "evil.pth", "k.cubin"])
def test_native_artifacts(rel: str, tmp_path: Path) -> None:
    """Attack: a loadable binary among the 'sources' bypasses every source check."""
    rules = check({rel: "\x7fELF", "kernel.py": "x = 1\n"}, tmp=tmp_path)
    assert ("policy.native-artifact", rel, 1) in rules


def test_unparsable_python_fails_closed(tmp_path: Path) -> None:
    """A file this interpreter cannot parse may still run on the worker's: block it."""
    rules = check({"k.py": "type X = int\nimport socket\n"}, DENY, tmp=tmp_path)
    assert {r[0] for r in rules} == {"policy.unparsable-source"}


@pytest.mark.parametrize("module", ["_thread", "_posixsubprocess", "_ctypes", "posix",
                                    "_signal", "_weakref", "_pickle", "_socket", "fcntl"])
def test_default_policy_denies_the_c_twins_of_denied_modules(module: str, tmp_path: Path) -> None:
    """Attack: import the C module under a denied one (``_thread`` for threading, ``posix`` for
    os' process calls, ``_posixsubprocess``, ``_ctypes``...) to get its powers under a name the
    deny list does not hold. Source: KernelBench static checker (banned-module aliases)."""
    from sandboxharness.api import default_policy

    got = check({"k.py": f"import {module}\n"}, default_policy(), tmp=tmp_path)
    assert ("policy.import-denied", "k.py", 1) in got
