"""The campaign proof (issue 11): a triton-params campaign on FlashInfer-Bench's rmsnorm_h4096
(all 14 workloads) from a deliberately weak honest Triton kernel, then one table per round.

    python benchmarks/campaign_proof.py --out OUT            # on the GPU (campaign_proof.sh)
    python benchmarks/campaign_proof.py --out OUT --cpu-smoke   # same flow, CPU, 2 rounds

It builds a dataset (the vendored FIB definition and workloads, the weak solution from
kernels/gpu), generates an audit signing key, runs the real CLI (`campaign run ...
--generator triton-params --audit-log --signing-key`) bounded by BUDGET_S (the rules' own
wall-time budget stops before a round that would not fit; a hard stop keeps the state, which
is atomic), then reads the hash-chained state (loop.state / loop.view) and the archived
verdicts, prints one markdown row per round (hypothesis, signature, candidates, verdict,
full-sweep mean, speedup over the start, reference, FlashInfer) and verifies the audit log.
`--cpu-smoke` uses a hidden-256 copy of the definition, 4 small workloads and the Triton
interpreter. OUT gets table.md, rounds.json, state.json, bundles/, the audit log with its
checkpoints and public key, campaign.log, the policy and rules used, archive.tar.xz (the
verdicts, when small). The campaign itself lives in --work (WORK, default
$TMPDIR/campaign-proof): a second call on a machine still warm with RESUME=1 continues it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.campaign_table import render, rounds_of  # noqa: E402

FIB = REPO / "tests" / "data" / "fib"
DEFINITION = FIB / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"
WORKLOADS = FIB / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl"
WEAK = REPO / "kernels" / "gpu" / "solutions" / "rmsnorm_h4096" / "triton_weak.json"
POLICY = REPO / "policies" / "campaign-gpu.yaml"
RULES = REPO / "benchmarks" / "campaign_rules_h200.yaml"
SMOKE_BATCHES = (1, 3, 8, 24)
CLI = [sys.executable, "-m", "sandboxharness.cli"]


def build_dataset(root: Path, smoke: bool) -> tuple[str, Path]:
    """FIB's layout with one definition, its workloads and the weak start; (name, start)."""
    d = json.loads(DEFINITION.read_text())
    lines = WORKLOADS.read_text().splitlines()
    sol = json.loads(WEAK.read_text())
    if smoke:  # same operator, hidden 256, a few small batches: the interpreter stays quick
        d["name"] = "rmsnorm_h256_smoke"
        d["axes"]["hidden_size"]["value"] = 256
        d["reference"] = d["reference"].replace("== 4096", "== 256")
        lines = [json.dumps({"definition": d["name"], "solution": None, "workload": {
            "uuid": f"smoke-b{b}", "axes": {"batch_size": b},
            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}}},
            "evaluation": None}) for b in SMOKE_BATCHES]
        sol["definition"] = d["name"]
    name, op = d["name"], d["op_type"]
    for sub in ("definitions", "workloads"):
        (root / sub / op).mkdir(parents=True, exist_ok=True)
    (root / "definitions" / op / f"{name}.json").write_text(json.dumps(d, indent=1))
    (root / "workloads" / op / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    start = root / "solutions" / name / "triton_weak.json"
    start.parent.mkdir(parents=True)
    start.write_text(json.dumps(sol, indent=1))
    return name, start


def have_tool(name: str) -> bool:
    from sandboxharness._internal.proc import find_executable
    from sandboxharness.errors import ToolError

    try:
        find_executable(name)
    except ToolError:
        return False
    return True


def write_policy(out: Path, notes: list[str]) -> Path:
    """The campaign policy; where an analyser is not installed here (semgrep travels in a
    carry of its own) it is switched off, and the table says so."""
    doc = yaml.safe_load(POLICY.read_text())
    for tool in ("semgrep", "bandit"):
        if doc["static"].get(tool) and not have_tool(tool):
            doc["static"][tool] = False
            doc["name"] += f"-no-{tool}"
            notes.append(f"{tool} is not installed on this machine: the static stage ran "
                         f"without it (policy {doc['name']})")
    path = out / "policy.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_rules(out: Path, max_wall_s: float, smoke: bool) -> Path:
    doc = yaml.safe_load(RULES.read_text()) or {}
    doc.setdefault("supervisor", {})["max_wall_s"] = max_wall_s
    if smoke:  # wall-clock timing on a shared CPU says nothing about a regression
        doc["supervisor"]["regression_factor"] = 1000
    path = out / "rules.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_bounded(argv: list[str], env: dict[str, str], log: Path, limit_s: float) -> int:
    """The campaign as a subprocess, its progress lines shown as they come and kept in
    ``log``. Past ``limit_s`` it gets SIGTERM (the CLI finishes the append it is in), then
    SIGKILL; the state on disk is whole either way (written atomically)."""
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None  # noqa: S101  PIPE above
            for line in proc.stdout:
                fh.write(line)
                fh.flush()
                if not line.startswith("{"):  # the final JSON status goes to the log only
                    print("  | " + line.rstrip()[:300], flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            print(f"campaign still running after {limit_s:.0f} s: stopping it", flush=True)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
        reader.join(timeout=10)
        return rc


def keep_archive(archive: Path, out: Path, cap: int = 16 << 20) -> str:
    """The verdicts and artifacts the rounds rest on, as one archive file when small enough."""
    if not archive.is_dir():
        return "no archive"
    dest = out / "archive.tar.xz"
    try:
        subprocess.run(["tar", "-C", str(archive.parent), "-I", "xz -1 -T0", "-cf", str(dest),
                        archive.name], check=False, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        dest.unlink(missing_ok=True)
        return "archive: not copied (tar took over 60 s)"
    if dest.exists() and dest.stat().st_size > cap:
        dest.unlink()
        return f"archive larger than {cap >> 20} MiB compressed: not copied"
    return "archive.tar.xz" if dest.exists() else "archive: tar failed"


def prepare(work: Path, out: Path, args: argparse.Namespace, notes: list[str]
            ) -> tuple[str, Path, Path]:
    """A fresh work folder (dataset, keys), or the one a previous call left (``--resume``):
    then the campaign resumes from its state and the wall-time budget is added to what the
    rounds have used so far. Returns (definition, start, rules file)."""
    state = work / "campaign"
    used = 0.0
    if args.resume and (state / "state.json").exists():
        from sandboxharness.loop.state import CampaignState
        from sandboxharness.loop.view import fold

        used = fold(CampaignState.open(state)).wall_s
        notes.append(f"resumed: the rounds had used {used:.0f} s before this call")
        d = next((work / "dataset" / "definitions").rglob("*.json"))
        name = json.loads(d.read_text())["name"]
        start = next((work / "dataset" / "solutions").rglob("*.json"))
    else:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        name, start = build_dataset(work / "dataset", args.cpu_smoke)
        subprocess.run([*CLI, "keys", "generate", "--out", str(work / "keys"), "--name",
                        "campaign-proof"], cwd=REPO, check=True, capture_output=True,
                       text=True, timeout=120)
    rules = write_rules(out, max(1.0, used + args.budget_s - args.reserve_s), args.cpu_smoke)
    return name, start, rules


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "campaign-out")))
    ap.add_argument("--work", type=Path, default=Path(os.environ.get(
        "WORK", Path(tempfile.gettempdir()) / "campaign-proof")),
                    help="campaign folder (state, archive, audit log); wiped unless --resume")
    ap.add_argument("--resume", action="store_true", default=os.environ.get("RESUME") == "1",
                    help="continue the campaign a previous call left in --work (RESUME=1)")
    ap.add_argument("--rounds", type=int, default=None, help="default 8 (2 with --cpu-smoke)")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("BUDGET_S", 420)))
    ap.add_argument("--reserve-s", type=float, default=float(os.environ.get("ROUND_RESERVE_S",
                                                                            120)),
                    help="no round starts with less than this left of the budget")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 4)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SEED", 11)))
    ap.add_argument("--cpu-smoke", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    out, work = args.out.resolve(), args.work.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rounds = args.rounds if args.rounds is not None else (2 if args.cpu_smoke else 8)
    notes: list[str] = []
    name, start, rules = prepare(work, out, args, notes)
    policy = write_policy(out, notes)
    keys, state, log = work / "keys", work / "campaign", work / "audit.jsonl"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.cpu_smoke:
        env["TRITON_INTERPRET"] = "1"
    cmd = [*CLI, "campaign", "run", "--local", str(work / "dataset"), "--definition", name,
           "--start", str(start), "--generator", "triton-params", "--rounds", str(rounds),
           "--state", str(state), "--policy", str(policy), "--rules", str(rules),
           "--jobs", str(args.jobs), "--seed", str(args.seed), "--audit-log", str(log),
           "--signing-key", str(keys / "campaign-proof.key"), "--json"]
    if args.cpu_smoke:
        cmd += ["--backend", "process"]
    print("$ " + " ".join(cmd[2:]), flush=True)
    t_run = time.monotonic()
    rc = run_bounded(cmd, env, out / "campaign.log", args.budget_s)
    run_s = time.monotonic() - t_run
    print(f"campaign exit {rc} after {run_s:.0f} s (0 stopped, 4 needs a human, 2 bad input, "
          "3 harness failure, 143 or <0 stopped at the budget)", flush=True)

    verify = subprocess.run([*CLI, "audit", "verify", str(log), "--public-key",
                             str(keys / "campaign-proof.pub")], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    verified = (f"`sandboxharness audit verify` exit {verify.returncode}: "
                + (verify.stdout + verify.stderr).strip().replace("\n", " / ")[:600])
    for f in (state / "state.json", *work.glob("audit.jsonl*")):
        if f.is_file():
            shutil.copy(f, out / f.name)
    if (state / "bundles").is_dir():
        shutil.copytree(state / "bundles", out / "bundles", dirs_exist_ok=True)
    shutil.copy(keys / "campaign-proof.pub", out / "campaign-proof.pub")
    if not (state / "state.json").exists():
        print("no campaign state was written; see campaign.log:\n"
              + (out / "campaign.log").read_text()[-3000:])
        return 1
    rows, facts = rounds_of(state)
    facts["notes"] = notes + facts.get("notes", [])
    facts |= {"campaign_exit": rc, "campaign_wall_s": round(run_s, 1), "audit": verified,
              "budget_s": args.budget_s, "reserve_s": args.reserve_s, "jobs": args.jobs,
              "rules": "this call's " + json.dumps(yaml.safe_load(rules.read_text())),
              "mode": "cpu-smoke (Triton interpreter)" if args.cpu_smoke else "gpu",
              "total_s": round(time.monotonic() - t0, 1)}
    text = render(rows, facts)
    (out / "table.md").write_text(text)
    (out / "rounds.json").write_text(json.dumps({"rows": rows, "facts": facts}, indent=1,
                                                default=str))
    print(text, flush=True)
    print(f"verdicts: {keep_archive(state / 'archive', out)}", flush=True)  # last: may be slow
    ok = verify.returncode == 0 and any(r["round"] != 0 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
