"""The definition-time dependency graph of a run of definitions (SchrodingerRepo §III-D).

A run is a maximal sequence of consecutive ``def``/``class`` statements in one body. Moving
a definition inside its run is safe as long as every name it reads *while being defined*
is bound to the same object as before. The names a definition reads then are its
decorators, parameter defaults, annotations (unless ``from __future__ import
annotations`` defers them), class bases and keywords, and every statement of a class
body, which runs at class creation (function bodies do not run then).

Ordering rule for a read of name ``n`` by definition ``X``: the latest definition of ``n``
before ``X`` stays before ``X``, and every later definition of ``n`` stays after ``X``.
Definitions sharing a name keep their relative order (property then setter, overloads).
Every edge therefore points forward in the original order, so the graph is acyclic.

At module level one more fact matters: a function read at definition time may be called
then (a decorator, a default built by a factory, a base class whose
``__init_subclass__`` runs), so its body's reads count too, transitively ("call
closure"). This only adds constraints, never removes one.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable, Mapping, Sequence

import libcst as cst

Definition = cst.FunctionDef | cst.ClassDef


class _Loads(cst.CSTVisitor):
    """Collects names that may be loaded; stores, attributes and keywords are not loads."""

    def __init__(self, *, function_bodies: bool, annotations: bool) -> None:
        self.names: set[str] = set()
        self.function_bodies = function_bodies
        self.annotations = annotations

    def visit_Name(self, node: cst.Name) -> bool:
        self.names.add(node.value)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.annotation is not None:
            node.annotation.visit(self)
        if node.default is not None:
            node.default.visit(self)
        return False

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return self.annotations

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return not isinstance(node.target, cst.Name)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if not isinstance(node.target, cst.Name):
            node.target.visit(self)
        node.annotation.visit(self)
        if node.value is not None:
            node.value.visit(self)
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Global(self, node: cst.Global) -> bool:
        return False

    def visit_Nonlocal(self, node: cst.Nonlocal) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        node.params.visit(self)
        if node.returns is not None:
            node.returns.visit(self)
        if self.function_bodies:
            node.body.visit(self)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        for part in (*node.decorators, *node.bases, *node.keywords):
            part.visit(self)
        node.body.visit(self)
        return False


def has_future_annotations(module: cst.Module) -> bool:
    """True iff ``module`` has ``from __future__ import annotations`` at top level (PEP 563)."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (
                isinstance(small, cst.ImportFrom)
                and isinstance(small.module, cst.Name)
                and small.module.value == "__future__"
                and not isinstance(small.names, cst.ImportStar)
                and any(isinstance(a.name, cst.Name) and a.name.value == "annotations" for a in small.names)
            ):
                return True
    return False


def definition_reads(node: Definition, *, future_annotations: bool = False) -> frozenset[str]:
    """Names ``node`` may load while it is being defined (function bodies excluded).

    ``future_annotations``: the module defers annotations (PEP 563), so they are not read.
    """
    loads = _Loads(function_bodies=False, annotations=not future_annotations)
    node.visit(loads)
    return frozenset(loads.names)


def all_reads(node: Definition) -> frozenset[str]:
    """Every name ``node`` may load at any time, function bodies included."""
    loads = _Loads(function_bodies=True, annotations=True)
    node.visit(loads)
    return frozenset(loads.names)


def module_call_reads(module: cst.Module) -> dict[str, frozenset[str]]:
    """For each top-level def/class name, every name its code may load when called.

    A class counts with its methods' bodies (its ``__init__``, ``__init_subclass__`` or
    classmethods may run when another definition uses it). Same-named definitions merge.
    Uses the ``ast`` parser (``Load`` contexts) for speed; falls back to libcst when the
    running Python cannot parse the module.
    """
    reads: dict[str, set[str]] = {}
    try:
        with warnings.catch_warnings():
            # Old escape sequences in library code are the library's business, not ours.
            warnings.simplefilter("ignore")
            tree = ast.parse(module.code)
    except (SyntaxError, ValueError):
        for stmt in module.body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                reads.setdefault(stmt.name.value, set()).update(all_reads(stmt))
    else:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                loads = (n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
                reads.setdefault(node.name, set()).update(loads)
    return {name: frozenset(names) for name, names in reads.items()}


def call_closure(names: Iterable[str], call_reads: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """``names`` plus, transitively, the call-time reads of those that are definitions."""
    closed = set(names)
    pending = list(closed)
    while pending:
        for read in call_reads.get(pending.pop(), ()):
            if read not in closed:
                closed.add(read)
                pending.append(read)
    return frozenset(closed)


def run_edges(names: Sequence[str], reads: Sequence[Iterable[str]]) -> list[tuple[int, int]]:
    """Ordering constraints of one run, as sorted pairs ``(a, b)`` with ``a < b``.

    ``names[i]``: the name definition ``i`` binds; ``reads[i]``: the names it reads at
    definition time. Implements the rule in the module docstring.
    """
    if len(names) != len(reads):
        raise ValueError(f"run_edges: {len(names)} names but {len(reads)} read sets")
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        positions.setdefault(name, []).append(i)
    edges: set[tuple[int, int]] = set()
    for same in positions.values():
        edges.update(zip(same, same[1:]))
    for x, read_names in enumerate(reads):
        for name in read_names:
            defined = positions.get(name, ())
            before = [j for j in defined if j < x]
            if before:
                edges.add((before[-1], x))
            edges.update((x, j) for j in defined if j > x)
    return sorted(edges)
