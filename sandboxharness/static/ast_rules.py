"""Our own AST rules: what generic tools miss in kernel code.

bandit and semgrep look for classic security smells. A kernel candidate has other ways to
cheat or escape: patching the timer or ``torch.allclose``, threads that keep working after
the call returns, caches that replay earlier outputs, a ``try/except`` that quietly falls back
to torch, frame walking that reaches the harness's objects. Each rule below has a stable id,
a severity and a message naming the file and line.

Names are resolved through imports and simple aliases (``import time as t``,
``from time import perf_counter``, ``x = os; x.system``, ``getattr(os, "system")``), so a
rule written for ``os.system`` also fires on its aliases. The source is parsed from the
bytes that will be imported, honouring a coding cookie (and flagging any that is not UTF-8).
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from .interface import Analyzer, Finding, Severity

__all__ = [
    "CPP_SUFFIXES", "PYTHON_SUFFIXES", "RULES", "AstAnalyzer", "AstRule", "ImportRef",
    "PythonNames", "analyse_source", "parse_python", "source_kind",
]

RULESET_VERSION = "1"

# ---------------------------------------------------------------------------------------------
# source kinds

SourceKind = Literal["python", "cpp", "other"]
PYTHON_SUFFIXES = frozenset({".py", ".pyw", ".pyi"})
CPP_SUFFIXES = frozenset({
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".h++",
    ".inl", ".inc", ".ipp", ".tcc", ".tpp",
})


def source_kind(path: str) -> SourceKind:
    """``python``, ``cpp`` (C, C++ and CUDA) or ``other``, by suffix (case-insensitive)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in PYTHON_SUFFIXES:
        return "python"
    if suffix in CPP_SUFFIXES:
        return "cpp"
    return "other"


# ---------------------------------------------------------------------------------------------
# rules


@dataclass(frozen=True)
class AstRule:
    id: str
    severity: Severity
    summary: str


RULES: dict[str, AstRule] = {r.id: r for r in (
    AstRule("ast.syntax-error", "high",
            "Not valid Python for this interpreter: nothing in the file could be checked."),
    AstRule("ast.unanalysable", "high", "Too deeply nested to analyse."),
    AstRule("ast.source-encoding", "high",
            "Declares a source encoding other than UTF-8 (the interpreter would read other "
            "code than the analysers see)."),
    AstRule("ast.process-spawn", "high",
            "Starts or replaces processes (subprocess, os.system/exec*/spawn*/fork, pty)."),
    AstRule("ast.dynamic-code", "high",
            "Runs or loads code the analysers cannot see (exec, eval, compile, __import__, "
            "importlib, builtins access, computed attribute names on modules)."),
    AstRule("ast.native-code", "high",
            "Loads native code or foreign functions (ctypes, cffi, JIT-built C++/CUDA)."),
    AstRule("ast.network", "high", "Uses the network."),
    AstRule("ast.file-write", "high",
            "Writes, moves, deletes or changes permissions of files."),
    AstRule("ast.file-read", "low", "Reads files or lists directories."),
    AstRule("ast.concurrency", "high",
            "Threads, processes, executors or event loops (work that outlives the call)."),
    AstRule("ast.monkeypatch", "high",
            "Rebinds attributes of modules or library objects (timers, torch, triton, builtins)."),
    AstRule("ast.introspection", "high",
            "Frame, garbage-collector, module-table or namespace introspection."),
    AstRule("ast.swallowed-exception", "medium",
            "Catches every exception without re-raising (e.g. a silent fallback to torch)."),
    AstRule("ast.global-state", "medium",
            "State kept across calls: mutated module-level or closure containers, global/"
            "nonlocal, function or class attributes, mutable default arguments."),
    AstRule("ast.memoization", "medium", "Result caching (functools.lru_cache/cache)."),
    AstRule("ast.env-read", "medium", "Reads or changes environment variables."),
    AstRule("ast.signal", "high",
            "Signals, killing processes, exiting the interpreter or exit hooks."),
    AstRule("ast.obfuscation", "high",
            "Decodes or decompresses data (base64, codecs, zlib, ...): hides code from review."),
    AstRule("ast.side-stream", "medium",
            "Creates or switches CUDA streams: work may escape the timed stream."),
    AstRule("ast.cuda-graph", "medium", "Captures or replays CUDA graphs."),
    AstRule("ast.trace-hook", "high",
            "Installs trace, profile, audit or exception hooks (sys.settrace, ...)."),
    AstRule("ast.tensor-subclass", "high",
            "Tensor subclasses, __torch_function__/__torch_dispatch__ or __class__ assignment."),
    AstRule("ast.op-registration", "high",
            "Registers or overrides torch operators or dispatch (torch.library, modes)."),
    AstRule("ast.torch-config", "medium",
            "Changes process-wide torch settings (torch.set_*, seeds, torch.backends flags)."),
    AstRule("ast.clock-read", "low", "Reads clocks (can be used to detect benchmarking)."),
    AstRule("ast.torch-compute", "medium",
            "A Triton/CUDA solution computes with torch (the kernel may be a decoy); only "
            "allocation, metadata and device queries are expected."),
)}


def _rx(*alternatives: str) -> re.Pattern[str]:
    """A dotted-name pattern: the name itself or anything under it."""
    return re.compile(r"^(?:" + "|".join(alternatives) + r")(?:\.|$)")


# Checked in order against every resolved dotted name; the first match wins.
_NAME_RULES: list[tuple[re.Pattern[str], str, str]] = [
    (_rx(r"sys\.(settrace|setprofile|gettrace|getprofile|addaudithook|monitoring|excepthook|"
         r"unraisablehook|displayhook|breakpointhook|remote_exec|activate_stack_trampoline)",
         r"threading\.(settrace|setprofile)\w*", "faulthandler", "tracemalloc", "pdb", "bdb",
         "trace", "cProfile", "profile"),
     "ast.trace-hook", "installs or reads trace/profile/audit hooks"),
    (_rx("subprocess", "pty", "pexpect", "plumbum", "popen2", "commands",
         r"os\.(system|popen\w*|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|startfile|wait\w*)",
         r"asyncio\.create_subprocess_\w+", r"multiprocessing\.popen\w*"),
     "ast.process-spawn", "starts or replaces processes"),
    (_rx(r"builtins\.(eval|exec|compile|__import__|breakpoint)", "importlib", "imp", "runpy",
         "zipimport", "pkgutil", "code", "codeop", "marshal", "pickle", "dill", "cloudpickle",
         "shelve", "copyreg", r"types\.(CodeType|FunctionType|LambdaType|ModuleType)",
         r"sys\.(meta_path|path_hooks|path_importer_cache|path)",
         r"operator\.(attrgetter|methodcaller)"),
     "ast.dynamic-code", "runs or loads code the analysers cannot see"),
    (_rx("ctypes", "cffi", "_cffi_backend", "mmap", r"torch\.utils\.cpp_extension",
         r"torch\.(ops|classes)\.load_library", r"torch\.cuda\.cudart", "cuda", "pycuda",
         "cupy", "cupyx", "numba", "nvrtc", r"tvm_ffi\.load\w*"),
     "ast.native-code", "loads native code or foreign functions"),
    (_rx("socket", "ssl", "select", "selectors", "urllib", "urllib2", "urllib3", "http",
         "httplib", "requests", "httpx", "aiohttp", "ftplib", "smtplib", "poplib", "imaplib",
         "nntplib", "telnetlib", "xmlrpc", "socketserver", "websocket", "websockets",
         "paramiko", "grpc", "zmq", "webbrowser", "asyncore", "asynchat",
         r"torch\.distributed"),
     "ast.network", "uses the network"),
    (_rx(r"os\.(remove|unlink|rename|renames|replace|rmdir|removedirs|mkdir|makedirs|chmod|"
         r"fchmod|lchmod|chown|fchown|lchown|link|symlink|truncate|ftruncate|write|pwrite|"
         r"writev|mkfifo|mknod|utime|sendfile|chdir|fchdir|chroot|setxattr|removexattr|umask|"
         r"open|dup2|memfd_create)",
         "shutil", "tempfile", r"io\.FileIO", r"torch\.save", r"numpy\.(save|savez|"
         r"savez_compressed|savetxt|memmap)", r"safetensors\.\w+\.save\w*", "sqlite3", "dbm",
         r"logging\.(FileHandler|handlers)",
         r"pathlib\.(\w+\.)*(rename|replace|mkdir|write_text|write_bytes|unlink|rmdir|touch|"
         r"chmod|lchmod|symlink_to|hardlink_to)"),
     "ast.file-write", "writes, moves or deletes files"),
    (_rx(r"os\.(listdir|scandir|walk|fwalk|readlink|read|pread|readv|stat|lstat)", "glob",
         r"torch\.load", r"numpy\.(load|loadtxt|fromfile|genfromtxt)",
         r"safetensors\.\w+\.load\w*", "zipfile", "tarfile", "fileinput", "linecache",
         r"pathlib\.(\w+\.)*(read_text|read_bytes|iterdir|glob|rglob|walk)"),
     "ast.file-read", "reads files or lists directories"),
    (_rx("threading", "multiprocessing", "concurrent", "asyncio", "sched",
         r"torch\.multiprocessing", r"os\.(register_at_fork|sched_\w+)"),
     "ast.concurrency", "threads, processes, executors or event loops"),
    (_rx(r"unittest\.mock", "mock", r"pytest\.MonkeyPatch", r"importlib\.reload"),
     "ast.monkeypatch", "patching helpers"),
    (_rx(r"sys\.(_getframe\w*|_current_frames|_current_exceptions|modules|exc_info|exception|"
         r"last_traceback|last_exc|last_value|last_type|getrefcount|getobjects|call_tracing|"
         r"_clear_type_cache|_debugmallocstats)",
         r"inspect\.(stack|currentframe|getouterframes|getinnerframes|getframeinfo|trace|"
         r"getmembers\w*|getclosurevars|getattr_static|unwrap|getmodule|getsource\w*)",
         r"gc\.(get_objects|get_referrers|get_referents|garbage|callbacks)",
         r"traceback\.(extract_stack|walk_stack|walk_tb|StackSummary)",
         r"builtins\.(globals|locals|vars)", "__main__", "sandboxharness", "flashinfer_bench"),
     "ast.introspection", "reaches frames, objects or namespaces it was not given"),
    (_rx(r"os\.(kill|killpg|abort|_exit|setsid|setpgrp|setpgid|pidfd_\w+|tgkill)", "signal",
         r"sys\.exit", r"builtins\.(exit|quit)", "atexit", "resource",
         r"_thread\.interrupt_main"),
     "ast.signal", "signals, kills or exits processes"),
    (_rx("base64", "binascii", "codecs", "zlib", "bz2", "lzma", "gzip", "quopri", "uu",
         "encodings", r"builtins\.(bytes|bytearray)\.fromhex"),
     "ast.obfuscation", "decodes or decompresses data"),
    (_rx(r"os\.(environ|environb|getenv|getenvb|putenv|unsetenv)"),
     "ast.env-read", "reads or changes environment variables"),
    (_rx(r"torch\.(cuda\.)?(Stream|stream|set_stream|ExternalStream|StreamContext)",
         r"torch\.cuda\.streams", r"torch\.accelerator\.set_stream"),
     "ast.side-stream", "creates or switches CUDA streams"),
    (_rx(r"torch\.cuda\.(CUDAGraph|graph|graphs|make_graphed_callables|graph_pool_handle)"),
     "ast.cuda-graph", "captures or replays CUDA graphs"),
    (_rx(r"torch\.(Tensor|_C\._?TensorBase)\.(_make_subclass|_make_wrapper_subclass|"
         r"as_subclass)", r"torch\._C\._?TensorMeta"),
     "ast.tensor-subclass", "builds tensor subclasses"),
    (_rx(r"torch\.library", r"torch\._library", r"torch\.ops\.import_module", r"torch\.overrides",
         r"torch\.utils\._python_dispatch", r"torch\._C\._dispatch\w*", r"torch\._ops",
         r"torch\.nn\.modules\.module\.register_module_\w+"),
     "ast.op-registration", "registers or intercepts torch operators"),
    (_rx(r"functools\.(lru_cache|cache|cached_property)", "cachetools", "joblib", "diskcache"),
     "ast.memoization", "caches results across calls"),
    (_rx(r"torch\.(set_\w+|use_deterministic_algorithms|manual_seed|seed|random)",
         r"torch\.cuda\.(manual_seed\w*|seed\w*|set_\w+)", r"numpy\.random\.seed",
         r"random\.seed"),
     "ast.torch-config", "changes process-wide settings"),
    (_rx(r"time\.(time|time_ns|perf_counter|perf_counter_ns|monotonic|monotonic_ns|"
         r"process_time|process_time_ns|thread_time\w*|clock_gettime\w*)",
         r"datetime\.datetime\.(now|utcnow|today)", r"torch\.cuda\.Event\.elapsed_time"),
     "ast.clock-read", "reads a clock"),
]

# Attribute names that are suspicious on any object.
_ATTR_RULES: dict[str, tuple[str, str]] = {
    **{a: ("ast.introspection", "frame or object-graph access") for a in (
        "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame",
        "tb_next", "gi_frame", "cr_frame", "ag_frame", "gi_code", "__subclasses__",
        "__globals__", "__closure__", "__code__", "__bases__", "__base__", "__mro__",
        "__dict__", "__defaults__", "__kwdefaults__", "__traceback__", "__reduce__",
        "__reduce_ex__", "__getattribute__")},
    "__builtins__": ("ast.dynamic-code", "access to the builtins namespace"),
    "__import__": ("ast.dynamic-code", "dynamic import"),
    "__loader__": ("ast.dynamic-code", "module loader access"),
    **{a: ("ast.tensor-subclass", "tensor subclass machinery") for a in (
        "__torch_function__", "__torch_dispatch__", "_make_subclass",
        "_make_wrapper_subclass", "as_subclass")},
    **{a: ("ast.file-write", "file modification") for a in (
        "write_text", "write_bytes", "unlink", "symlink_to", "hardlink_to", "link_to", "touch",
        "chmod", "lchmod", "rmdir", "tofile")},
    **{a: ("ast.file-read", "file access") for a in ("read_text", "read_bytes", "iterdir",
                                                      "rglob")},
    # Names that (almost) only exist on dangerous modules: caught even when the object
    # they are taken from cannot be resolved (a parameter, a return value, a loop variable).
    **{a: ("ast.process-spawn", "process creation") for a in (
        "system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
        "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp",
        "spawnlpe", "posix_spawn", "posix_spawnp", "forkpty", "check_output",
        "create_subprocess_exec", "create_subprocess_shell")},
    **{a: ("ast.introspection", "frame or object-graph access") for a in (
        "_getframe", "_current_frames", "get_referrers", "get_referents", "get_objects",
        "currentframe", "getouterframes")},
    **{a: ("ast.trace-hook", "trace/profile/audit hook") for a in (
        "settrace", "setprofile", "addaudithook", "settrace_all_threads")},
    **{a: ("ast.env-read", "environment access") for a in (
        "environ", "environb", "getenv", "putenv", "unsetenv")},
    **{a: ("ast.dynamic-code", "dynamic import") for a in (
        "import_module", "spec_from_file_location", "module_from_spec", "exec_module",
        "load_module", "SourceFileLoader")},
    **{a: ("ast.native-code", "native code") for a in (
        "CDLL", "PyDLL", "cdll", "pydll", "load_inline", "load_library")},
    **{a: ("ast.obfuscation", "decoding") for a in (
        "b64decode", "b32decode", "b16decode", "b85decode", "a85decode", "unhexlify")},
    **{a: ("ast.signal", "signals") for a in ("killpg",)},
    **{a: ("ast.network", "network access") for a in ("create_connection", "urlopen")},
}
_SPECIAL_NAMES = {"__builtins__": "ast.dynamic-code", "__loader__": "ast.dynamic-code"}
_SUSPICIOUS_STRING = re.compile(
    r"__(globals|builtins|subclasses|import|code|closure|bases|mro|dict|class|getattribute|"
    r"setattr|delattr|loader)__|\bf_(back|globals|locals|builtins)\b|\btb_frame\b")
_TENSOR_BASES = re.compile(
    r"^torch\.(Tensor|_C\._?TensorBase|nn\.Parameter|nn\.parameter\.(Parameter|Buffer))$")
_ALIASED_MODULES = {  # C-level twins of public modules
    "posix": "os", "nt": "os", "_io": "io", "_socket": "socket", "_signal": "signal",
    "_posixsubprocess": "subprocess", "_pickle": "pickle", "_ctypes": "ctypes",
    "_multiprocessing": "multiprocessing", "_asyncio": "asyncio", "_imp": "importlib",
    "_frozen_importlib": "importlib", "_frozen_importlib_external": "importlib",
    "_thread": "threading", "_ssl": "ssl", "_gc": "gc", "_warnings": "warnings",
    "__builtin__": "builtins", "_functools": "functools", "_tracemalloc": "tracemalloc",
    "_lsprof": "cProfile", "_codecs": "codecs", "_operator": "operator",
}
# What a non-torch solution may still use from torch: allocation, dtypes, metadata, devices.
_TORCH_GLUE = re.compile(
    r"^torch\.(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full|full_like|"
    r"arange|tensor|as_tensor|from_numpy|is_tensor|is_floating_point|is_complex|numel|device|"
    r"dtype|layout|memory_format|Size|Tensor|finfo|iinfo|get_default_dtype|result_type|"
    r"promote_types|can_cast|broadcast_shapes|typename|no_grad|inference_mode|enable_grad|"
    r"set_grad_enabled|is_grad_enabled|float\d*|bfloat16|half|double|int\d*|uint\d*|bool|long|"
    r"short|complex\d*|cfloat|cdouble|float8_\w+|strided|sparse_coo|contiguous_format|"
    r"channels_last\w*|preserve_format|cuda|backends|version|__version__|utils|jit|compiler|"
    r"autograd|accelerator|get_device_module|Generator|types|nn\.(Module|Parameter|parameter)|"
    r"library|ops\.load_library)(\.|$)")
_BUILTIN_NAMES = frozenset(dir(builtins))
_OPEN_FUNCS = {"builtins.open", "io.open", "os.fdopen", "codecs.open", "io.open_code",
               "tokenize.open", "gzip.open", "bz2.open", "lzma.open"}
_PATHLIB_OPEN = re.compile(r"^pathlib\.(\w+\.)*open$")
_CONTAINER_CALLS = re.compile(
    r"^(builtins\.(dict|list|set|bytearray)|collections\.(defaultdict|OrderedDict|Counter|"
    r"deque|ChainMap)|weakref\.(WeakValueDictionary|WeakKeyDictionary|WeakSet)|array\.array|"
    r"queue\.\w+|torch\.(empty|zeros|ones|full|rand|randn|tensor|as_tensor|arange|"
    r"empty_strided|\w+_like))$")
_MUTATORS = frozenset({
    "append", "extend", "insert", "update", "setdefault", "add", "pop", "popitem", "clear",
    "remove", "discard", "appendleft", "extendleft", "popleft", "rotate", "__setitem__",
    "__delitem__", "sort", "reverse", "move_to_end", "difference_update",
    "intersection_update", "symmetric_difference_update", "__ior__", "copy_", "fill_",
    "zero_", "put_", "index_put_", "scatter_", "set_", "resize_", "__iadd__",
})
_MAX_ALIASES = 32


def _normalise(dotted: str) -> str:
    head, _, rest = dotted.partition(".")
    head = _ALIASED_MODULES.get(head, head)
    return f"{head}.{rest}" if rest else head


# ---------------------------------------------------------------------------------------------
# name resolution (shared with the import checks)


@dataclass(frozen=True)
class ImportRef:
    module: str
    """Dotted module, without leading dots for relative imports."""
    name: str | None
    """For ``from module import name``; ``None`` for ``import module``."""
    level: int
    """0 for absolute imports; the number of leading dots otherwise."""
    line: int
    dynamic: bool = False
    """``importlib.import_module("x")`` or ``__import__("x")`` with a literal name."""


class PythonNames:
    """What names in one module refer to, flow-insensitively (an over-approximation)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.bindings: dict[str, set[str]] = {}
        self.star_modules: list[str] = []
        self.imports: list[ImportRef] = []
        self.module_paths: set[str] = set()
        """Dotted names bound by ``import x`` / ``import x.y as z``: certainly modules."""
        self._collect_imports()
        self._collect_aliases()
        self._collect_dynamic_imports()

    def _bind(self, name: str, targets: Iterable[str]) -> bool:
        cur = self.bindings.setdefault(name, set())
        before = len(cur)
        for t in targets:
            if len(cur) >= _MAX_ALIASES:
                break
            cur.add(t)
        return len(cur) != before

    def _collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports.append(ImportRef(a.name, None, 0, node.lineno))
                    target = _normalise(a.name if a.asname else a.name.split(".")[0])
                    self._bind(a.asname or a.name.split(".")[0], [target])
                    self.module_paths.add(target)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                base = ("." * node.level + mod) if node.level else _normalise(mod)
                for a in node.names:
                    self.imports.append(ImportRef(mod, a.name, node.level, node.lineno))
                    if a.name == "*":
                        self.star_modules.append(base)
                    else:
                        full = f"{base}.{a.name}" if base and not base.endswith(".") else (
                            base + a.name)
                        self._bind(a.asname or a.name, [full])

    def _collect_aliases(self) -> None:
        pairs: list[tuple[ast.expr, ast.expr]] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                pairs.extend((t, node.value) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                pairs.append((node.target, node.value))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs.extend((ast.Name(id=arg.arg), d)
                             for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults,
                                               strict=True))
                pairs.extend((ast.Name(id=arg.arg), d)
                             for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                             if d is not None)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                pairs.extend((i.optional_vars, i.context_expr) for i in node.items
                             if i.optional_vars is not None)
        for _ in range(8):  # to a fixpoint: aliases of aliases
            changed = False
            for target, value in pairs:
                changed |= self._bind_pair(target, value)
            if not changed:
                break

    def _bind_pair(self, target: ast.expr, value: ast.expr) -> bool:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                changed = False
                for t, v in zip(target.elts, value.elts, strict=True):
                    changed |= self._bind_pair(t, v)
                return changed
            return False
        if isinstance(target, ast.Name):
            res = self.resolve(value)
            return self._bind(target.id, res) if res else False
        return False

    def _collect_dynamic_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args:
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if {"importlib.import_module", "builtins.__import__"} & self.resolve(node.func):
                    self.imports.append(ImportRef(first.value.lstrip("."), None, 0, node.lineno,
                                                  dynamic=True))

    def resolve(self, expr: ast.expr) -> set[str]:
        """Dotted names ``expr`` may refer to (empty: nothing module-derived)."""
        if isinstance(expr, ast.Name):
            out = set(self.bindings.get(expr.id, ()))
            if expr.id == "__builtins__":
                out.add("builtins")
            elif expr.id in _BUILTIN_NAMES:
                out.add(f"builtins.{expr.id}")
            elif not out:
                out.update(f"{m}.{expr.id}" for m in self.star_modules)
            return out
        if isinstance(expr, ast.Attribute):
            return {f"{r}.{expr.attr}" for r in self.resolve(expr.value)}
        if isinstance(expr, ast.Call):
            return self._resolve_call(expr)
        if isinstance(expr, ast.Subscript):  # sys.modules["os"]
            key = expr.slice
            if (isinstance(key, ast.Constant) and isinstance(key.value, str)
                    and "sys.modules" in self.resolve(expr.value)):
                return {_normalise(key.value)}
        return set()

    def _resolve_call(self, call: ast.Call) -> set[str]:
        func = self.resolve(call.func)
        first = call.args[0] if call.args else None
        literal = (first.value if isinstance(first, ast.Constant) and isinstance(first.value, str)
                   else None)
        if "builtins.getattr" in func and first is not None and len(call.args) >= 2:
            name = call.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return {f"{r}.{name.value}" for r in self.resolve(first)}
        if literal and func & {"importlib.import_module", "builtins.__import__"}:
            return {_normalise(literal.lstrip("."))}
        if any(f.startswith("pathlib.") for f in func):  # a Path object
            return {"pathlib.Path"}
        return set()

    def references(self) -> Iterator[tuple[str, int]]:
        """Every resolved, import-rooted dotted name used in the module, with its line."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                for dotted in self.resolve(node):
                    if not dotted.startswith("builtins"):
                        yield dotted, node.lineno


# ---------------------------------------------------------------------------------------------
# parsing


def parse_python(data: bytes, path: str) -> tuple[ast.Module | None, list[Finding]]:
    """Parse like the interpreter would (coding cookie included); problems become findings."""
    findings: list[Finding] = []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return None, [_finding("ast.syntax-error", path, 1, f"bad encoding declaration: {exc}")]
    if encoding not in ("utf-8", "utf-8-sig"):
        findings.append(_finding("ast.source-encoding", path, 1,
                                 f"declares source encoding {encoding!r}: the interpreter would "
                                 "decode other code than the analysers read"))
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as exc:
        findings.append(_finding("ast.syntax-error", path, exc.lineno or 1,
                                 f"not valid Python: {exc.msg}"))
        return None, findings
    except (ValueError, UnicodeDecodeError) as exc:  # NUL bytes, undecodable text
        findings.append(_finding("ast.syntax-error", path, 1, f"not valid Python: {exc}"))
        return None, findings
    except (RecursionError, MemoryError):
        findings.append(_finding("ast.unanalysable", path, 1,
                                 "too deeply nested for the parser"))
        return None, findings
    return tree, findings


def _finding(rule_id: str, path: str, line: int, message: str) -> Finding:
    return Finding(tool="ast", rule_id=rule_id, severity=RULES[rule_id].severity, path=path,
                   line=line, message=message)


def analyse_source(data: bytes | str, path: str, *, forbid_torch_compute: bool = False
                   ) -> list[Finding]:
    """All AST findings for one Python source (``path`` is only used in the findings).

    ``forbid_torch_compute``: the solution claims to be a Triton/CUDA kernel, so torch
    compute calls (anything beyond allocation, dtypes and device queries) are findings.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tree, findings = parse_python(raw, path)
    if tree is None:
        return findings
    try:
        checker = _Checker(path, PythonNames(tree), forbid_torch_compute)
        checker.visit(tree)
        _StateChecker(checker).run(tree)
        findings.extend(checker.findings)
    except RecursionError:
        findings.append(_finding("ast.unanalysable", path, 1, "too deeply nested to analyse"))
    seen: set[tuple[str, int]] = set()
    unique = []
    for f in sorted(findings, key=lambda f: (f.line, f.rule_id)):
        if (f.rule_id, f.line) not in seen:
            seen.add((f.rule_id, f.line))
            unique.append(f)
    return unique


# ---------------------------------------------------------------------------------------------
# the checks


def _is_str(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, names: PythonNames, forbid_torch_compute: bool = False
                 ) -> None:
        self.path = path
        self.names = names
        self.forbid_torch_compute = forbid_torch_compute
        self.findings: list[Finding] = []
        self.bases: set[int] = set()
        """Nodes used as the object of ``x.attr`` or ``getattr(x, ...)``."""

    def report(self, rule_id: str, node: ast.AST, message: str) -> None:
        self.findings.append(_finding(rule_id, self.path, getattr(node, "lineno", 1), message))

    def check_name(self, dotted: str, node: ast.AST) -> None:
        for rx, rule_id, what in _NAME_RULES:
            if rx.match(dotted):
                self.report(rule_id, node, f"{dotted}: {what}")
                return

    def derived(self, expr: ast.expr) -> str | None:
        """The module-derived name ``expr`` hangs off (following ``.attr``, ``[i]`` and calls),
        or a class obtained at run time (``type(x)``, ``x.__class__``); ``None`` otherwise."""
        node: ast.expr = expr
        while True:
            if isinstance(node, ast.Name) and node.id in _BUILTIN_NAMES:
                # an implicit builtin name (often a parameter: ``input``) is no module
                res = sorted(self.names.bindings.get(node.id, ()))
                if res:
                    return res[0]
            elif isinstance(node, (ast.Name, ast.Attribute)):
                res = sorted(self.names.resolve(node) - {"builtins.type"})
                if res:
                    return res[0]
            if isinstance(node, ast.Attribute):
                if node.attr == "__class__":
                    return "<object>.__class__"
                node = node.value
            elif isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Call):
                if "builtins.type" in self.names.resolve(node.func):
                    return "type(...)"
                node = node.func
            else:
                return None

    # -- imports ---------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            name = _normalise(a.name)
            if name == "builtins":
                self.report("ast.dynamic-code", node, "imports the builtins module")
            self.check_name(name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            mod = _normalise(node.module)
            for a in node.names:
                self.check_name(mod if a.name == "*" else f"{mod}.{a.name}", node)

    # -- references ------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _SPECIAL_NAMES:
            self.report(_SPECIAL_NAMES[node.id], node, f"{node.id}: namespace/loader access")
        if isinstance(node.ctx, ast.Load):
            resolved = self.names.resolve(node)
            for dotted in sorted(resolved):
                self.check_name(dotted, node)
            modules = sorted(resolved & self.names.module_paths)
            if modules and id(node) not in self.bases:
                self.report("ast.dynamic-code", node, f"module {modules[0]} used as a value "
                            "(passed, returned or stored): later uses cannot be checked")
            self.check_torch_compute(node, resolved)

    def check_torch_compute(self, node: ast.Name | ast.Attribute, resolved: set[str]) -> None:
        """Outermost names only: ``torch.nn`` inside ``torch.nn.Module`` is not a use."""
        if not self.forbid_torch_compute or id(node) in self.bases:
            return
        for dotted in sorted(resolved):
            if dotted.startswith("torch.") and not _TORCH_GLUE.match(dotted):
                self.report("ast.torch-compute", node, f"{dotted}: torch computes here, not "
                            "the kernel this solution claims to be")
                return

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.bases.add(id(node.value))  # before the value is visited (parents come first)
        if node.attr in _ATTR_RULES:
            rule_id, what = _ATTR_RULES[node.attr]
            self.report(rule_id, node, f".{node.attr}: {what}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node)
        else:
            resolved = self.names.resolve(node)
            for dotted in sorted(resolved):
                self.check_name(dotted, node)
            self.check_torch_compute(node, resolved)
        self.generic_visit(node)

    def check_store(self, node: ast.Attribute) -> None:
        verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
        if node.attr == "__class__":
            self.report("ast.tensor-subclass", node, f"{verb} __class__ (object type swap)")
            return
        if node.attr in ("__code__", "__defaults__", "__kwdefaults__", "__globals__"):
            self.report("ast.monkeypatch", node, f"{verb} .{node.attr} (function body swap)")
            return
        base = self.derived(node.value)
        if base is None:
            return
        target = f"{base}.{node.attr}"
        if target.startswith("torch.backends."):
            self.report("ast.torch-config", node, f"{verb} {target}: process-wide torch flag")
        else:
            self.report("ast.monkeypatch", node, f"{verb} {target}: rebinds a module or "
                        "library attribute")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            v = node.value
            ns = None
            if isinstance(v, ast.Attribute) and v.attr == "__dict__":
                ns = self.derived(v.value)
            elif isinstance(v, ast.Call) and "builtins.vars" in self.names.resolve(v.func):
                ns = self.derived(v) or "vars(...)"
            if ns is not None:
                self.report("ast.monkeypatch", node, f"writes the namespace of {ns}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _SUSPICIOUS_STRING.search(node.value):
            self.report("ast.introspection", node,
                        "string names a sensitive attribute (dynamic access)")

    def visit_Expr(self, node: ast.Expr) -> None:
        if _is_str(node.value):  # docstrings and bare strings do nothing
            return
        self.generic_visit(node)

    # -- calls -----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = self.names.resolve(node.func)
        if node.args and func & {"builtins.getattr", "builtins.hasattr", "builtins.setattr",
                                 "builtins.delattr"}:
            self.bases.add(id(node.args[0]))
        if func & _OPEN_FUNCS or any(_PATHLIB_OPEN.match(f) for f in func):
            self.check_open(node, func)
        if func & {"builtins.getattr", "builtins.setattr", "builtins.delattr",
                   "builtins.hasattr"}:
            self.check_attr_call(node, func)
        fname = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if fname in ("__setattr__", "__delattr__") and isinstance(node.func, ast.Attribute):
            recv = node.func.value
            unbound = self.names.resolve(recv) & {"builtins.object", "builtins.type"}
            target = node.args[0] if unbound and node.args else recv
            base = self.derived(target)
            if base is not None:
                self.report("ast.monkeypatch", node, f"{fname} on {base}")
        if "builtins.type" in func and len(node.args) == 3:
            self.report("ast.dynamic-code", node, "type(name, bases, dict) builds a class at "
                        "run time")
        if func & {"builtins.getattr", "importlib.import_module", "builtins.__import__"}:
            for dotted in sorted(self.names.resolve(node)):
                self.check_name(dotted, node)
        if "contextlib.suppress" in func and any(self.is_broad(a) for a in node.args):
            self.report("ast.swallowed-exception", node,
                        "contextlib.suppress(Exception) silences every error")
        self.generic_visit(node)

    def check_open(self, node: ast.Call, func: set[str]) -> None:
        at = 0 if any(f.startswith("pathlib.") for f in func) else 1
        mode: ast.expr | None = node.args[at] if len(node.args) > at else None
        for kw in node.keywords:
            if kw.arg == "mode":
                mode = kw.value
            elif kw.arg is None:  # **kwargs: the mode is unknown
                mode = kw.value
        if mode is None:
            self.report("ast.file-read", node, "open(): reads a file")
        elif isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            if set(mode.value) & set("wax+"):
                self.report("ast.file-write", node, f"open(mode={mode.value!r}): writes a file")
            else:
                self.report("ast.file-read", node, "open(): reads a file")
        else:
            self.report("ast.file-write", node, "open() with a computed mode: may write")

    def check_attr_call(self, node: ast.Call, func: set[str]) -> None:
        if len(node.args) < 2:
            return
        obj, name = node.args[0], node.args[1]
        base = self.derived(obj)
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            attr = name.value
            if attr in _ATTR_RULES:
                rule_id, what = _ATTR_RULES[attr]
                self.report(rule_id, node, f"{attr!r}: {what}")
            if func & {"builtins.setattr", "builtins.delattr"}:
                if attr == "__class__":
                    self.report("ast.tensor-subclass", node, "setattr(..., '__class__', ...)")
                elif base is not None:
                    self.report("ast.monkeypatch", node, f"setattr/delattr on {base}.{attr}")
        elif base is not None:
            self.report("ast.dynamic-code", node, f"attribute name computed at run time on "
                        f"{base}")
        elif func & {"builtins.setattr", "builtins.delattr"}:
            self.report("ast.monkeypatch", node, "setattr/delattr with a computed name")

    # -- exceptions ------------------------------------------------------------------------
    def is_broad(self, expr: ast.expr | None) -> bool:
        if expr is None:
            return True
        if isinstance(expr, ast.Tuple):
            return any(self.is_broad(e) for e in expr.elts)
        return bool(self.names.resolve(expr) & {"builtins.Exception", "builtins.BaseException"})

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for h in node.handlers:
            if self.is_broad(h.type) and not _raises(h.body):
                what = "bare except" if h.type is None else f"except {ast.unparse(h.type)}"
                self.report("ast.swallowed-exception", h,
                            f"{what} without re-raise: errors are hidden (silent fallback)")
        for stmt in _walk_local(node.finalbody):
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                self.report("ast.swallowed-exception", stmt,
                            "return/break/continue in finally discards the exception")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    # -- classes and functions -------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            for dotted in self.names.resolve(b):
                if _TENSOR_BASES.match(dotted):
                    self.report("ast.tensor-subclass", node,
                                f"class {node.name} subclasses {dotted}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.report("ast.tensor-subclass", node, f"defines {node.name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        self.report("ast.global-state", node, f"global {', '.join(node.names)}: state kept "
                    "across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.report("ast.global-state", node, f"nonlocal {', '.join(node.names)}: closure "
                    "state kept across calls")


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walk_local(body: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Nodes of ``body`` without descending into nested functions or classes."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _raises(body: Sequence[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for n in _walk_local(body))


# ---------------------------------------------------------------------------------------------
# state kept across calls


@dataclass
class _Scope:
    node: ast.AST
    containers: dict[str, int]
    is_class: bool = False
    instance_containers: frozenset[str] = frozenset()


class _StateChecker:
    """Containers bound in one scope and mutated from a function that outlives the binding."""

    def __init__(self, checker: _Checker) -> None:
        self.c = checker
        self.module_defs: set[str] = set()

    def is_container(self, expr: ast.expr | None) -> bool:
        if isinstance(expr, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                             ast.SetComp)):
            return True
        if isinstance(expr, ast.Call):
            return any(_CONTAINER_CALLS.match(r) for r in self.c.names.resolve(expr.func))
        return False

    def containers(self, body: Sequence[ast.AST]) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in _walk_local(body):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign) and self.is_container(node.value):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign) and self.is_container(node.value):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = t.lineno
        return out

    def run(self, tree: ast.Module) -> None:
        self.module_defs = {n.name for n in tree.body
                            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.ClassDef))}
        self.walk(tree, [_Scope(tree, self.containers(tree.body))])

    def walk(self, node: ast.AST, stack: list[_Scope]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self.check_function(child, stack)
                body = child.body if isinstance(child.body, list) else [child.body]
                self.walk(child, [*stack, _Scope(child, self.containers(body))])
            elif isinstance(child, ast.ClassDef):
                inst = {t.attr for m in child.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in _walk_local(m.body) if isinstance(n, ast.Assign)
                        and self.is_container(n.value)
                        for t in n.targets if isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name) and t.value.id == "self"}
                self.walk(child, [*stack, _Scope(child, self.containers(child.body), True,
                                                 frozenset(inst))])
            else:
                self.walk(child, stack)

    def check_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
                       stack: list[_Scope]) -> None:
        body: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
        a = fn.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        pos = a.posonlyargs + a.args
        mutable_defaults = {arg.arg for arg, d in zip(pos[len(pos) - len(a.defaults):],
                                                      a.defaults, strict=True)
                            if self.is_container(d)}
        mutable_defaults |= {arg.arg for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                             if d is not None and self.is_container(d)}
        declared = {n for s in _walk_local(body) if isinstance(s, (ast.Global, ast.Nonlocal))
                    for n in s.names}
        local = (params | _bound_names(body)) - declared
        cls = next((s for s in reversed(stack) if s.is_class), None)
        in_method = bool(stack) and stack[-1].is_class
        fname = getattr(fn, "name", "<lambda>")
        for target, node in _mutations(body):
            if isinstance(target, ast.Name):
                n = target.id
                if n in local:
                    if n in mutable_defaults:
                        self.c.report("ast.global-state", node, f"mutates default argument "
                                      f"{n!r}: a mutable default persists across calls")
                    continue
                for scope in reversed(stack):
                    if not scope.is_class and n in scope.containers:
                        where = "module-level" if isinstance(scope.node, ast.Module) else \
                            "enclosing"
                        self.c.report("ast.global-state", node, f"mutates {where} container "
                                      f"{n!r} (line {scope.containers[n]}): persists across "
                                      "calls")
                        break
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                b, attr = target.value.id, target.attr
                if (in_method and cls is not None and b in ("self", "cls")
                        and fname != "__init__"
                        and (attr in cls.containers or attr in cls.instance_containers)):
                    self.c.report("ast.global-state", node, f"mutates container {b}.{attr} "
                                  "kept on the object across calls")
                elif b in self.module_defs and b not in local:
                    self.c.report("ast.global-state", node, f"mutates {b}.{attr}: state "
                                  "stored on a module-level function or class")
        for node in _walk_local(body):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id in self.module_defs and t.value.id not in local):
                        self.c.report("ast.global-state", node, f"sets {t.value.id}.{t.attr}:"
                                      " state stored on a module-level function or class")


def _bound_names(body: Sequence[ast.AST]) -> set[str]:
    out: set[str] = set()
    for node in _walk_local(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
    return out


def _mutations(body: Sequence[ast.AST]) -> Iterator[tuple[ast.expr, ast.AST]]:
    """(mutated container expression, statement or call) pairs in ``body``."""
    for node in _walk_local(body):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                       else [node.target])
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Subscript):
                        yield sub.value, node
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute):
                yield node.target, node
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _MUTATORS):
            target = node.func.value
            while isinstance(target, ast.Subscript):  # cache[key].append(...)
                target = target.value
            yield target, node


# ---------------------------------------------------------------------------------------------
# the analyser


class AstAnalyzer(Analyzer):
    """Runs :func:`analyse_source` on every Python source; pure Python, no subprocess."""

    name = "ast"

    def __init__(self, *, forbid_torch_compute: bool = False) -> None:
        """``forbid_torch_compute``: for solutions whose language is not plain Python."""
        self.forbid_torch_compute = forbid_torch_compute

    def scan(self, root: Path, paths: list[str], timeout_s: float) -> list[Finding]:
        findings: list[Finding] = []
        for rel in paths:
            if source_kind(rel) != "python":
                continue
            findings.extend(analyse_source((root / rel).read_bytes(), rel,
                                           forbid_torch_compute=self.forbid_torch_compute))
        return findings

    def version(self) -> str:
        import sys

        return (f"sandboxharness-ast/{RULESET_VERSION} (python "
                f"{sys.version_info.major}.{sys.version_info.minor})")
