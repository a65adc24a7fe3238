"""The rule table: each AST rule's stable id, severity and summary, and the names that trigger it.

``RULES`` is what reports and SARIF show; ``NAME_RULES`` and ``ATTR_RULES`` are the data the
checks match resolved names and attribute names against, with the message for each match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..interface import Finding, Severity

__all__ = ["ATTR_RULES", "NAME_RULES", "RULES", "RULESET_VERSION", "AstRule", "finding"]

RULESET_VERSION = "1"


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
NAME_RULES: list[tuple[re.Pattern[str], str, str]] = [
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
ATTR_RULES: dict[str, tuple[str, str]] = {
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


def finding(rule_id: str, path: str, line: int, message: str) -> Finding:
    """A finding of ``rule_id``; its severity always comes from ``RULES``."""
    return Finding(tool="ast", rule_id=rule_id, severity=RULES[rule_id].severity, path=path,
                   line=line, message=message)
