"""The package's modules import one another in one direction only: no import cycles.

Every module is parsed (not imported) and every intra-package import counts, the ones inside
functions included: a function-level import is still a dependency, it only hides the cycle
until the function runs. Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = "sandboxharness"
ROOT = Path(__file__).resolve().parents[2] / PKG


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except the bodies of ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` names, or the nearest package above it that is one of ours."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom,
             modules: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return {t for n in names if n.split(".")[0] == PKG
                and (t := _resolve(n, modules)) is not None}
    if node.level:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base.split(".")[0] != PKG:
        return set()
    out: set[str] = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        # ``from . import x``: x is a submodule when there is one by that name, else a
        # name defined in the package's __init__
        target = sub if sub in modules else _resolve(base, modules)
        if target is not None:
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        deps: set[str] = set()
        for node in _imports(tree):
            deps |= _targets(module, path, node, modules)
        # importing a.b.c runs a/__init__ and a/b/__init__ first: the parents are edges too
        for dep in list(deps):
            parent = dep.rpartition(".")[0]
            while parent and parent != PKG:
                if not module.startswith(parent + ".") and module != parent:
                    deps.add(parent)
                parent = parent.rpartition(".")[0]
        deps.discard(module)
        graph[module] = deps
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (no recursion limit on a deep graph)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(sorted(comp))
    return out


def _a_cycle(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One concrete cycle inside a component, for the failure message."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if child not in prev:
                prev[child] = node
                queue.append(child)
    return comp


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert f"{PKG}.cli.main" in graph and f"{PKG}.sandbox.process" in graph
    assert f"{PKG}.errors" in graph[f"{PKG}.sandbox._launch"]
    # a function-level import counts (``from ..api import evaluate_files`` in ``evaluate``)
    assert f"{PKG}.api" in graph[f"{PKG}.cli.main"]


def test_from_dot_import_submodule_is_an_edge_to_the_submodule() -> None:
    graph = import_graph()
    # ``from . import cgroups`` in sandbox/process.py
    assert f"{PKG}.sandbox.cgroups" in graph[f"{PKG}.sandbox.process"]


def _cycles() -> tuple[dict[str, set[str]], list[list[str]]]:
    graph = import_graph()
    return graph, [c for c in strongly_connected(graph) if len(c) > 1]


def _describe(cycles: list[list[str]], graph: dict[str, set[str]]) -> str:
    return "\n".join(" -> ".join(_a_cycle(c, graph)) + f"  (component: {', '.join(c)})"
                     for c in cycles)


def test_no_import_cycles() -> None:
    graph, cycles = _cycles()
    assert not cycles, f"import cycles in the package:\n{_describe(cycles, graph)}"


IMAGE = (f"{PKG}.worker", f"{PKG}.inputs")
"""What the worker image ships of the harness (``sandbox/docker_config.IMAGE_PACKAGES``)."""
HOST_MAY_USE = {f"{PKG}.worker": None, f"{PKG}.worker.protocol": "the contract",
                f"{PKG}.worker.binding": "the digest both sides compute",
                f"{PKG}.worker.gputimer": "the roofline times its own trusted probe kernel"}


def _in_image(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in IMAGE)


def test_the_image_packages_import_nothing_else_of_the_harness() -> None:
    graph = import_graph()
    leaks = {m: sorted(d for d in deps if not _in_image(d))
             for m, deps in graph.items() if _in_image(m)}
    assert {m: d for m, d in leaks.items() if d} == {}


def test_the_host_reaches_into_the_worker_only_for_the_contract() -> None:
    graph = import_graph()
    reach = {m: sorted(d for d in deps if d.startswith(f"{PKG}.worker") and d not in HOST_MAY_USE)
             for m, deps in graph.items() if not _in_image(m)}
    assert {m: d for m, d in reach.items() if d} == {}
    assert f"{PKG}.inputs.tensorgen" in graph[f"{PKG}.stages.call_judge"]
