"""The loop <-> list-comprehension pass of Level 4 (SchrodingerRepo §III-E): when and why it
is safe is documented in ``raydist.views.l4.rewrite``."""

from __future__ import annotations

from collections import Counter

import libcst as cst

from raydist.views.l4._passes import _ANY, _ATOMS, _SCOPES, _nested_scope_names, _Pass, _stored, code_of, names_in


def _one_small(body: cst.BaseSuite):
    """The only small statement of ``body``, or None."""
    stmts = body.body
    if isinstance(body, cst.IndentedBlock):
        if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine):
            return None
        stmts = stmts[0].body
    return stmts[0] if len(stmts) == 1 else None


def _append_arg(small, out: str):
    """``e`` when ``small`` is ``out.append(e)``, else None."""
    call = small.value if isinstance(small, cst.Expr) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
            and isinstance(call.func.value, cst.Name) and call.func.value.value == out and len(call.args) == 1
            and call.args[0].keyword is None and not call.args[0].star):
        return None
    return call.args[0].value


def _empty_list_target(stmt) -> str | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
            and isinstance(small.value, cst.List) and not small.value.elements:
        return small.targets[0].target.value
    return None


def _unsafe_inside(node: cst.CSTNode) -> bool:
    bad = []

    class Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, (cst.Yield, cst.Await, cst.NamedExpr, cst.Lambda, *_SCOPES)) or (
                    isinstance(n, cst.Name) and n.value == "super"):
                bad.append(n)
            return not bad

    node.visit(Find())
    return bool(bad)


def _wrap(node: cst.BaseExpression, atoms=_ATOMS) -> str:
    text = code_of(node)
    return text if isinstance(node, atoms) and "\n" not in text else f"({text})"


class LoopsPass(_Pass):
    def __init__(self, rng, p, counts: Counter, blocked: set[str]) -> None:
        super().__init__(rng, p)
        self.counts = counts  # Name occurrences in the whole function
        self.blocked = blocked  # names other scopes can see: a callee could observe the list's binding

    def _private(self, names: list[str], within: cst.CSTNode) -> bool:
        inner = Counter(names_in(within))
        return bool(names) and all(self.counts[n] == inner[n] for n in names)

    def leave_IndentedBlock(self, original, updated):
        if self.guard:
            return updated
        out, stmts, i = [], list(updated.body), 0
        while i < len(stmts):
            new = self._to_comp(stmts[i], stmts[i + 1]) if i + 1 < len(stmts) else None
            if new is not None and self.take():
                out.append(new)
                i += 2
                continue
            new = self._to_loop(stmts[i])
            out.extend(new if new is not None and self.take() else [stmts[i]])
            i += 1
        return updated.with_changes(body=out)

    def _to_comp(self, init, loop):
        name = _empty_list_target(init)
        if name is None or name in self.blocked or not isinstance(loop, cst.For) or loop.orelse or loop.asynchronous:
            return None
        small, cond = _one_small(loop.body), None
        if small is None and isinstance(loop.body, cst.IndentedBlock) and len(loop.body.body) == 1:
            inner = loop.body.body[0]
            if isinstance(inner, cst.If) and inner.orelse is None:
                small, cond = _one_small(inner.body), inner.test
        elt = _append_arg(small, name) if small is not None else None
        targets = _stored(loop.target)
        if elt is None or not targets or _unsafe_inside(loop) or not self._private(targets, loop):
            return None
        if name in names_in(loop.target) + names_in(loop.iter) + names_in(elt) + (names_in(cond) if cond else []):
            return None
        parts = [_wrap(elt, _ATOMS + (cst.BinaryOperation, cst.Comparison)), "for", code_of(loop.target), "in",
                 _wrap(loop.iter)]
        if cond is not None:
            parts += ["if", _wrap(cond, _ATOMS + (cst.Comparison,))]
        text = f"{name} = [{' '.join(parts)}]\n"
        return cst.parse_statement(text).with_changes(leading_lines=init.leading_lines)

    def _to_loop(self, stmt):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.ListComp)):
            return None
        name, comp = small.targets[0].target.value, small.value
        if name in self.blocked:
            return None
        fors: list[cst.CompFor] = []
        node: cst.CompFor | None = comp.for_in
        while node is not None:
            fors.append(node)
            node = node.inner_for_in
        targets = [n for f in fors for n in _stored(f.target)]
        if any(f.asynchronous for f in fors) or _unsafe_inside(comp) or name in names_in(comp) \
                or len(targets) != sum(len(names_in(f.target)) for f in fors) or not self._private(targets, comp):
            return None
        lines, depth = [f"{name} = []"], 0
        for f in fors:
            lines.append("    " * depth + f"for {code_of(f.target)} in {_wrap(f.iter, _ANY)}:")
            depth += 1
            for c in f.ifs:
                lines.append("    " * depth + f"if {_wrap(c.test, _ANY)}:")
                depth += 1
        lines.append("    " * depth + f"{name}.append({code_of(comp.elt)})")
        body = cst.parse_module("\n".join(lines) + "\n").body
        return [body[0].with_changes(leading_lines=stmt.leading_lines), body[1]]


def visible_names(body: cst.CSTNode) -> set[str]:
    """Names a nested scope uses or a ``global``/``nonlocal`` statement declares."""
    names = _nested_scope_names(body)

    class Declared(cst.CSTVisitor):
        def visit_Global(self, node) -> None:
            names.update(item.name.value for item in node.names)

        def visit_Nonlocal(self, node) -> None:
            names.update(item.name.value for item in node.names)

    body.visit(Declared())
    return names
