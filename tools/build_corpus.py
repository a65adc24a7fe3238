"""Build the kernel corpus: FlashInfer-Bench Solution JSON from readable sources.

Sources live in ``kernels/src/`` (one ``.py`` file per solution, or a folder for a
multi-file one); ``kernels/src/corpus.toml`` says what each one is.  This tool
writes

* ``kernels/solutions/<definition>/<stem>.json``  (honest, wrong, forbidden examples)
* ``kernels/examples.json`` (every example solution with its expected verdict)
* ``kernels/redteam/<id>.json`` and ``kernels/redteam/manifest.json``

A module docstring in ``kernels/src`` is a *corpus annotation*: it becomes the
solution's ``description`` (and, for red-team cases, the manifest's attack text and
public source) and is stripped from the shipped source, so that no detector can
pass by reading the annotation instead of the code.

Usage::

    python -m tools.build_corpus           # (re)write every generated file
    python -m tools.build_corpus --check   # exit 1 if anything is stale or orphaned

Deterministic: same inputs, same bytes (sorted, fixed indentation, no timestamps).
"""

from __future__ import annotations

import argparse
import ast
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxharness.models import ReasonCode, Solution

from . import KERNELS, REPO

SRC = KERNELS / "src"
TARGET_HARDWARE = ["H100", "H200", "B200"]
VERDICTS_WITHOUT_CODE = {"promote"}
STAGES = {"intake", "static", "policy", "compile", "correctness", "sanitizer", "benchmark"}


@dataclass(frozen=True)
class Annotation:
    title: str
    body: str
    sources: list[str]


def _reason_codes() -> set[str]:
    return {c.value for c in ReasonCode}


def split_docstring(text: str, where: str) -> tuple[str, str]:
    """(module docstring, source without it); the docstring is required."""
    tree = ast.parse(text, filename=where)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        raise SystemExit(f"{where}: a corpus source must start with a module docstring")
    lines = text.splitlines(keepends=True)
    rest = lines[first.end_lineno:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return first.value.value, "".join(rest)


def parse_annotation(doc: str) -> Annotation:
    paragraphs = [p.strip() for p in doc.strip().split("\n\n") if p.strip()]
    title = " ".join(paragraphs[0].split())
    body: list[str] = []
    sources: list[str] = []
    for para in paragraphs[1:]:
        if para.startswith("Source:") or para.startswith("Sources:"):
            for line in para.split(":", 1)[1].splitlines():
                line = line.strip().lstrip("-").strip()
                if line:
                    sources.append(line)
        else:
            body.append(" ".join(para.split()))
    return Annotation(title=title, body=" ".join(body), sources=sources)


def load_sources(src: Path, entry_file: str) -> tuple[list[dict[str, str]], Annotation]:
    """Shipped sources (docstrings stripped) and the entry file's annotation."""
    if src.is_dir():
        files = sorted(p for p in src.rglob("*.py"))
        named = [(p.relative_to(src).as_posix(), p) for p in files]
    else:
        named = [(entry_file, src)]
    sources: list[dict[str, str]] = []
    annotation: Annotation | None = None
    for rel, path in named:
        doc, code = split_docstring(path.read_text(encoding="utf-8"), str(path))
        if rel == entry_file:
            annotation = parse_annotation(doc)
        sources.append({"path": rel, "content": code})
    if annotation is None:
        raise SystemExit(f"{src}: entry file {entry_file!r} is not among its sources")
    return sources, annotation


def check_signature(item: dict[str, Any], sources: list[dict[str, str]],
                    definition: dict[str, Any]) -> None:
    """The entry function takes the definition's inputs (then outputs, for DPS)."""
    entry_file, func = item["entry"].split("::")
    code = next(s["content"] for s in sources if s["path"] == entry_file)
    fn = next((n for n in ast.parse(code).body
               if isinstance(n, ast.FunctionDef) and n.name == func), None)
    if fn is None:
        assigned = any(isinstance(n, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == func for t in n.targets)
                       for n in ast.parse(code).body)
        if assigned or item.get("expected") == "COMPILE_ERROR":
            return  # bound at import time (e.g. a closure); checked when it is called
        raise SystemExit(f"{item['src']}: no top-level function {func!r}")
    want = list(definition["inputs"])
    if item.get("dps", True):
        want += list(definition["outputs"])
    got = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    required = got[: len(got) - len(fn.args.defaults)]
    if len(required) > len(want) or len(got) < len(want):
        raise SystemExit(f"{item['src']}: {func}{tuple(got)} does not take {tuple(want)}")


def describe(ann: Annotation, expected: str) -> str:
    verdict = "promote" if expected == "promote" else f"reject ({expected})"
    text = ann.title if not ann.body else f"{ann.title} {ann.body}"
    return f"{text} Expected verdict: {verdict}."


def build_solution(item: dict[str, Any], name: str, author: str,
                   definitions: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], Annotation]:
    defn = definitions.get(item["definition"])
    if defn is None:
        raise SystemExit(f"{item['src']}: unknown definition {item['definition']!r}")
    entry_file = item["entry"].split("::")[0]
    sources, ann = load_sources(SRC / item["src"], entry_file)
    check_signature(item, sources, defn)
    doc = {
        "name": name,
        "definition": item["definition"],
        "author": author,
        "description": describe(ann, item["expected"]),
        "spec": {
            "language": item["language"],
            "target_hardware": TARGET_HARDWARE,
            "entry_point": item["entry"],
            "dependencies": [],
            "destination_passing_style": item.get("dps", True),
        },
        "sources": sources,
    }
    Solution.model_validate(doc)
    return doc, ann


def render(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _check_expected(item: dict[str, Any], codes: set[str]) -> None:
    for code in [item["expected"], *item.get("also", [])]:
        if code not in codes and code not in VERDICTS_WITHOUT_CODE:
            raise SystemExit(f"{item['src']}: unknown reason code {code!r}")


def build() -> dict[Path, str]:
    """Every generated file, path -> exact text."""
    config = tomllib.loads((SRC / "corpus.toml").read_text(encoding="utf-8"))
    codes = _reason_codes()
    definitions = {
        p.stem: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((KERNELS / "definitions").glob("*.json"))
    }
    out: dict[Path, str] = {}

    for item in config["solution"]:
        _check_expected(item, codes)
        stem = Path(item["src"]).name.removesuffix(".py")
        name = f"{item['definition']}__{stem}"
        doc, _ = build_solution(item, name, "sandboxharness-corpus", definitions)
        out[KERNELS / "solutions" / item["definition"] / f"{stem}.json"] = render(doc)

    examples = []
    for item in config["solution"]:
        stem = Path(item["src"]).name.removesuffix(".py")
        examples.append({
            "solution": f"solutions/{item['definition']}/{stem}.json",
            "definition": f"definitions/{item['definition']}.json",
            "workloads": f"workloads/{item['definition']}.jsonl",
            "kind": item["kind"],
            "expect": "promote" if item["expected"] == "promote" else "reject",
            "codes": [] if item["expected"] == "promote" else [item["expected"]],
            "also_acceptable": item.get("also", []),
        })
    out[KERNELS / "examples.json"] = render({
        "schema_version": 1,
        "about": "Example solutions (kernels/solutions) and their expected verdicts; paths are "
                 "relative to this file. 'codes' must all appear in a rejection; "
                 "'also_acceptable' are codes an earlier or later layer may give instead. "
                 "Generated by tools/build_corpus.py from kernels/src/corpus.toml.",
        "examples": examples,
    })

    cases = []
    for item in config.get("redteam", []):
        _check_expected(item, codes)
        if item["caught_by"] not in STAGES:
            raise SystemExit(f"{item['src']}: caught_by must be one of {sorted(STAGES)}")
        case_id = Path(item["src"]).name.removesuffix(".py")
        doc, ann = build_solution(item, f"rt_{case_id}", "sandboxharness-redteam", definitions)
        if not ann.sources:
            raise SystemExit(f"{item['src']}: a red-team docstring needs a 'Source:' paragraph")
        out[KERNELS / "redteam" / f"{case_id}.json"] = render(doc)
        case = {
            "id": case_id,
            "solution": f"{case_id}.json",
            "definition": item["definition"],
            "definition_file": f"../definitions/{item['definition']}.json",
            "workloads_file": f"../workloads/{item['definition']}.jsonl",
            "expected": item["expected"],
            "also_acceptable": item.get("also", []),
            "caught_by": item["caught_by"],
            "needs_gpu": item.get("needs_gpu", False),
            "attack": ann.title,
            "description": ann.body,
            "public_source": ann.sources,
        }
        if "policy" in item:
            case["policy"] = item["policy"]
        if "note" in item:
            case["note"] = " ".join(item["note"].split())
        cases.append(case)
    ids = [c["id"] for c in cases]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate red-team ids")
    manifest = {
        "schema_version": 1,
        "about": config["manifest"]["about"].strip(),
        "fields": config["manifest"]["fields"],
        "cases": cases,
    }
    out[KERNELS / "redteam" / "manifest.json"] = render(manifest)
    return out


def _existing() -> set[Path]:
    found = set(KERNELS.glob("examples.json"))
    found |= set((KERNELS / "solutions").rglob("*.json"))
    found |= set((KERNELS / "redteam").glob("*.json"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if a generated file is stale or orphaned")
    args = parser.parse_args(argv)
    files = build()
    orphans = sorted(_existing() - set(files))
    if args.check:
        stale = sorted(p for p, text in files.items()
                       if not p.exists() or p.read_text(encoding="utf-8") != text)
        for p in stale:
            print(f"stale: {p.relative_to(REPO)}")
        for p in orphans:
            print(f"orphan: {p.relative_to(REPO)}")
        return 1 if stale or orphans else 0
    for p in orphans:
        p.unlink()
    for path, text in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files ({len(orphans)} orphans removed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
