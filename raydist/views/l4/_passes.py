"""The transformations of Level 4 (SchrodingerRepo §III-E), each a libcst pass over one
function body that changes its form, never its behaviour; ``raydist.views.l4.rewrite``
chooses, orders and checks them. What each pass does and when it is safe is documented in
``raydist.views.l4.rewrite``'s module docstring.
"""

from __future__ import annotations

import random
import symtable
from typing import TypeVar

import libcst as cst

_DYNAMIC = {"locals", "vars", "eval", "exec", "dir", "_getframe", "currentframe", "getframeinfo", "stack"}
_VOCAB = ["item", "value", "entry", "elem", "acc", "node", "part", "chunk", "piece", "token", "slot", "cell",
          "unit", "datum", "obj", "ref", "buf", "temp", "res", "cur", "probe", "sample", "key_", "mark"]
_EMPTY = cst.Module(body=[])
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_GUARDS = (cst.Try, cst.TryStar, cst.With)
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
_ANY = (cst.BaseExpression,)  # a statement header only needs parentheses across lines
PASSES = ("rename", "alias", "invert", "loops", "swap", "augment")


_Node = TypeVar("_Node", bound=cst.CSTNode)


def transformed(node: _Node, transformer: cst.CSTTransformer) -> _Node:
    """``node.visit(transformer)`` for a transformer that keeps the node itself (it may change what
    is inside, never remove or flatten it); raises TypeError when it did not."""
    out = node.visit(transformer)
    if not isinstance(out, type(node)):
        raise TypeError(f"{type(transformer).__name__} turned a {type(node).__name__} into {out!r}")
    return out


def code_of(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def names_in(node: cst.CSTNode, *, skip_scopes: bool = False) -> list[str]:
    """Every ``Name`` value under ``node`` (optionally not inside nested def/lambda/class)."""
    found: list[str] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, cst.Name):
                found.append(n.value)
            return not (skip_scopes and isinstance(n, _SCOPES))

    node.visit(Collect())
    return found


def _nested_scope_names(body: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, _SCOPES):
                names.update(names_in(n))
                return False
            return True

    body.visit(Collect())
    return names


def is_dynamic(func: cst.FunctionDef) -> bool:
    hit: list[cst.CSTNode] = []

    class Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, cst.Name) and n.value in _DYNAMIC or isinstance(n, cst.Match):
                hit.append(n)
            if isinstance(n, cst.FormattedStringExpression) and n.equal is not None:
                hit.append(n)
            return not hit

    func.body.visit(Find())
    return bool(hit)


class _Pass(cst.CSTTransformer):
    """Base of the body passes: no descent into nested scopes; tracks try/with depth."""

    def __init__(self, rng: random.Random, p: float) -> None:
        self.rng, self.p, self.guard = rng, p, 0

    def take(self) -> bool:
        return self.rng.random() < self.p

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _SCOPES):
            return False
        self.guard += isinstance(node, _GUARDS)
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        self.guard -= isinstance(original, _GUARDS)
        return super().on_leave(original, updated)


class _Rename(_Pass):
    def __init__(self, rng, p, mapping: dict[str, str]) -> None:
        super().__init__(rng, p)
        self.mapping = mapping

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.mapping.get(updated.value, updated.value))

    def leave_Attribute(self, original, updated):
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)

    def leave_ImportAlias(self, original, updated):
        return original

    def leave_ImportFrom(self, original, updated):
        return original


def _renamable_locals(func: cst.FunctionDef) -> list[str]:
    """Locals ``symtable`` sees in ``func`` that are safe to rename, in first-use order."""
    try:
        top = symtable.symtable(code_of(cst.Module(body=[func.with_changes(leading_lines=[])])), "<l4>", "exec")
    except SyntaxError:
        return []
    table = [c for c in top.get_children() if c.get_name() == func.name.value][-1]
    nested = _nested_scope_names(func.body)
    ok = {
        s.get_name() for s in table.get_symbols()
        if s.is_local() and not (s.is_parameter() or s.is_global() or s.is_imported() or s.is_nonlocal())
        and s.get_name() not in nested and not s.get_name().startswith("__")
    }
    return list(dict.fromkeys(n for n in names_in(func.body, skip_scopes=True) if n in ok))


def _rename(func: cst.FunctionDef, rng: random.Random, p: float, taken: set[str]) -> cst.FunctionDef:
    chosen = [n for n in _renamable_locals(func) if rng.random() < p]
    words, mapping = rng.sample(_VOCAB, len(_VOCAB)), {}
    for i, old in enumerate(chosen):
        base, k = words[i % len(words)], 1
        new = base
        while new in taken:
            k += 1
            new = f"{base}{k}"
        taken.add(new)
        mapping[old] = new
    return func.with_changes(body=func.body.visit(_Rename(rng, p, mapping))) if mapping else func


def _rebound_parameters(func: cst.FunctionDef) -> list[str]:
    """Parameters ``func``'s body assigns to, safe to move into a fresh local: not global or
    nonlocal, not used in a nested def/lambda/class, never deleted, not ``self``/``cls``."""
    try:
        top = symtable.symtable(code_of(cst.Module(body=[func.with_changes(leading_lines=[])])), "<l4>", "exec")
    except SyntaxError:
        return []
    table = [c for c in top.get_children() if c.get_name() == func.name.value][-1]
    nested = _nested_scope_names(func.body)
    deleted = {t.value for d in _find(func.body, cst.Del) for t in _find(d, cst.Name)}
    ok = {
        s.get_name() for s in table.get_symbols()
        if s.is_parameter() and s.is_assigned() and not (s.is_global() or s.is_nonlocal())
        and s.get_name() not in nested | deleted | {"self", "cls"}
    }
    return [n for n in dict.fromkeys(names_in(func.body, skip_scopes=True)) if n in ok]


def _find(node: cst.CSTNode, kind: type) -> list:
    found: list = []

    class _Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return True

    node.visit(_Collect())
    return found


def _alias(func: cst.FunctionDef, rng: random.Random, p: float, taken: set[str]) -> cst.FunctionDef:
    """Bind each chosen rebound parameter to a fresh local at entry (``text = word``) and use
    the local throughout the body: the parameter keeps its name (the interface is unchanged)
    and no statement sees a different value."""
    chosen = [n for n in _rebound_parameters(func) if rng.random() < p]
    if not chosen or not isinstance(func.body, cst.IndentedBlock):
        return func
    words, mapping = rng.sample(_VOCAB, len(_VOCAB)), {}
    for i, old in enumerate(chosen):
        base, k = words[i % len(words)], 1
        new = base
        while new in taken:
            k += 1
            new = f"{base}{k}"
        taken.add(new)
        mapping[old] = new
    body = transformed(func.body, _Rename(rng, p, mapping))
    statements = list(body.body)
    first = statements[0] if statements else None
    docstring = (isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1
                 and isinstance(first.body[0], cst.Expr) and isinstance(first.body[0].value, cst.SimpleString))
    at = 1 if docstring else 0
    bindings = [cst.parse_statement(f"{new} = {old}\n") for old, new in mapping.items()]
    return func.with_changes(body=body.with_changes(body=[*statements[:at], *bindings, *statements[at:]]))


class _Invert(_Pass):
    def leave_If(self, original, updated):
        if not isinstance(updated.orelse, cst.Else) or not self.take():
            return updated
        test = updated.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            new_test = test.expression  # `if` takes bool() once either way
        elif isinstance(test, _ATOMS) or test.lpar:
            new_test = cst.UnaryOperation(cst.Not(), test)
        else:
            new_test = cst.UnaryOperation(cst.Not(), test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        return updated.with_changes(test=new_test, body=updated.orelse.body,
                                    orelse=updated.orelse.with_changes(body=updated.body))


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString))


class _Swap(_Pass):
    def leave_Comparison(self, original, updated):
        if len(updated.comparisons) != 1 or not self.take():
            return updated
        left, (target,) = updated.left, updated.comparisons
        right, op = target.comparator, target.operator
        plain = [isinstance(x, cst.Name) and not _literal(x) for x in (left, right)]
        lits = [_literal(x) for x in (left, right)]
        if isinstance(op, (cst.Equal, cst.NotEqual)):
            ok = all(a or b for a, b in zip(plain, lits)) and any(lits)
        elif isinstance(op, (cst.Is, cst.IsNot)):
            ok = all(a or b for a, b in zip(plain, lits))
        else:
            ok = False
        return updated.with_changes(left=right, comparisons=[target.with_changes(comparator=left)]) if ok else updated


def _int_lit(node) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def _stored(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _stored(el.value)]
    if isinstance(target, cst.StarredElement):
        return _stored(target.value)
    return []


def _int_update(small, name: str) -> bool:
    """``name = INT``, ``name = name +/- INT`` or ``name +=/-= INT``."""
    if isinstance(small, cst.AugAssign):
        return isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign)) and _int_lit(small.value)
    value = small.value
    return _int_lit(value) or (
        isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract))
        and isinstance(value.left, cst.Name) and value.left.value == name and _int_lit(value.right))


def _int_locals(func: cst.FunctionDef) -> set[str]:
    """Locals every binding of which keeps them an int (see ``_int_update``)."""
    good: set[str] = set()
    bad = set(_nested_scope_names(func.body))
    params = [*func.params.params, *func.params.posonly_params, *func.params.kwonly_params,
              func.params.star_arg, func.params.star_kwarg]
    bad |= {p.name.value for p in params if isinstance(p, cst.Param)}

    class Bindings(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                single = len(targets) == 1 and isinstance(targets[0], cst.Name) and n.value is not None
                names = [x for t in targets for x in _stored(t)]
                (good if single and _int_update(n, names[0]) else bad).update(names)
            if isinstance(n, (cst.For, cst.CompFor, cst.NamedExpr)):
                bad.update(_stored(n.target))
            if isinstance(n, cst.AsName):  # with/except/import ... as
                bad.update(_stored(n.name))
            if isinstance(n, (cst.Global, cst.Nonlocal, cst.Del, cst.Import, cst.ImportFrom)):
                bad.update(names_in(n))
            return True

    func.body.visit(Bindings())
    return good - bad


class _Augment(_Pass):
    def __init__(self, rng, p, ints: set[str]) -> None:
        super().__init__(rng, p)
        self.ints = ints

    def leave_AugAssign(self, original, updated):
        t = updated.target
        if not (isinstance(t, cst.Name) and t.value in self.ints and _int_update(updated, t.value) and self.take()):
            return updated
        op = cst.Add() if isinstance(updated.operator, cst.AddAssign) else cst.Subtract()
        return cst.Assign([cst.AssignTarget(t)], cst.BinaryOperation(cst.Name(t.value), op, updated.value))

    def leave_Assign(self, original, updated):
        if len(updated.targets) != 1 or not isinstance(updated.targets[0].target, cst.Name):
            return updated
        name, value = updated.targets[0].target.value, updated.value
        if name not in self.ints or not isinstance(value, cst.BinaryOperation) or _int_lit(value) \
                or not _int_update(updated, name) or value.lpar or not self.take():
            return updated
        op = cst.AddAssign() if isinstance(value.operator, cst.Add) else cst.SubtractAssign()
        return cst.AugAssign(cst.Name(name), op, value.right)
