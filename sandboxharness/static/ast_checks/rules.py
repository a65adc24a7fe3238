"""The rule table: each AST rule's stable id, severity and summary, and the names that trigger it.

``RULES`` is what reports and SARIF show; ``NAME_RULES`` and ``ATTR_RULES`` are the data the
checks match resolved names and attribute names against, with the message for each match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..interface import Finding, Severity

__all__ = ["ATTR_RULES", "NAME_RULES", "RULES", "RULESET_VERSION", "AstRule", "finding"]

RULESET_VERSION = "2"


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
    AstRule("ast.file-read", "medium",
            "Reads files or lists directories (a kernel needs neither; it may be probing "
            "where it runs)."),
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
    AstRule("ast.clock-read", "medium",
            "Reads clocks or times itself (can be used to detect benchmarking)."),
    AstRule("ast.env-probe", "medium",
            "Probes where it runs (hostname, pids, users, argv, platform, system paths, "
            "device memory counters, RNG state): it may behave differently under evaluation."),
    AstRule("ast.deferred-callback", "high",
            "Registers code that runs later, outside the call (__del__, weakref finalizers and "
            "callbacks, tensor or module hooks, future callbacks): it can rewrite results "
            "after they were taken."),
    AstRule("ast.shared-storage", "high",
            "Shares, maps or re-points tensor storage (torch.from_file, mmap, untyped_storage, "
            "share_memory_, set_, raw array interfaces): outputs may change after the call."),
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
         r"operator\.(attrgetter|methodcaller)", r"torch\.serialization", r"torch\.package",
         r"torch\.jit\.load", r"yaml\.(load|load_all|unsafe_load\w*|full_load\w*)"),
     "ast.dynamic-code", "runs or loads code the analysers cannot see"),
    (_rx("ctypes", "cffi", "_cffi_backend", r"torch\.utils\.cpp_extension",
         r"torch\.(ops|classes)\.load_library", r"torch\.cuda\.cudart", "cuda", "pycuda",
         "cupy", "cupyx", "numba", "nvrtc", r"tvm_ffi\.load\w*"),
     "ast.native-code", "loads native code or foreign functions"),
    (_rx("socket", "ssl", "select", "selectors", "urllib", "urllib2", "urllib3", "http",
         "httplib", "requests", "httpx", "aiohttp", "ftplib", "smtplib", "poplib", "imaplib",
         "nntplib", "telnetlib", "xmlrpc", "socketserver", "websocket", "websockets",
         "paramiko", "grpc", "zmq", "webbrowser", "asyncore", "asynchat",
         r"torch\.distributed", r"torch\.hub"),
     "ast.network", "uses the network"),
    (_rx(r"os\.(remove|unlink|rename|renames|replace|rmdir|removedirs|mkdir|makedirs|chmod|"
         r"fchmod|lchmod|chown|fchown|lchown|link|symlink|truncate|ftruncate|write|pwrite|"
         r"writev|mkfifo|mknod|utime|sendfile|chdir|fchdir|chroot|setxattr|removexattr|umask|"
         r"open|dup2|memfd_create)",
         "shutil", "tempfile", r"io\.FileIO", r"os\.(dup|pipe\w*|splice|copy_file_range)",
         r"torch\.save", r"numpy\.(save|savez|"
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
         r"torch\.multiprocessing", r"os\.(register_at_fork|sched_\w+)",
         r"torch\.jit\.(fork|_fork|wait)"),
     "ast.concurrency", "threads, processes, executors or event loops"),
    (_rx(r"unittest\.mock", "mock", r"pytest\.MonkeyPatch", r"importlib\.reload",
         r"triton\.runtime\.driver\.(set_active|reset_active)"),
     "ast.monkeypatch", "patching helpers (or a replaced launch driver)"),
    (_rx(r"sys\.(_getframe\w*|_current_frames|_current_exceptions|modules|exc_info|exception|"
         r"last_traceback|last_exc|last_value|last_type|getrefcount|getobjects|call_tracing|"
         r"_clear_type_cache|_debugmallocstats)",
         r"inspect\.(stack|currentframe|getouterframes|getinnerframes|getframeinfo|trace|"
         r"getmembers\w*|getclosurevars|getattr_static|unwrap|getmodule|getsource\w*)",
         "gc",
         r"traceback\.(extract_stack|walk_stack|walk_tb|StackSummary)",
         r"builtins\.(globals|locals|vars)", "__main__", "sandboxharness", "flashinfer_bench"),
     "ast.introspection", "reaches frames, objects or namespaces it was not given"),
    (_rx(r"os\.(kill|killpg|abort|_exit|setsid|setpgrp|setpgid|pidfd_\w+|tgkill)", "signal",
         r"sys\.exit", r"builtins\.(exit|quit)", "atexit", "resource",
         r"_thread\.interrupt_main"),
     "ast.signal", "signals, kills or exits processes"),
    (_rx("weakref", r"torch\.utils\.(hooks|weak)", r"torch\.autograd\.graph",
         r"torch\.futures", r"torch\.Tensor\.register_\w*hook", r"sys\.set_asyncgen_hooks"),
     "ast.deferred-callback", "runs code later, outside the call (finalizer or hook)"),
    (_rx("mmap", r"torch\.(from_file|frombuffer|UntypedStorage|TypedStorage|\w+Storage)",
         r"torch\.Tensor\.(untyped_storage|storage|_typed_storage|share_memory_|set_|"
         r"is_shared)", r"torch\.cuda\.caching_allocator_\w+", r"numpy\.(frombuffer|ctypeslib)",
         r"multiprocessing\.shared_memory"),
     "ast.shared-storage", "shares, maps or re-points memory the harness reads"),
    (_rx("base64", "binascii", "codecs", "zlib", "bz2", "lzma", "gzip", "quopri", "uu",
         "encodings", r"builtins\.(bytes|bytearray)\.fromhex"),
     "ast.obfuscation", "decodes or decompresses data"),
    (_rx(r"os\.(environ|environb|getenv|getenvb|putenv|unsetenv)"),
     "ast.env-read", "reads or changes environment variables"),
    (_rx("platform", "psutil", "getpass", "pwd", "grp", "sysconfig", "site", "pkg_resources",
         r"uuid\.(getnode|uuid1)",
         r"os\.(uname|getpid|getppid|getpgid|getpgrp|getsid|getuid|geteuid|getgid|getegid|"
         r"getgroups|getresuid|getresgid|getlogin|getloadavg|cpu_count|process_cpu_count|"
         r"sched_getaffinity|times|getcwd|getcwdb|ctermid|ttyname|isatty|get_terminal_size|"
         r"statvfs|fstatvfs|get_exec_path|confstr|sysconf|pathconf|fpathconf|fstat|access|"
         r"device_encoding|get_blocking|get_inheritable)",
         r"os\.path\.(exists|lexists|isfile|isdir|islink|ismount|isjunction|getsize|getmtime|"
         r"getatime|getctime|samefile)",
         r"sys\.(argv|orig_argv|executable|_base_executable|flags|prefix|base_prefix|"
         r"exec_prefix|_xoptions|warnoptions|stdin|__stdin__)",
         r"torch\.cuda\.(memory_allocated|max_memory_allocated|memory_reserved|"
         r"max_memory_reserved|memory_cached|max_memory_cached|memory_stats\w*|"
         r"memory_snapshot|memory_summary|mem_get_info|list_gpu_processes|utilization|"
         r"temperature|power_draw|clock_rate|memory_usage|device_memory_used|"
         r"is_current_stream_capturing|initial_seed|get_rng_state\w*)",
         r"torch\.(initial_seed|get_rng_state)", r"numpy\.random\.get_state",
         r"torch\.cuda\.memory",
         r"random\.getstate", r"triton\.knobs", r"triton\.runtime\.interpreter"),
     "ast.env-probe", "probes the process, machine or evaluation it runs in"),
    (_rx(r"itertools\.(count|cycle)"),
     "ast.global-state", "a counter or cycle kept across calls (counts its calls)"),
    (_rx(r"contextlib\.(ExitStack|AsyncExitStack)"),
     "ast.swallowed-exception", "exit callbacks that can swallow exceptions"),
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
         r"time\.(localtime|gmtime|ctime|asctime|strftime|get_clock_info)",
         r"datetime\.datetime\.(now|utcnow|today)", r"datetime\.date\.today",
         r"torch\.cuda\.(Event|event)", r"torch\.Event", r"triton\.testing\.do_bench\w*"),
     "ast.clock-read", "reads a clock or times itself"),
]

# Attribute names that are suspicious on any object.
ATTR_RULES: dict[str, tuple[str, str]] = {
    **{a: ("ast.introspection", "frame or object-graph access") for a in (
        "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame",
        "tb_next", "gi_frame", "cr_frame", "ag_frame", "gi_code", "__subclasses__",
        "__globals__", "__closure__", "__code__", "__bases__", "__base__", "__mro__",
        "__dict__", "__defaults__", "__kwdefaults__", "__traceback__", "__reduce__",
        "__reduce_ex__", "__getattribute__", "__self__", "__func__", "__wrapped__",
        "cell_contents", "co_consts", "co_names", "co_code", "gi_yieldfrom")},
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
    **{a: ("ast.deferred-callback", "a hook or callback that runs later") for a in (
        "register_hook", "register_post_accumulate_grad_hook", "register_forward_hook",
        "register_forward_pre_hook", "register_full_backward_hook",
        "register_full_backward_pre_hook", "register_backward_hook", "add_done_callback",
        "__del__")},
    **{a: ("ast.shared-storage", "raw or shared storage") for a in (
        "untyped_storage", "_typed_storage", "storage", "share_memory_", "set_", "is_shared",
        "_share_filename_cpu_", "_share_fd_cpu_", "_share_cuda_", "_new_shared",
        "_new_shared_cuda", "_new_using_fd_cpu", "_new_using_filename_cpu", "from_file",
        "_set_from_file", "_set_cdata", "__array_interface__", "__cuda_array_interface__",
        "as_strided_")},
    **{a: ("ast.env-probe", "process or machine probing") for a in (
        "getpid", "getppid", "gethostname", "getfqdn", "uname", "getlogin", "getuid",
        "geteuid")},
    **{a: ("ast.network", "network access") for a in ("create_connection", "urlopen")},
}


def finding(rule_id: str, path: str, line: int, message: str) -> Finding:
    """A finding of ``rule_id``; its severity always comes from ``RULES``."""
    return Finding(tool="ast", rule_id=rule_id, severity=RULES[rule_id].severity, path=path,
                   line=line, message=message)
