"""Our AST rules: one positive and one near-miss negative per rule, then the evasion tricks.

Pure Python (no subprocess): these run in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.static import RULES, AstAnalyzer, analyse_source, source_kind

HONEST = Path(__file__).resolve().parents[1] / "data" / "static" / "honest"


def rule_ids(src: str) -> set[str]:
    return {f.rule_id for f in analyse_source(src, "cand.py")}


def lines_of(src: str, rule_id: str) -> list[int]:
    return [f.line for f in analyse_source(src, "cand.py") if f.rule_id == rule_id]


# rule id -> (positive, near-miss negative)
CASES: dict[str, tuple[str, str]] = {
    "ast.process-spawn": (
        "import subprocess\nsubprocess.run(['ls'])\n",
        "import os\np = os.path.join('a', 'b')\n"),
    "ast.dynamic-code": (
        "y = eval('1 + 1')\n",
        "import ast\ny = ast.literal_eval('1')\n"),
    "ast.native-code": (
        "import ctypes\nlib = ctypes.CDLL('libc.so.6')\n",
        "from torch.utils import dlpack\n"),
    "ast.network": (
        "import socket\ns = socket.create_connection(('h', 1))\n",
        "def socket():\n    return 1\ns = socket()\n"),
    "ast.file-write": (
        "f = open('out.txt', 'w')\n",
        "f = open('in.txt')\n"),
    "ast.file-read": (
        "f = open('in.txt', 'rb')\n",
        "import io\nb = io.BytesIO(b'')\n"),
    "ast.concurrency": (
        "import threading\nthreading.Thread(target=print).start()\n",
        "import torch\ntorch.cuda.synchronize()\n"),
    "ast.monkeypatch": (
        "import torch\ntorch.allclose = lambda *a, **k: True\n",
        "import torch\nclass Box:\n    pass\nb = Box()\nb.allclose = torch.allclose\n"),
    "ast.introspection": (
        "import sys\nframe = sys._getframe(1)\n",
        "import sys\nv = sys.version_info\n"),
    "ast.swallowed-exception": (
        "try:\n    y = 1\nexcept Exception:\n    y = 2\n",
        "try:\n    y = 1\nexcept Exception as e:\n    raise RuntimeError('no') from e\n"),
    "ast.global-state": (
        "_cache = {}\ndef run(x):\n    _cache[x] = x\n    return x\n",
        "_TABLE = {1: 2}\ndef run(x):\n    return _TABLE.get(x)\n"),
    "ast.memoization": (
        "import functools\n@functools.lru_cache(maxsize=None)\ndef f(x):\n    return x\n",
        "import functools\ng = functools.partial(print, end='')\n"),
    "ast.env-read": (
        "import os\nv = os.environ.get('X')\n",
        "import os\nsep = os.sep\n"),
    "ast.signal": (
        "import os\nos.kill(os.getpid(), 9)\n",
        "import os\npid = os.getpid()\n"),
    "ast.obfuscation": (
        "import base64\ncode = base64.b64decode('aGk=')\n",
        "data = 'aGk='.encode()\n"),
    "ast.side-stream": (
        "import torch\ns = torch.cuda.Stream()\n",
        "import torch\nd = torch.cuda.current_device()\n"),
    "ast.cuda-graph": (
        "import torch\ng = torch.cuda.CUDAGraph()\n",
        "import torch\nok = torch.cuda.is_available()\n"),
    "ast.trace-hook": (
        "import sys\nsys.settrace(None)\n",
        "import sys\nn = sys.getsizeof(1)\n"),
    "ast.tensor-subclass": (
        "import torch\nclass Lazy(torch.Tensor):\n    pass\n",
        "import torch\nclass Net(torch.nn.Module):\n    pass\n"),
    "ast.op-registration": (
        "import torch\nlib = torch.library.Library('aten', 'IMPL')\n",
        "import torch\ndef f(x):\n    return torch.ops.aten.add(x, x)\n"),
    "ast.torch-config": (
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
        "import torch\nflag = torch.backends.cuda.matmul.allow_tf32\n"),
    "ast.clock-read": (
        "import time\nt0 = time.perf_counter()\n",
        "import time\ntime.sleep(0)\n"),
    "ast.env-probe": (
        "import os\npid = os.getpid()\n",
        "import os\nsep = os.sep\n"),
    "ast.deferred-callback": (
        "import weakref\ndef run(x, y):\n    weakref.finalize(y, print)\n",
        "def run(x, y):\n    y.copy_(x)\n"),
    "ast.shared-storage": (
        "def run(x, y):\n    y.share_memory_()\n",
        "def run(x, y):\n    p = y.data_ptr()\n"),
    "ast.source-encoding": (
        "# -*- coding: utf-7 -*-\nx = 1\n",
        "# -*- coding: utf-8 -*-\nx = 1\n"),
    "ast.syntax-error": (
        "def f(:\n    pass\n",
        "def f():\n    pass\n"),
    "ast.torch-compute": (  # checked with forbid_torch_compute (a Triton/CUDA solution)
        "import torch.nn.functional as F\ndef run(x, y):\n    y.copy_(F.silu(x))\n",
        "import torch\ndef run(x):\n    y = torch.empty_like(x, dtype=torch.float16)\n"
        "    assert isinstance(x, torch.Tensor) and torch.cuda.is_available()\n    return y\n"),
    "ast.unanalysable": (
        "x = " + "not " * 900 + "y\n",
        "x = " + "not " * 50 + "y\n"),
}


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_positive_and_near_miss(rule_id: str) -> None:
    """Each rule fires on its minimal positive and stays silent on a near miss."""
    positive, negative = CASES[rule_id]
    strict = rule_id == "ast.torch-compute"
    found = analyse_source(positive, "cand.py", forbid_torch_compute=strict)
    hit = [f for f in found if f.rule_id == rule_id]
    assert hit, f"{rule_id} missed: {found}"
    assert all(f.severity == RULES[rule_id].severity and f.tool == "ast" for f in hit)
    assert all(f.path == "cand.py" and f.line >= 1 and f.message for f in hit)
    assert rule_id not in {f.rule_id for f in analyse_source(negative, "cand.py",
                                                              forbid_torch_compute=strict)}


@pytest.mark.parametrize("src", [
    "import torch\ndef run(a, b, c):\n    torch.matmul(a, b, out=c)\n",
    "from torch.nn.functional import softmax\ndef run(x):\n    return softmax(x, -1)\n",
    "import torch\ndef run(x):\n    return torch.ops.aten.relu(x)\n",
    "import torch\nact = torch.nn.functional.gelu\n",
])
def test_torch_compute_only_for_kernel_languages(src: str) -> None:
    """Attack: a decoy Triton kernel is launched while torch computes the output."""
    assert "ast.torch-compute" in {f.rule_id for f in analyse_source(
        src, "cand.py", forbid_torch_compute=True)}
    assert "ast.torch-compute" not in rule_ids(src)  # a plain-python solution may use torch


# --- aliasing and evasion -----------------------------------------------------------------

@pytest.mark.parametrize("src, rule_id", [
    ("import time as t\nt.perf_counter = lambda: 0.0\n", "ast.monkeypatch"),
    ("from time import perf_counter\nimport time\ntime.perf_counter = perf_counter\n",
     "ast.monkeypatch"),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 1.0\n", "ast.monkeypatch"),
    ("from torch.cuda import Event\nEvent.elapsed_time = lambda s, e: 1.0\n", "ast.monkeypatch"),
    ("import torch\ntype(torch.cuda.Event()).elapsed_time = None\n", "ast.monkeypatch"),
    ("import torch.testing as tt\ntt.assert_close = print\n", "ast.monkeypatch"),
    ("from torch import testing\nsetattr(testing, 'assert_close', print)\n", "ast.monkeypatch"),
    ("import triton.testing\ntriton.testing.do_bench = lambda f, **k: 0.001\n",
     "ast.monkeypatch"),
    ("import torch\nvars(torch)['allclose'] = print\n", "ast.monkeypatch"),
    ("import torch\ntorch.__dict__['allclose'] = print\n", "ast.monkeypatch"),
    ("import torch\nobject.__setattr__(torch, 'allclose', print)\n", "ast.monkeypatch"),
    ("import builtins\nbuiltins.print = len\n", "ast.monkeypatch"),
    ("import gc as g\ng.collect = None\n", "ast.monkeypatch"),
    ("import sys\nsys.stdout = None\n", "ast.monkeypatch"),
    ("import torch\nT = torch\nT.allclose = print\n", "ast.monkeypatch"),
    # the module object escapes into a parameter, a loop variable or a return value
    ("import os\ndef f(m):\n    m.system('id')\nf(os)\n", "ast.dynamic-code"),
    ("import os\ndef f(m):\n    m.system('id')\n", "ast.process-spawn"),
    ("import os\nfor m in [os]:\n    v = m.getenv('X')\n", "ast.env-read"),
    ("import torch\ndef g():\n    return torch\n", "ast.dynamic-code"),
    ("import sys\ndef f(s):\n    return s._getframe(1)\nf(sys)\n", "ast.introspection"),
    ("import os\nx = os\nx.system('id')\n", "ast.process-spawn"),
    ("import os\nf = getattr(os, 'system')\n", "ast.process-spawn"),
    ("import os\ngetattr(os, 'sys' + 'tem')('id')\n", "ast.dynamic-code"),
    ("__import__('os').system('id')\n", "ast.process-spawn"),
    ("import importlib\nimportlib.import_module('subprocess').run(['id'])\n",
     "ast.process-spawn"),
    ("import sys\nsys.modules['os'].system('id')\n", "ast.process-spawn"),
    ("from os import *\nsystem('id')\n", "ast.process-spawn"),
    ("import posix\nposix.system('id')\n", "ast.process-spawn"),
    ("import os\na, b = os, 1\na.system('id')\n", "ast.process-spawn"),
    ("import os\ndef f(run=os.system):\n    run('id')\n", "ast.process-spawn"),
    ("ｅｖａｌ('1')\n", "ast.dynamic-code"),  # NFKC-normalised identifier
    ("g = __builtins__\n", "ast.dynamic-code"),
    ("import builtins\n", "ast.dynamic-code"),
    ("f = (lambda: 0).__globals__\n", "ast.introspection"),
    ("subs = object.__subclasses__()\n", "ast.introspection"),
    ("name = '__glo' 'bals__'\n", "ast.introspection"),
    ("import inspect\nfr = inspect.currentframe().f_back.f_locals\n", "ast.introspection"),
    ("import gc\nrefs = gc.get_referrers(object())\n", "ast.introspection"),
    ("import __main__\n", "ast.introspection"),
    ("import torch\nx = torch.zeros(1)\nx.__class__ = torch.Tensor\n", "ast.tensor-subclass"),
    ("class M:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
     "        return 1\n", "ast.tensor-subclass"),
    ("import torch.nn as nn\nclass P(nn.Parameter):\n    pass\n", "ast.tensor-subclass"),
    ("from torch.overrides import TorchFunctionMode\n", "ast.op-registration"),
    ("import torch.utils.cpp_extension as ext\nm = ext.load_inline('m', '')\n",
     "ast.native-code"),
    ("from pathlib import Path\nPath('x').write_text('y')\n", "ast.file-write"),
    ("from pathlib import Path\np = Path('x')\np.unlink()\n", "ast.file-write"),
    ("from pathlib import Path\nwith Path('x').open('a') as f:\n    pass\n", "ast.file-write"),
    ("import shutil\nshutil.rmtree('/tmp/x')\n", "ast.file-write"),
    ("import torch\ntorch.save({}, 'x.pt')\n", "ast.file-write"),
    ("import concurrent.futures as cf\npool = cf.ThreadPoolExecutor()\n", "ast.concurrency"),
    ("import asyncio\nasyncio.run(None)\n", "ast.concurrency"),
    ("import zlib\ncode = zlib.decompress(b'')\n", "ast.obfuscation"),
    ("import codecs\ns = codecs.decode('flf', 'rot13')\n", "ast.obfuscation"),
    ("import sys\nsys.setprofile(None)\n", "ast.trace-hook"),
    ("import threading\nthreading.settrace(print)\n", "ast.trace-hook"),
    ("import atexit\natexit.register(print)\n", "ast.signal"),
    ("import signal\nsignal.signal(signal.SIGTERM, print)\n", "ast.signal"),
    ("import torch\nwith torch.cuda.stream(torch.cuda.Stream()):\n    pass\n",
     "ast.side-stream"),
    ("from torch.cuda import graph\n", "ast.cuda-graph"),
    ("import torch\ntorch.manual_seed(0)\n", "ast.torch-config"),
])
def test_aliases_and_evasion_are_caught(src: str, rule_id: str) -> None:
    """Attack: rename, re-import or compute the name of a dangerous function."""
    assert rule_id in rule_ids(src), analyse_source(src, "cand.py")


@pytest.mark.parametrize("src", [
    "import torch\nx = torch.zeros(1)\nok = isinstance(x, torch.Tensor)\n",
    "import torch\nok = hasattr(torch, 'compile')\n",
    "import triton.language as tl\ndef k(x: tl.tensor):\n    return tl.sum(x, axis=0)\n",
    # FlashInfer-Bench names tensors 'input': a parameter, not the builtin (stores on a
    # parameter are findings of their own: tests/unit/test_static_classes.py)
    "def run(input, output):\n    input.requires_grad_(False)\n"
    "    output.copy_(getattr(input, 'name', None) or input)\n",
])
def test_ordinary_code_is_not_dynamic(src: str) -> None:
    assert rule_ids(src) == set()


def test_alias_reports_the_line_of_use() -> None:
    src = "import time as t\n\n\ndef f():\n    t.perf_counter = lambda: 0.0\n"
    assert lines_of(src, "ast.monkeypatch") == [5]


def test_utf7_cookie_reveals_hidden_code() -> None:
    """Attack: a UTF-7 coding cookie turns a comment into code the interpreter runs."""
    src = b"# -*- coding: utf-7 -*-\n# +AAo-import subprocess\n"
    found = {f.rule_id for f in analyse_source(src, "cand.py")}
    assert {"ast.source-encoding", "ast.process-spawn"} <= found


def test_nul_byte_is_a_syntax_finding_not_an_exception() -> None:
    assert rule_ids("x = 1\x00\n") == {"ast.syntax-error"}


def test_syntax_error_reports_its_line() -> None:
    assert lines_of("x = 1\ny = (\n", "ast.syntax-error") == [2]


# --- exceptions -----------------------------------------------------------------------------

@pytest.mark.parametrize("src, flagged", [
    ("try:\n    pass\nexcept:\n    pass\n", True),
    ("try:\n    pass\nexcept BaseException:\n    y = 0\n", True),
    ("try:\n    pass\nexcept (ValueError, Exception):\n    y = 0\n", True),
    ("import torch\ndef run(x):\n    try:\n        return k(x)\n    except Exception:\n"
     "        return torch.relu(x)\n", True),
    ("import contextlib\nwith contextlib.suppress(Exception):\n    pass\n", True),
    ("def f():\n    try:\n        return 1\n    finally:\n        return 2\n", True),
    ("try:\n    pass\nexcept ValueError:\n    pass\n", False),
    ("try:\n    pass\nexcept Exception:\n    raise\n", False),
    ("try:\n    pass\nexcept:\n    print('x')\n    raise\n", False),
    ("import contextlib\nwith contextlib.suppress(KeyError):\n    pass\n", False),
])
def test_swallowed_exceptions(src: str, flagged: bool) -> None:
    """Attack: a broad except that silently falls back to the reference implementation."""
    assert ("ast.swallowed-exception" in rule_ids(src)) is flagged


# --- state across calls ---------------------------------------------------------------------

@pytest.mark.parametrize("src, flagged", [
    ("from collections import OrderedDict\n_c = OrderedDict()\ndef run(x):\n"
     "    _c.setdefault(x, x)\n", True),
    ("import collections\n_c = collections.defaultdict(list)\ndef run(x):\n"
     "    _c[x].append(x)\n", True),
    ("_seen = []\ndef run(x):\n    _seen.append(x)\n", True),
    ("def make():\n    memo = {}\n    def run(x):\n        memo[x] = x\n    return run\n", True),
    ("def run(x, _memo={}):\n    _memo[id(x)] = x\n    return x\n", True),
    ("n = 0\ndef run(x):\n    global n\n    n += 1\n", True),
    ("def run(x):\n    run.last = x\n", True),
    ("class K:\n    cache = {}\n    def __call__(self, x):\n        self.cache[x] = x\n", True),
    ("class K:\n    def __init__(self):\n        self.memo = {}\n"
     "    def __call__(self, x):\n        self.memo[x] = x\n", True),
    ("import torch\n_buf = torch.empty(16)\ndef run(x):\n    _buf.copy_(x)\n    return _buf\n",
     True),
    ("def run(x):\n    memo = {}\n    memo[x] = x\n    return memo\n", False),
    ("_cfg = []\nfor b in (64, 128):\n    _cfg.append(b)\ndef run(x):\n    return _cfg[0]\n",
     False),
    ("_c = {}\ndef run(x):\n    _c = {}\n    _c[x] = 1\n    return _c\n", False),
    ("def run(x, opts=None):\n    opts = opts or {}\n    return opts\n", False),
    ("class K:\n    def __init__(self):\n        self.memo = {}\n        self.memo['a'] = 1\n",
     False),
])
def test_state_kept_across_calls(src: str, flagged: bool) -> None:
    """Attack: cache outputs between calls and replay them when the inputs repeat."""
    assert ("ast.global-state" in rule_ids(src)) is flagged, analyse_source(src, "cand.py")


# --- honest code and the analyser -----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in HONEST.glob("*.py")))
def test_honest_python_has_no_findings(name: str) -> None:
    """No false positives on typical Triton and torch kernels (not even low ones)."""
    assert analyse_source((HONEST / name).read_bytes(), name) == []


def test_analyser_scans_only_python(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("eval(1);\n")
    (tmp_path / "k.py").write_text("eval('1')\n")
    found = AstAnalyzer().scan(tmp_path, ["k.cu", "k.py"], 5.0)
    assert {(f.path, f.rule_id) for f in found} == {("k.py", "ast.dynamic-code")}
    assert "sandboxharness-ast" in AstAnalyzer().version()


@pytest.mark.parametrize("path, kind", [
    ("a.py", "python"), ("pkg/A.PY", "python"), ("k.cu", "cpp"), ("k.cuh", "cpp"),
    ("x.cpp", "cpp"), ("README.md", "other"), ("lib.so", "other"),
])
def test_source_kind(path: str, kind: str) -> None:
    assert source_kind(path) == kind
