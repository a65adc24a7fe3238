"""The task bundle: everything an agent is told for one round, hashed.

The bundle is the exact input a generator receives (definition, the policy's constraints,
the current best solution, its signature per regime, the chosen direction, skill excerpts
and the promotion rules in force). Its ``sha256`` goes to the audit log and the bundle to
the campaign's archive, so a reviewer can later see what produced a promoted kernel.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..models import Definition, Policy, Solution
from ..models._base import FrozenModel, canonical_json, sha256_tag
from ..profile.signature import Signature
from ..skills import SkillExcerpt

__all__ = ["TaskBundle", "TaskConstraints", "build_task_bundle", "default_promotion_rules",
           "render_markdown"]


class TaskConstraints(FrozenModel):
    """What the policy allows a candidate, as the agent needs to know it."""

    policy: str
    """The policy's name."""
    policy_sha256: str
    languages: list[str]
    imports_allow: list[str] | None
    """None: any module not denied."""
    imports_deny: list[str]
    forbid_baseline_library: bool
    """The definition's FlashInfer API may not be called."""
    max_sources: int
    max_source_bytes: int
    limits: dict[str, Any]
    """Sandbox limits per process (timeouts, memory, processes, files)."""
    tolerance: dict[str, float]
    dtype_tolerance: dict[str, dict[str, float]]
    required_matched_ratio: float
    trials: int
    heldout: str
    """What the held-out checks are, in words (values are secret)."""


class TaskBundle(FrozenModel):
    definition: dict[str, Any]
    """The Definition document."""
    constraints: TaskConstraints
    best_solution: dict[str, Any] | None = None
    """The current best Solution document (None before a first candidate passes)."""
    signatures: dict[str, Signature | None] = Field(default_factory=dict)
    """Profile signature of the best solution per regime name (None: not profiled)."""
    direction: dict[str, Any] | None = None
    """The round's one direction: id, hypothesis, bottleneck, limiter."""
    skills: list[SkillExcerpt] = Field(default_factory=list)
    promotion_rules: list[str] = Field(default_factory=list)
    round: int | None = None

    @property
    def sha256(self) -> str:
        """``sha256:<hex>`` over the canonical JSON of the whole bundle."""
        return sha256_tag(canonical_json(self.model_dump(mode="json")))


def _constraints(policy: Policy) -> TaskConstraints:
    c = policy.correctness
    return TaskConstraints(
        policy=policy.name, policy_sha256=policy.content_hash(),
        languages=[str(x) for x in policy.languages],
        imports_allow=policy.imports.allow, imports_deny=list(policy.imports.deny),
        forbid_baseline_library=policy.forbid_baseline_library,
        max_sources=policy.max_sources, max_source_bytes=policy.max_source_bytes,
        limits=policy.limits.model_dump(mode="json"),
        tolerance=c.tolerance.model_dump(mode="json"),
        dtype_tolerance={k: v.model_dump(mode="json") for k, v in c.dtype_tolerance.items()},
        required_matched_ratio=c.required_matched_ratio, trials=c.trials,
        heldout=(f"every var axis also tried at {c.heldout_values} and {c.heldout_count} "
                 "secret sizes drawn per evaluation; later trials change the input "
                 "distribution (scaled, outliers, zero rows, negative)"),
    )


def default_promotion_rules(policy: Policy) -> list[str]:
    """The promotion rules the harness enforces under ``policy``, in words."""
    p = policy.promotion
    rules = [
        "Every stage in " + ", ".join(policy.required_stages) + " must pass; a skipped "
        "required stage rejects.",
        "Every workload must be correct on every trial and every repeat (infrastructure "
        "failures are retried, candidate failures are not).",
        f"GPU speed is judged per regime over {p.min_repeats} independent repeats against "
        f"the {p.baseline} baseline; a win on some regimes only is archived, never promoted.",
        "Global promotion needs a lower full-sweep mean latency than the current best mean, "
        "and no regime slower than the current best beyond the measured noise floor.",
        "Boundary shapes are replayed at a high trial count before a promotion stands.",
        "Mean, p95 and variance decide; speedup is reported, not used to decide.",
        "Each round ends in exactly one verdict: archive, promote or reject (the best is "
        "restored).",
    ]
    if p.min_speedup is not None:
        rules.append(f"The speedup over the {p.baseline} must be at least {p.min_speedup}x.")
    if not p.gate_speed_on_cpu:
        rules.append("On a CPU, wall-clock time never gates promotion.")
    return rules


def _as_dict(doc: Definition | Solution | dict[str, Any]) -> dict[str, Any]:
    return doc if isinstance(doc, dict) else doc.to_json_dict()


def build_task_bundle(definition: Definition | dict[str, Any], policy: Policy, *,
                      best: Solution | dict[str, Any] | None = None,
                      signatures: dict[str, Signature | None] | None = None,
                      direction: dict[str, Any] | None = None,
                      skills: tuple[SkillExcerpt, ...] | list[SkillExcerpt] = (),
                      round: int | None = None,
                      promotion_rules: list[str] | None = None) -> TaskBundle:
    """The bundle for one round (``promotion_rules`` defaults to the policy's, in words)."""
    return TaskBundle(
        definition=_as_dict(definition), constraints=_constraints(policy),
        best_solution=None if best is None else _as_dict(best),
        signatures=dict(signatures or {}), direction=direction, skills=list(skills),
        promotion_rules=(default_promotion_rules(policy) if promotion_rules is None
                         else list(promotion_rules)),
        round=round)


# --- markdown ------------------------------------------------------------------------------

def _fence(text: str, lang: str = "") -> str:
    """A code fence longer than any backtick run inside ``text`` (sources are untrusted)."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _cell(value: object) -> str:
    return "-" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def _definition_md(d: dict[str, Any]) -> list[str]:
    out = [f"## Definition `{d.get('name')}` (op_type `{d.get('op_type')}`)", ""]
    if d.get("description"):
        out += [str(d["description"]), ""]
    out += ["| axis | kind | value |", "|---|---|---|"]
    for name, ax in (d.get("axes") or {}).items():
        out.append(f"| {_cell(name)} | {_cell(ax.get('type'))} | {_cell(ax.get('value'))} |")
    out += ["", "| tensor | role | shape | dtype |", "|---|---|---|---|"]
    for role in ("inputs", "outputs"):
        for name, t in (d.get(role) or {}).items():
            shape = "scalar" if t.get("shape") is None else "[" + ", ".join(t["shape"]) + "]"
            out.append(f"| {_cell(name)} | {role[:-1]} | {_cell(shape)} | "
                       f"{_cell(t.get('dtype'))} |")
    if d.get("constraints"):
        out += ["", "Constraints: " + "; ".join(f"`{c}`" for c in d["constraints"])]
    out += ["", "Reference (the semantics to match):", "", _fence(str(d.get("reference", "")),
                                                                "python"), ""]
    return out


def _constraints_md(c: TaskConstraints) -> list[str]:
    tol = ", ".join(f"{k}={v}" for k, v in c.tolerance.items())
    out = ["## Constraints (policy `" + c.policy + "`)", "",
           f"- languages: {', '.join(c.languages)}",
           f"- imports allowed: {'any not denied' if c.imports_allow is None else ', '.join(c.imports_allow)}",  # noqa: E501
           f"- imports denied: {', '.join(c.imports_deny) or 'none'}",
           f"- calling the definition's FlashInfer API: "
           f"{'forbidden' if c.forbid_baseline_library else 'allowed'}",
           f"- at most {c.max_sources} source files, {c.max_source_bytes} bytes each",
           f"- tolerance: {tol}, matched ratio {c.required_matched_ratio}",
           f"- trials per workload: {c.trials}; held-out: {c.heldout}",
           "- limits: " + ", ".join(f"{k}={v}" for k, v in c.limits.items())]
    out += [f"- tolerance for {k}: " + ", ".join(f"{a}={b}" for a, b in v.items())
            for k, v in c.dtype_tolerance.items()]
    return [*out, ""]


def _best_md(best: dict[str, Any] | None) -> list[str]:
    if best is None:
        return ["## Current best", "", "None yet: the reference is the baseline.", ""]
    spec = best.get("spec") or {}
    out = [f"## Current best `{best.get('name')}`", "",
           f"language {spec.get('language')}, entry point `{spec.get('entry_point')}`", ""]
    for src in best.get("sources") or []:
        out += [f"`{src.get('path')}`:", "", _fence(str(src.get("content", ""))), ""]
    return out


def _signatures_md(sigs: dict[str, Signature | None]) -> list[str]:
    if not sigs:
        return []
    out = ["## Profile signature per regime", "",
           "| regime | kernel | bottleneck | limiter | us | SM % | mem % | occupancy % "
           "(ach/theo) | regs | waves/SM |", "|---|---|---|---|---|---|---|---|---|---|"]
    for regime, s in sigs.items():
        if s is None:
            out.append(f"| {_cell(regime)} | not profiled | | | | | | | | |")
            continue
        out.append(f"| {_cell(regime)} | {_cell(s.kernel[:60])} | {s.bottleneck} | "
                   f"{_cell(s.limiter)} | {s.duration_us:.2f} | {_cell(s.sm_throughput_pct)} | "
                   f"{_cell(s.mem_throughput_pct)} | {_cell(s.achieved_occupancy_pct)}/"
                   f"{_cell(s.theoretical_occupancy_pct)} | {_cell(s.registers_per_thread)} | "
                   f"{_cell(s.waves_per_sm)} |")
    return [*out, ""]


def render_markdown(bundle: TaskBundle) -> str:
    """The bundle as one markdown document for an agent (its hash in the title block)."""
    d = bundle.definition
    title = f"# Task: {d.get('name')}" + ("" if bundle.round is None
                                          else f", round {bundle.round}")
    out = [title, "", f"Bundle `{bundle.sha256}`.", ""]
    out += _definition_md(d) + _constraints_md(bundle.constraints) + _best_md(
        bundle.best_solution) + _signatures_md(bundle.signatures)
    if bundle.direction:
        out += ["## Direction for this round", ""]
        out += [f"- {k}: {_cell(v)}" for k, v in bundle.direction.items()] + [""]
    if bundle.skills:
        out += ["## Skills", ""]
        for ex in bundle.skills:
            out += [f"### {ex.heading} ({ex.skill} {ex.version}, `{ex.sha256[:19]}`)", "",
                    ex.text, ""]
    out += ["## Promotion rules in force", ""]
    out += [f"{i}. {r}" for i, r in enumerate(bundle.promotion_rules, 1)] + [""]
    out += ["## What to hand back", "",
            "A FlashInfer-Bench Solution document (JSON) whose `definition` is "
            f"`{d.get('name')}`: name, author, spec (language, target_hardware, "
            "entry_point `file.py::function`, destination_passing_style), sources "
            "(path, content). The harness evaluates it in a sandbox and decides; nothing "
            "you report about its speed or correctness is taken on trust.", ""]
    return "\n".join(out)
