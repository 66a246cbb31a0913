"""What a name of one module stands for, through the module's imports and bindings
(``ft`` -> ``functools``, ``local:Model`` for a class the module defines once): the allow-lists
of ``raydist.views.l3.pins`` are written in dotted names, and this is how a decorator or base
written in a module is looked up in them.
"""

from __future__ import annotations

import builtins

import libcst as cst

_EMPTY = cst.Module(body=[])


def _as_name(alias: cst.ImportAlias) -> str | None:
    """The ``as`` name of an import alias (``import a.b as c`` -> ``c``), or None without one."""
    if alias.asname is None or not isinstance(alias.asname.name, cst.Name):
        return None
    return alias.asname.name.value


class _Bindings(cst.CSTVisitor):
    """Module-level bindings (compound statements entered, function and class bodies not)."""

    def __init__(self) -> None:
        self.imports: dict[str, set[str]] = {}
        self.other: set[str] = set()
        self.classes: dict[str, int] = {}
        self.star = False

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            dotted = _EMPTY.code_for_node(alias.name)
            local = _as_name(alias) or dotted.split(".")[0]
            self.imports.setdefault(local, set()).add(dotted if alias.asname else local)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        source = "." * len(node.relative) + (_EMPTY.code_for_node(node.module) if node.module else "")
        if isinstance(node.names, cst.ImportStar):
            self.star = True
            return False
        for alias in node.names:
            name = _EMPTY.code_for_node(alias.name)
            local = _as_name(alias) or name
            self.imports.setdefault(local, set()).add(f"{source}.{name}")
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.other.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.classes[node.name.value] = self.classes.get(node.name.value, 0) + 1
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._targets(node.target)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._targets(node.target)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._targets(node.target)
        return False

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._targets(node.name)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_Global(self, node: cst.Global) -> bool:
        return False

    def _targets(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.other.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value)
        elif isinstance(target, cst.StarredElement):
            self._targets(target.value)


class Names:
    """Resolves names of one module to dotted names through its imports (``ft`` -> ``functools``)."""

    def __init__(self, module: cst.Module) -> None:
        bindings = _Bindings()
        module.visit(bindings)
        self._bindings = bindings

    def resolve(self, name: str) -> str | None:
        """``pkg.attr`` for an imported name, ``builtins.x`` for an unshadowed built-in,
        ``local:Name`` for a class bound once by a top-level ``class``, else None (unknown)."""
        b = self._bindings
        bound_other = name in b.other or name in b.classes
        imported = b.imports.get(name, set())
        if imported:
            return next(iter(imported)) if len(imported) == 1 and not bound_other else None
        if b.classes.get(name) == 1 and name not in b.other:
            return f"local:{name}"
        if bound_other or b.star:
            return None
        return f"builtins.{name}" if hasattr(builtins, name) else None

    def dotted(self, expr: cst.BaseExpression) -> str | None:
        """The dotted name of a ``Name``/``Attribute`` chain, or None."""
        if isinstance(expr, cst.Name):
            return self.resolve(expr.value)
        if isinstance(expr, cst.Attribute):
            root = self.dotted(expr.value)
            return f"{root}.{expr.attr.value}" if root else None
        return None
