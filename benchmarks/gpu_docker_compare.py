"""Every GPU stage through the Docker backend and through the process backend, same kernels:
a table of verdicts and timings, docker vs process (run by benchmarks/gpu_docker.sh).

    python benchmarks/gpu_docker_compare.py --out DIR [--budget-s 330] [--jobs 6]

1. probe: one GPU job in the hardened container (offline image): uid, the lane's device nodes,
   CUDA, AF_INET refused, read-only binds, the harness invisible, nvcc / compute-sanitizer /
   ncu found and run (ncu on a real CUDA kernel);
2. verdicts (in parallel, each case once per backend): the planted bugs under all four
   sanitizer tools, the honest CUDA kernels of both bindings (torch extension, TVM-FFI), the
   FlashInfer-Bench TVM-FFI sample and the GPU red-team cases;
3. timings (one at a time, alone on the GPU): honest kernels, process then docker, per workload.
Writes DIR/gpu_docker.md and DIR/gpu_docker.json as it goes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_validate as gv  # noqa: E402

T0 = time.monotonic()
BACKENDS = ("process", "docker")
PROBE = r'''
import json, os, shutil, socket, subprocess, sys
import torch
f = {"uid": os.getuid(), "devices": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")),
     "cuda_count": torch.cuda.device_count(), "gpu": torch.cuda.get_device_name(0),
     "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "harness_visible": os.path.exists(HARNESS)}
x = torch.ones(1 << 20, device="cuda"); f["cuda_sum"] = float(x.sum())
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM); f["inet"] = "allowed"
except OSError as e:
    f["inet"] = type(e).__name__
for p in ("/usr/shx-probe", sys.prefix + "/shx-probe", "/shx-probe"):
    try:
        open(p, "w").close(); f["writable:" + p] = True
    except OSError as e:
        f["writable:" + p] = e.strerror
tmp = os.environ["TMPDIR"]
f["tmp_owner_is_me"] = os.stat(tmp).st_uid == os.getuid()
for tool in ("nvcc", "compute-sanitizer", "ncu"):
    exe = shutil.which(tool); f[tool] = exe
    if exe:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        f[tool + "_version"] = (r.stdout.strip().splitlines() or ["rc %d" % r.returncode])[-1]
script = os.path.join(tmp, "k.py")
open(script, "w").write("import torch\nx = torch.randn(1 << 20, device='cuda')\n"
                        "(x * 2).sum().item()\ntorch.cuda.synchronize()\n")
if f["ncu"]:
    r = subprocess.run([f["ncu"], "--clock-control", "none", "--target-processes", "all", "--csv",
                        "--metrics", "gpu__time_duration.sum", sys.executable, script],
                       capture_output=True, text=True, timeout=240, env=dict(os.environ))
    f["ncu_rc"] = r.returncode
    f["ncu_rows"] = [l for l in r.stdout.splitlines() if "gpu__time_duration" in l][:3]
    f["ncu_tail"] = (r.stdout + r.stderr)[-600:]
if f["compute-sanitizer"]:
    r = subprocess.run([f["compute-sanitizer"], "--tool", "memcheck", sys.executable, script],
                       capture_output=True, text=True, timeout=240,
                       env={**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    f["sanitizer_rc"] = r.returncode
    f["sanitizer_tail"] = (r.stdout + r.stderr)[-300:]
open("/job/out/facts.json", "w").write(json.dumps(f))
def run(*a):
    return None
'''


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def probe(out: Path) -> dict[str, Any]:
    """One hardened GPU job through DockerSandbox: what the container sees and can run."""
    import tempfile

    from sandboxharness.models.policy import Limits
    from sandboxharness.sandbox.docker import DockerSandbox
    from sandboxharness.sandbox.interface import JobSpec
    from sandboxharness.stages.compile_cuda import gpu_env
    from sandboxharness.stages.session import WorkerSession

    root = Path(tempfile.mkdtemp(prefix="shx-probe-"))
    dirs = {k: root / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    (dirs["src"] / "probe.py").write_text(PROBE.replace("HARNESS", repr(str(REPO / "sandboxharness"))))
    job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                  out_dir=dirs["out"], tmp_dir=dirs["tmp"], gpu=True,
                  limits=Limits(memory_mb=32768, max_processes=512, max_open_files=4096,
                                cpu_time_s=1800),
                  env={**gpu_env(), "CUDA_VISIBLE_DEVICES": "0"})
    sandbox = DockerSandbox(cpus=4.0)
    t0 = time.monotonic()
    facts: dict[str, Any] = {"describe": sandbox.describe(), "isolation": sandbox.isolation()}
    session = WorkerSession(sandbox.start(job, deadline_s=400), 400)
    try:
        p = session.paths
        facts["hello"] = str(session.request(
            {"op": "hello", "role": "candidate", "entry_file": "probe.py", "entry_func": "run",
             "dps": False, "preload_triton": False, "src": p.src, "data": p.data,
             "device": "cuda"}, 390))[:300]
    except Exception as exc:  # noqa: BLE001  recorded: the facts say how far it got
        facts["hello_error"] = f"{type(exc).__name__}: {exc}"[:600]
    finally:
        info = session.close()
        facts["exit"] = {"rc": info.returncode, "stderr_tail": info.stderr[-1500:]}
        sandbox.close()
    facts["wall_s"] = round(time.monotonic() - t0, 2)
    f = dirs["out"] / "facts.json"
    facts["inside"] = json.loads(f.read_text()) if f.is_file() else None
    (out / "probe.json").write_text(json.dumps(facts, indent=1))
    return facts


def verdict_tasks() -> list[dict[str, Any]]:
    quick = gv.policy_dict("gpu-docker", benchmark={"iterations": 10, "warmup": 2})
    tasks = (gv.gpu_tasks({"planted"}, gv.policy_dict("gpu-planted"))
             + [t for t in gv.gpu_tasks({"honest", "fib-sample"}, quick)
                if "cuda" in t["label"] or "example_agent" in t["label"]]
             + gv.redteam_tasks())
    return [dict(t, backend=b) for t in tasks for b in BACKENDS]


def timed_tasks() -> list[dict[str, Any]]:
    pol = gv.policy_dict("gpu-timed", benchmark={"iterations": 40, "warmup": 5},
                         correctness={"max_workloads": 2, "trials": 1})
    pol["sanitizer"] = {**pol["sanitizer"], "tools": ["memcheck"]}
    keep = ("axpy_f32/triton_honest", "rmsnorm_h4096/triton_honest", "axpy_f32/cuda_torch_honest",
            "gemm_n4096_k4096/example_agent_solution", "axpy_f32/cuda_tvmffi_honest")
    # first what is not timed elsewhere: the TVM-FFI axpy last (its build is in the verdicts)
    tasks = sorted((t for t in gv.gpu_tasks({"honest", "fib-sample"}, pol) if t["label"] in keep),
                   key=lambda t: keep.index(t["label"]))
    return [dict(t, backend=b) for t in tasks for b in BACKENDS]


def _row(r: dict[str, Any]) -> str:
    ok, got = gv.check(r) if "skip" not in r else (False, "skipped: " + r["skip"])
    st = r.get("stages") or {}
    return (f"| {r['label']} | {r['backend']} | {gv.cell(r['expected'])} | {gv.cell(got)} | "
            f"{'yes' if ok else 'NO'} | {gv.fmt(r.get('wall_s'), 3)} | "
            + " | ".join(gv.fmt((st.get(k) or {}).get("s"), 3)
                         for k in ("compile", "correctness", "sanitizer", "benchmark")) + " |")


def markdown(env: dict[str, Any], pr: dict[str, Any] | None, verdicts: list[dict[str, Any]],
             timed: list[dict[str, Any]]) -> str:
    L = ["# Docker vs process backend on the GPU (benchmarks/gpu_docker_compare.py)", ""]
    L += [f"- {k}: {v}" for k, v in env.items()] + [""]
    if pr is not None:
        L += ["## Probe: one hardened GPU job in the container", "", "```",
              json.dumps(pr, indent=1)[:6000], "```", ""]
    L += ["## Verdicts (each case through both backends)", "",
          "| case | backend | expected | got | ok | wall s | compile | correctness | sanitizer "
          "| benchmark |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    L += [_row(r) for r in sorted(verdicts, key=lambda r: (r["label"], r["backend"]))]
    same = {}
    for r in verdicts:
        same.setdefault(r["label"], {})[r["backend"]] = tuple(r.get("codes") or [r.get("decision")])
    differ = [k for k, v in same.items() if len(set(v.values())) > 1 or len(v) < 2]
    L += ["", f"Same decision and reason codes through both backends: "
          f"{len(same) - len(differ)} of {len(same)}" + (f"; differ: {differ}" if differ else ""),
          "", "## Timings (alone on the GPU; stage medians per workload)", "",
          "| kernel | axes | process ms | docker ms | docker/process | process disp. | "
          "docker disp. |", "| --- | --- | --- | --- | --- | --- | --- |"]
    by = {(r["label"], r["backend"]): r for r in timed}
    for label in dict.fromkeys(r["label"] for r in timed):
        p, d = by.get((label, "process"), {}), by.get((label, "docker"), {})
        pb = {json.dumps(b["axes"], sort_keys=True): b for b in p.get("bench") or []}
        db = {json.dumps(b["axes"], sort_keys=True): b for b in d.get("bench") or []}
        for ax in dict.fromkeys([*pb, *db]):
            a, b = pb.get(ax, {}), db.get(ax, {})
            ratio = (b["median_ms"] / a["median_ms"]) if a and b else None
            L.append(f"| {label} | {ax} | {gv.fmt(a.get('median_ms'))} | "
                     f"{gv.fmt(b.get('median_ms'))} | {gv.fmt(ratio, 3)} | "
                     f"{gv.fmt(a.get('dispersion'), 2)} | {gv.fmt(b.get('dispersion'), 2)} |")
        for r in (p, d):
            if r and "error" in r:
                L.append(f"| {label} | {r['backend']} error | {gv.cell(r['error'][:200])} | | | | |")
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    ap.add_argument("--budget-s", type=float, default=330.0)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--skip", default="", help="comma list: probe,verdicts,timed")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**gv.environment(), "image": os.environ.get("SANDBOXHARNESS_DOCKER_IMAGE", "?")}
    pr, verdicts, timed = None, [], []

    def dump() -> None:
        (args.out / "gpu_docker.json").write_text(json.dumps(
            {"environment": env, "probe": pr, "verdicts": verdicts, "timed": timed},
            indent=1, default=str))
        (args.out / "gpu_docker.md").write_text(markdown(env, pr, verdicts, timed))

    if "probe" not in skip:
        try:
            pr = probe(args.out)
        except Exception as exc:  # noqa: BLE001
            pr = {"error": f"{type(exc).__name__}: {exc}"[:800]}
        log(f"probe: {json.dumps(pr)[:1500]}")
        dump()
    if "verdicts" not in skip:
        import multiprocessing as mp

        tasks = verdict_tasks()
        log(f"verdicts: {len(tasks)} evaluations, {args.jobs} in parallel")
        with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
            futs = {pool.submit(gv.evaluate, t): t for t in tasks}
            for fut in as_completed(futs):
                if time.monotonic() - T0 > args.budget_s * 0.55:  # leave the timed section room
                    for other in futs:
                        other.cancel()
                t = futs[fut]
                try:
                    r = fut.result()
                except CancelledError:
                    r = {**{k: t[k] for k in ("label", "group", "expected", "backend")},
                         "skip": "time budget"}
                except Exception as exc:  # noqa: BLE001
                    r = {"label": t["label"], "group": t["group"], "expected": t["expected"],
                         "backend": t["backend"], "error": f"worker crashed: {exc}"}
                r["finding_expected"] = t.get("finding_expected")
                verdicts.append(r)
                if "skip" in r:
                    continue
                log(f"{r['backend']:7s} {r['label']}: {gv.check(r)} in {gv.fmt(r.get('wall_s'), 3)} s")
                dump()
    if "timed" not in skip:
        for t in timed_tasks():
            if time.monotonic() - T0 > args.budget_s - 40:
                timed.append({**{k: t[k] for k in ("label", "group", "expected", "backend")},
                              "skip": "time budget"})
                continue
            r = gv.evaluate(t)
            timed.append(r)
            log(f"timed {r['backend']:7s} {r['label']}: "
                f"{[(b['axes'], round(b['median_ms'], 4)) for b in r.get('bench') or []]}"
                f"{' ' + r['error'][:300] if 'error' in r else ''}")
            dump()
    dump()
    print((args.out / "gpu_docker.md").read_text())


if __name__ == "__main__":
    main()
