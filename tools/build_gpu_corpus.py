"""Build the GPU corpus: FIB Solution JSON for planted-bug kernels, GPU tricks and honest GPU
kernels (CUDA with both bindings, Triton), plus small definitions/workloads and manifest.json.

    python -m tools.build_gpu_corpus           # (re)write kernels/gpu's generated files
    python -m tools.build_gpu_corpus --check   # exit 1 if one is stale

Sources live in kernels/gpu/src/<definition>/; the FlashInfer-Bench sample (gemm, TVM-FFI) is
kept verbatim as src/gemm_n4096_k4096/example_agent_solution.json.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from . import KERNELS, REPO

HERE = KERNELS / "gpu"
SRC = HERE / "src"

AXPY = {
    "name": "axpy_f32",
    "op_type": "axpy",
    "description": "z = 2*x + y over float32 vectors (GPU corpus: planted-bug kernels).",
    "tags": ["status:verified", "corpus:sandboxharness-gpu"],
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"z": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\n\ndef run(x, y):\n    return 2.0 * x + y\n",
}
# n is never a multiple of 128, so a one-element overrun stays inside the caching allocator's
# 512-byte rounding in a normal run (outputs right) and only the sanitizer (allocator off) sees it
WORKLOADS = {
    "axpy_f32": [{"n": 1000}, {"n": 4000}, {"n": 1048573}],
    "rmsnorm_h4096": [{"batch_size": 1}, {"batch_size": 170}, {"batch_size": 8804}],
    "gemm_n4096_k4096": [{"M": 1}, {"M": 256}, {"M": 2053}],
}
INPUTS = {"axpy_f32": ["x", "y"], "rmsnorm_h4096": ["hidden_states", "weight"],
          "gemm_n4096_k4096": ["A", "B"]}

# (stem, definition, language, binding, files, entry, dps, kind, expected, note)
CASES = [
    ("cuda_tvmffi_honest", "axpy_f32", "cuda", "tvm-ffi", ["honest_tvmffi.cu"],
     "honest_tvmffi.cu::run", True, "honest", "promote", ""),
    ("cuda_torch_honest", "axpy_f32", "cuda", "torch",
     ["honest_torch/axpy_kernel.cu", "honest_torch/binding.cpp"], "binding.cpp::run", True,
     "honest", "promote", "torch C++/CUDA extension binding"),
    ("triton_honest", "axpy_f32", "triton", None, ["triton_honest.py"], "triton_honest.py::run",
     True, "honest", "promote", ""),
    ("bug_oob_read", "axpy_f32", "cuda", "tvm-ffi", ["bug_oob_read.cu"], "bug_oob_read.cu::run",
     True, "planted", "SANITIZER_MEMCHECK", "Invalid __global__ read"),
    ("bug_oob_write", "axpy_f32", "cuda", "tvm-ffi", ["bug_oob_write.cu"],
     "bug_oob_write.cu::run", True, "planted", "SANITIZER_MEMCHECK", "Invalid __global__ write"),
    ("bug_smem_race", "axpy_f32", "cuda", "tvm-ffi", ["bug_smem_race.cu"],
     "bug_smem_race.cu::run", True, "planted", "SANITIZER_RACECHECK", "Race reported"),
    ("bug_missing_sync", "axpy_f32", "cuda", "tvm-ffi", ["bug_missing_sync.cu"],
     "bug_missing_sync.cu::run", True, "planted", "SANITIZER_RACECHECK", "Race reported"),
    ("bug_uninit_read", "axpy_f32", "cuda", "tvm-ffi", ["bug_uninit_read.cu"],
     "bug_uninit_read.cu::run", True, "planted", "SANITIZER_INITCHECK",
     "Uninitialized __global__ memory read"),
    ("bug_triton_oob_read", "axpy_f32", "triton", None, ["triton_oob_read.py"],
     "triton_oob_read.py::run", True, "planted", "SANITIZER_MEMCHECK",
     "Invalid __global__ read"),
    ("trick_hang_under_sanitizer", "axpy_f32", "triton", None,
     ["trick_hang_under_sanitizer.py"], "trick_hang_under_sanitizer.py::run", True, "planted",
     "TIMEOUT", ""),
    ("triton_honest", "rmsnorm_h4096", "triton", None, ["triton_honest.py"],
     "triton_honest.py::run", True, "honest", "promote", ""),
    ("triton_weak", "rmsnorm_h4096", "triton", None, ["triton_weak.py"],
     "triton_weak.py::run", True, "honest", "promote",
     "correct but slow on purpose (BLOCK 64, one warp): the campaign proof's starting point"),
    ("trick_side_stream", "rmsnorm_h4096", "triton", None, ["trick_side_stream.py"],
     "trick_side_stream.py::run", True, "trick", "not-faster",
     "its time must not be below the honest kernel's"),
    ("trick_cache_repeat", "rmsnorm_h4096", "triton", None, ["trick_cache_repeat.py"],
     "trick_cache_repeat.py::run", True, "trick", "not-faster",
     "its time must not be below the honest kernel's"),
]


def _workloads(name: str) -> str:
    lines = []
    for axes in WORKLOADS[name]:
        wid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"shx-gpu/{name}/{sorted(axes.items())}"))
        lines.append(json.dumps({"definition": name, "solution": None, "workload": {
            "uuid": wid, "axes": axes, "inputs": {k: {"type": "random"} for k in INPUTS[name]}},
            "evaluation": None}))
    return "\n".join(lines) + "\n"


def build() -> dict[Path, str]:
    """Every generated file, path -> exact text."""
    out = {HERE / "definitions" / "axpy_f32.json": json.dumps(AXPY, indent=2) + "\n"}
    for name in WORKLOADS:
        out[HERE / "workloads" / f"{name}.jsonl"] = _workloads(name)
    manifest = []
    for stem, definition, lang, binding, files, entry, dps, kind, expected, note in CASES:
        spec: dict[str, Any] = {"language": lang, "target_hardware": ["H100", "H200"],
                                "entry_point": entry, "destination_passing_style": dps}
        if binding:
            spec["binding"] = binding
        sources = [{"path": Path(f).name,
                    "content": (SRC / definition / f).read_text(encoding="utf-8")} for f in files]
        sol = {"name": f"{definition}__{stem}", "definition": definition,
               "author": "sandboxharness-gpu-corpus", "spec": spec, "sources": sources,
               "description": note}
        path = HERE / "solutions" / definition / f"{stem}.json"
        out[path] = json.dumps(sol, indent=2) + "\n"
        manifest.append({"id": f"{definition}/{stem}", "solution": str(path.relative_to(HERE)),
                         "definition": definition, "kind": kind, "expected": expected,
                         "note": note})
    fib = SRC / "gemm_n4096_k4096" / "example_agent_solution.json"
    path = HERE / "solutions" / "gemm_n4096_k4096" / "example_agent_solution.json"
    out[path] = fib.read_text(encoding="utf-8")
    manifest.append({"id": "gemm_n4096_k4096/example_agent_solution",
                     "solution": str(path.relative_to(HERE)), "definition": "gemm_n4096_k4096",
                     "kind": "fib-sample", "expected": "runs",
                     "note": "FlashInfer-Bench sample, CUDA + TVM-FFI (no binding field)"})
    out[HERE / "manifest.json"] = json.dumps({"schema_version": 1, "cases": manifest},
                                             indent=2) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if a generated file is stale")
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        stale = sorted(p for p, text in files.items()
                       if not p.exists() or p.read_text(encoding="utf-8") != text)
        for p in stale:
            print(f"stale: {p.relative_to(REPO)}")
        return 1 if stale else 0
    for path, text in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    print(f"{sum(p.parent.parent == HERE / 'solutions' for p in files)} solutions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
