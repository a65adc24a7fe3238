"""Hostile documents through ``sandboxharness validate``: exit 0 or 2 and exactly one line,
never 3, a traceback or a hang (issue 10: 172 bad inputs got exit 3, 41 messages spanned two
lines, 50 held raw ANSI escapes, 5 were ~1 MiB long).

Mutations start from valid documents (``tests/data/tiny``, a Triton solution, the shipped
default policy) and change types, sizes, nesting, numbers (NaN, infinities, huge integers),
strings (control characters, ANSI escapes, megabytes) and paths, in-process through the CLI
(typer's runner); a handful also through a real process. Bounded: ~200 examples per kind.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sandboxharness.cli.main import app
from sandboxharness.errors import MAX_LINE
from tests.conftest import DATA, REPO, TRITON_RMS, make_solution

BASES: dict[str, Any] = {
    "definition": json.loads((DATA / "tiny" / "rms_t.json").read_text()),
    "workloads": json.loads((DATA / "tiny" / "rms_t.jsonl").read_text().splitlines()[0]),
    "solution": make_solution(TRITON_RMS),
    "policy": yaml.safe_load((REPO / "policies" / "default.yaml").read_text()),
}
SUFFIX = {"definition": ".json", "workloads": ".jsonl", "solution": ".json", "policy": ".yaml"}
BIG_INT = "9" * 5000  # past Python's 4300-digit int parsing limit
SPECIAL: list[Any] = [
    None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 1e308, -1e308,
    float("nan"), float("inf"), float("-inf"), -0.0, 1e-320, "", " ", ".", "..", "./kernel.py",
    "kernel.py/", "a//b", "/etc/passwd", "../../x", "~/x", "\x00", "a\x00b", "\x1b[31mred\x1b[0m",
    "line1\nline2", "\r", "\u202e", "\u2028", "x" * 256, "x" * 257, "é" * 200, "d" * 300 + ".py",
    "__BIGINT__", "__DEEP__", [], {}, [[]], {"": None}, {"type": "var"}, {"type": "random"},
    {"type": "scalar", "value": float("nan")}, ["b", "h"], "float32", "kernel.py::run",
    "M ** 1000000000 > 0", "__import__('os').system('id')",
]
NASTY = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(max_size=40),
    st.integers(),
    st.floats(),
    st.sampled_from([257, 1025, 70_000, 1_000_000]).map(lambda n: "\x1b[1m" + "y" * n + "\n"),
    st.sampled_from([300, 5000, 120_000]).map(lambda n: list(range(n))),
    st.recursive(st.none() | st.integers() | st.text(max_size=5),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                        max_size=3),
                 max_leaves=8),
)


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:20]):
            out += _paths(v, (*at, i))
    return out


def _nasty(data: st.DataObject) -> Any:
    return copy.deepcopy(data.draw(NASTY))  # SPECIAL's lists are shared: never mutate them


def _mutate(data: st.DataObject, doc: Any) -> Any:
    path = data.draw(st.sampled_from(_paths(doc)))
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "add", "rename"]))
    if not path:
        return _nasty(data) if op == "replace" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    if op == "replace":
        parent[key] = _nasty(data)
    elif op == "delete":
        del parent[key]
    elif isinstance(parent, dict) and op == "add":
        parent[data.draw(st.text(max_size=300))] = _nasty(data)
    elif isinstance(parent, dict) and op == "rename":
        parent[data.draw(st.sampled_from(["\x1b[31m", "a\nb", "x" * 70_000, "", key + "_"]))] = (
            parent.pop(key))
    return doc


def _render(kind: str, doc: Any, deep: int) -> str:
    text = json.dumps(doc, allow_nan=True)
    text = text.replace('"__BIGINT__"', BIG_INT).replace('"__DEEP__"', "[" * deep + "]" * deep)
    return text + ("\n" if kind == "workloads" else "")


RAW_YAML = ["limits: {run_timeout_s: .inf}", "limits: {memory_mb: 4611686018427387904}",
            "promotion: {min_speedup: .nan}", "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n"
                      for p, c in zip("abcdefg", "bcdefgh", strict=True)),
            "x: !!python/object/apply:os.system ['id']", "\tname: tab", "name: [unclosed",
            "deep: " + "[" * 3000 + "]" * 3000, "n: " + BIG_INT, "---\nname: two\n---\nname: docs",
            "name: \x1b[31m", "limits: {cpu_time_s: 1}", "limits: {max_file_size_mb: 1125899906842624}"]

RUNNER = CliRunner()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _check_one(workdir: Path, kind: str, text: str | bytes) -> None:
    path = workdir / f"doc{SUFFIX[kind]}"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    t0 = time.monotonic()
    res = RUNNER.invoke(app, ["validate", str(path)])
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert res.exit_code in (0, 2), (res.exit_code, out[:2000], res.exception)
    lines = out.splitlines()
    assert len(lines) == 1, out[:2000]
    line = lines[0]
    assert line.startswith("ok: " if res.exit_code == 0 else f"error: {path}"), line
    assert len(line) <= MAX_LINE and "\x1b" not in line and "Traceback" not in out
    assert took < 10, f"{took:.1f} s for one document"


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(BASES))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_documents_get_exit_0_or_2_and_one_line(workdir: Path, kind: str,
                                                        data: st.DataObject) -> None:
    """Malformed documents of every kind (python-tuf-style caps: nesting, sizes, numbers,
    strings, paths): one line, exit 0 or 2."""
    doc = json.loads(json.dumps(BASES[kind]))
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(data, doc)
    text = _render(kind, doc, data.draw(st.sampled_from([40, 990, 5000])))
    if data.draw(st.integers(0, 9)) == 0:  # now and then: broken bytes, not broken values
        cut = data.draw(st.integers(0, len(text)))
        raw = text.encode("utf-8", "surrogatepass")
        _check_one(workdir, kind, raw[:cut] + data.draw(st.binary(max_size=8)) + raw[cut:])
        return
    if kind == "policy" and data.draw(st.booleans()):
        text = (REPO / "policies" / "default.yaml").read_text() + "\n" + data.draw(
            st.sampled_from(RAW_YAML)) + "\n"
    _check_one(workdir, kind, text)


def test_a_real_process_answers_every_path(tmp_path: Path) -> None:
    """A handful of document bombs through a real ``sandboxharness validate``: each path gets
    its own line (a crash on one used to skip the rest), exit 2, no traceback."""
    files = {
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "deep.yaml": "a: " + "[" * 5000 + "]" * 5000,
        "laughs.yaml": "name: x\n" + RAW_YAML[3],
        "bigint.json": '{"name": ' + BIG_INT + "}",
        "inf.yaml": "name: x\nlimits: {run_timeout_s: 1e308}\n",
        "ansi.json": json.dumps({**BASES["solution"], "name": "\x1b[2J" + "z" * 2_000_000}),
        "ref.json": json.dumps({**BASES["definition"], "reference": "def run(x, w):\n"
                                "    return " + "+".join(["x"] * 100_000) + "\n"}),
        "power.json": json.dumps({**BASES["definition"], "constraints": ["b ** 1000000000 > 0"]}),
    }
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    paths.append(DATA / "tiny" / "rms_t.json")
    proc = subprocess.run([sys.executable, "-m", "sandboxharness.cli", "validate", *map(str, paths)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    errors = proc.stderr.splitlines()
    assert [line.split(": ", 2)[1] for line in errors] == [str(p) for p in paths[:-1]], errors
    assert all(len(line) <= MAX_LINE and "\x1b" not in line for line in errors)
    assert proc.stdout.splitlines() == [f"ok: {paths[-1]} (definition)"]
    assert "Traceback" not in proc.stderr


# -- one regression test per document attack ------------------------------------------------

def _definition(**changes: Any) -> str:
    return json.dumps({**BASES["definition"], **changes})


def _solution(*paths: str) -> str:
    doc = make_solution(TRITON_RMS)
    doc["sources"] = [{"path": p, "content": "x = 1\n"} for p in paths]
    doc["spec"]["entry_point"] = f"{paths[0]}::run"
    return json.dumps(doc)


def _workload(**workload: Any) -> str:
    line = json.loads(json.dumps(BASES["workloads"]))
    line["workload"].update(workload)
    return json.dumps(line, allow_nan=True) + "\n"


def _policy(text: str) -> str:
    return "name: p\n" + text + "\n"


BOMBS: dict[str, tuple[str, str, str]] = {
    # attack: (suffix, document, what the one line must say)
    "json nested 100k deep": (".json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "json nested 40 deep": (".json", _definition(description=json.loads("[" * 40 + "]" * 40)),
                            "nested deeper than 32"),
    "yaml nested flow": (".yaml", "a: " + "[" * 5000 + "]" * 5000, "nest"),
    "yaml nested blocks": (".yaml", "".join("  " * i + "a:\n" for i in range(60)) + "  " * 60
                           + "1\n", "nested deeper than 32"),
    "yaml billion laughs": (".yaml", "name: x\n" + RAW_YAML[3], "aliases expanded"),
    "int of 5000 digits": (".json", '{"name": ' + BIG_INT + "}", "4300 digits"),
    "reference of 100k terms": (".json", _definition(reference="def run(x, w):\n    return "
                                                     + "+".join(["x"] * 100_000) + "\n"),
                                "reference: nested too deeply"),
    "reference of 120k nodes": (".json", _definition(reference="def run(x, w):\n    return x\n"
                                                     + "y = [" + "a," * 60_000 + "]\n"),
                                "syntax nodes"),
    "reference over 256 KiB": (".json", _definition(reference="#" * 300_000), "reference"),
    "constraint power tower": (".json", _definition(constraints=["b ** 1000000000 > 0"]),
                               "field constraints"),
    "constraint calling eval": (".json", _definition(constraints=["eval('1') > 0"]),
                                "field constraints"),
    "30 MB workload uuid": (".jsonl", _workload(uuid="u" * 30_000_000), "workload.uuid"),
    "negative axis": (".jsonl", _workload(axes={"b": -4}), "workload.axes.b"),
    "axis past int32": (".jsonl", _workload(axes={"b": 2**40}), "workload.axes.b"),
    "NaN scalar": (".jsonl", _workload(inputs={"x": {"type": "random"}, "w": {
        "type": "scalar", "value": float("nan")}}), "finite"),
    "Infinity scalar": (".jsonl", _workload(inputs={"x": {"type": "random"}, "w": {
        "type": "scalar", "value": float("inf")}}), "finite"),
    "ANSI and newline in a name": (".json", _definition(name="\x1b[31mred\nline"),
                                   "field name"),
    "1 MiB echoed value": (".json", json.dumps({**BASES["solution"], "spec": {
        **BASES["solution"]["spec"], "entry_point": "\x1b[2J" + "e" * 1_000_000}}),
        "spec.entry_point"),
    "1 MiB unknown key": (".json", _definition(**{"k\x1b[0m\n" * 100_000: 1}), "Extra inputs"),
    "dot-slash beside the file": (".json", _solution("kernel.py", "./kernel.py"), "normalised"),
    "trailing slash": (".json", _solution("kernel.py/"), "normalised"),
    "dot path": (".json", _solution("."), "normalised"),
    "empty component": (".json", _solution("a//kernel.py"), "normalised"),
    "300-byte component": (".json", _solution("k" * 300 + ".py"), "component longer than 255"),
    "1100-byte path": (".json", _solution("/".join(["d" * 100] * 11) + ".py"),
                       "longer than 1024"),
    "file and directory clash": (".json", _solution("a.py", "a.py/b.py"),
                                 "both a file and a directory"),
    "NUL in a path": (".json", _solution("ker\x00nel.py"), "control characters"),
    "control character in a path": (".json", _solution("ker\x1bnel.py"), "control characters"),
    "timeout .inf": (".yaml", _policy("limits: {run_timeout_s: .inf}"), "limits.run_timeout_s"),
    "timeout 1e308": (".yaml", _policy("limits: {compile_timeout_s: 1.0e308}"),
                      "limits.compile_timeout_s"),
    "memory_mb 1": (".yaml", _policy("limits: {memory_mb: 1}"), "limits.memory_mb"),
    "memory_mb 2**62": (".yaml", _policy(f"limits: {{memory_mb: {2**62}}}"), "limits.memory_mb"),
    "min_speedup .inf": (".yaml", _policy("promotion: {min_speedup: .inf}"),
                         "promotion.min_speedup"),
    "NaN tolerance": (".yaml", _policy("correctness: {tolerance: {atol: .nan, rtol: 0}}"),
                      "correctness.tolerance.atol"),
    "max_file_size_mb 2**50": (".yaml", _policy(f"limits: {{max_file_size_mb: {2**50}}}"),
                               "limits.max_file_size_mb"),
    "cpu_time_s 1": (".yaml", _policy("limits: {cpu_time_s: 1}"), "limits.cpu_time_s"),
    "python object tag": (".yaml", _policy("x: !!python/object/apply:os.system ['id']"),
                          "invalid YAML"),
}


@pytest.mark.parametrize("attack", sorted(BOMBS))
def test_document_attack_is_one_line_exit_2(tmp_path: Path, attack: str) -> None:
    """Document bombs and absurd values, each answered by ``validate`` with one line naming
    the file and the field, exit 2: deep nesting (CWE-674; python-tuf's and
    json-schema's depth caps), YAML alias expansion ("billion laughs", CVE-2003-1564 class),
    CPython's int-parsing limit (CVE-2020-10735), expression and path tricks (issue 10)."""
    suffix, text, needle = BOMBS[attack]
    path = tmp_path / f"doc{suffix}"
    path.write_text(text)
    res = RUNNER.invoke(app, ["validate", str(path)])
    lines = (res.stdout + res.stderr).splitlines()
    assert res.exit_code == 2 and len(lines) == 1, (res.exit_code, lines[:3])
    assert lines[0].startswith(f"error: {path}") and needle in lines[0], lines[0]
    assert len(lines[0]) <= MAX_LINE and "\x1b" not in lines[0]


SCALAR_DEF = {**BASES["definition"], "inputs": {
    **BASES["definition"]["inputs"], "eps": {"shape": None, "dtype": "float16"},
    "k": {"shape": None, "dtype": "int8"}},
    "reference": "def run(x, w, eps, k):\n    return x * w\n"}
REFUSED: dict[str, tuple[dict[str, Any], dict[str, Any], str | None, str]] = {
    # attack: (definition, workload line changes, policy text or None, what the line says)
    "tensors past 256 GiB": (BASES["definition"], {"axes": {"b": 2**30}}, None, "axis b"),
    "float16 scalar 1e6": (SCALAR_DEF, {"inputs": {"x": {"type": "random"}, "w": {
        "type": "random"}, "eps": {"type": "scalar", "value": 1e6}, "k": {
        "type": "scalar", "value": 1}}}, None, "scalar input 'eps'"),
    "int8 scalar 1000": (SCALAR_DEF, {"inputs": {"x": {"type": "random"}, "w": {
        "type": "random"}, "eps": {"type": "scalar", "value": 0.5}, "k": {
        "type": "scalar", "value": 1000}}}, None, "scalar input 'k'"),
    "NaN scalar": (BASES["definition"], {"inputs": {"x": {"type": "random"}, "w": {
        "type": "scalar", "value": float("nan")}}}, None, "finite"),
    "computed power tower": ({**BASES["definition"], "constraints": ["b ** 10**9 > 0"]}, {},
                             None, "workload a: constraint 'b ** 10**9 > 0' cannot be evaluated"),
    "cpu_time_s 1": (BASES["definition"], {}, _policy("limits: {cpu_time_s: 1}"),
                     "limits.cpu_time_s"),
    "max_file_size_mb 2**50": (BASES["definition"], {}, _policy(
        f"limits: {{max_file_size_mb: {2**50}}}"), "limits.max_file_size_mb"),
}


@pytest.mark.parametrize("attack", sorted(REFUSED))
def test_evaluate_refuses_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               attack: str) -> None:
    """Values ``validate`` used to accept and the sandbox then choked on, 9-63 s later, some
    blamed on the candidate (WORKER_PROTOCOL): ``evaluate`` refuses them with exit 2 and one
    line before a job directory exists, so before any candidate code could run."""
    definition, changes, policy, needle = REFUSED[attack]
    d = tmp_path / "d.json"
    d.write_text(json.dumps(definition))
    w = tmp_path / "w.jsonl"
    w.write_text(_workload(**changes))
    s = tmp_path / "s.json"
    s.write_text(json.dumps(make_solution(TRITON_RMS)))
    args = ["evaluate", "--definition", str(d), "--solution", str(s), "--workloads", str(w)]
    if policy is not None:
        (tmp_path / "p.yaml").write_text(policy)
        args += ["--policy", str(tmp_path / "p.yaml")]
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jobs))
    res = RUNNER.invoke(app, args)
    lines = (res.stdout + res.stderr).splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert list(jobs.iterdir()) == []


def test_error_text_is_one_capped_line_with_the_whole_text_kept() -> None:
    """Library exceptions too: ``str()`` one printable line of at most MAX_LINE characters,
    head (file, field) and tail kept; ``diagnostics()`` the whole text."""
    from sandboxharness.errors import InputError, SandboxError, one_line

    value = "\x1b[31m" + "v" * 1_000_000 + "\nsecond line"
    exc = InputError(f"field name: bad value {value}", where="doc.json")
    text = str(exc)
    assert len(text) <= MAX_LINE and text.isprintable() and "\x1b" not in text
    assert text.startswith("doc.json: field name: bad value \\x1b[31mvvv")
    assert text.endswith("v\\nsecond line") and "characters, cut" in text
    assert exc.diagnostics() == f"doc.json: field name: bad value {value}"
    assert str(SandboxError("a\nb\tc")) == "a\\nb\\tc"
    assert one_line("short") == "short" and one_line("\u202eevil") == "\\u202eevil"
