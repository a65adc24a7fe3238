"""Walking one scope: a body's nodes without descending into nested functions or classes."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

__all__ = ["SCOPES", "walk_local"]

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_local(body: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Nodes of ``body`` without descending into nested functions or classes."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, SCOPES):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
