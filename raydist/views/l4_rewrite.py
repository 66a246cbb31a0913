"""Level 4: deterministic behaviour-preserving rewrite of one function (SchrodingerRepo §III-E).

L4 restates the implementation near the eventual fix in an equivalent form. Here the
targets are the functions enclosing the gold patch's hunks (``functions_enclosing_patch``)
and the rewrite is a seeded sequence of transformations, each applied only where it is
provably safe, to the function body alone (name, signature, decorators and docstring
stay; the rest of the module is byte-identical):

``rename``   local variables (per ``symtable``; not parameters, globals, imports, nor any
             name appearing inside a nested def/lambda/class) get fresh names that occur
             nowhere in the module's text.
``invert``   ``if c: A else: B`` becomes ``if not c: B else: A`` (``not (c)`` for compound c).
``loops``    ``out = []; for t in it: [if c:] out.append(e)`` becomes
             ``out = [e for t in it [if c]]`` and back, when ``out`` is not used inside, the
             targets occur nowhere else in the function, the site is outside try/with (a
             partial list is then unobservable) and no yield/await/walrus/lambda/super is inside.
``swap``     ``x == 1`` becomes ``1 == x`` (also ``!=``) when one side is a name and the other a
             literal (the literal's ``__eq__`` defers to the name's, so dispatch is unchanged);
             ``a is b`` / ``is not`` when both sides are names or literals.
``augment``  ``n += 1`` <-> ``n = n + 1`` (``+``/``-`` with int literals) for locals every one of
             whose bindings is an int literal or such an update, so ``n`` is always an int.

A function that calls ``locals``/``vars``/``eval``/``exec``/``dir``/frame inspection, uses
``match`` or an ``f"{x=}"`` debug field is left unchanged. Each pass's output must compile,
else it is dropped.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
import symtable
from collections import Counter
from collections.abc import Sequence

import libcst as cst

_DYNAMIC = {"locals", "vars", "eval", "exec", "dir", "_getframe", "currentframe", "getframeinfo", "stack"}
_VOCAB = ["item", "value", "entry", "elem", "acc", "node", "part", "chunk", "piece", "token", "slot", "cell",
          "unit", "datum", "obj", "ref", "buf", "temp", "res", "cur", "probe", "sample", "key_", "mark"]
_EMPTY = cst.Module(body=[])
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_GUARDS = (cst.Try, cst.TryStar, cst.With)
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
_ANY = (cst.BaseExpression,)  # a statement header only needs parentheses across lines
PASSES = ("rename", "invert", "loops", "swap", "augment")


def _code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def _names(node: cst.CSTNode, *, skip_scopes: bool = False) -> list[str]:
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
                names.update(_names(n))
                return False
            return True

    body.visit(Collect())
    return names


def _is_dynamic(func: cst.FunctionDef) -> bool:
    hit = []

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
        top = symtable.symtable(_code(cst.Module(body=[func.with_changes(leading_lines=[])])), "<l4>", "exec")
    except SyntaxError:
        return []
    table = [c for c in top.get_children() if c.get_name() == func.name.value][-1]
    nested = _nested_scope_names(func.body)
    ok = {
        s.get_name() for s in table.get_symbols()
        if s.is_local() and not (s.is_parameter() or s.is_global() or s.is_imported() or s.is_nonlocal())
        and s.get_name() not in nested and not s.get_name().startswith("__")
    }
    return list(dict.fromkeys(n for n in _names(func.body, skip_scopes=True) if n in ok))


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
    good, bad = set(), set(_nested_scope_names(func.body))
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
                bad.update(_names(n))
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
    text = _code(node)
    return text if isinstance(node, atoms) and "\n" not in text else f"({text})"


class _Loops(_Pass):
    def __init__(self, rng, p, counts: Counter, blocked: set[str]) -> None:
        super().__init__(rng, p)
        self.counts = counts  # Name occurrences in the whole function
        self.blocked = blocked  # names other scopes can see: a callee could observe the list's binding

    def _private(self, names: list[str], within: cst.CSTNode) -> bool:
        inner = Counter(_names(within))
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
        if name in _names(loop.target) + _names(loop.iter) + _names(elt) + (_names(cond) if cond else []):
            return None
        parts = [_wrap(elt, _ATOMS + (cst.BinaryOperation, cst.Comparison)), "for", _code(loop.target), "in",
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
        fors, node = [], comp.for_in
        while node is not None:
            fors.append(node)
            node = node.inner_for_in
        targets = [n for f in fors for n in _stored(f.target)]
        if any(f.asynchronous for f in fors) or _unsafe_inside(comp) or name in _names(comp) \
                or len(targets) != sum(len(_names(f.target)) for f in fors) or not self._private(targets, comp):
            return None
        lines, depth = [f"{name} = []"], 0
        for f in fors:
            lines.append("    " * depth + f"for {_code(f.target)} in {_wrap(f.iter, _ANY)}:")
            depth += 1
            for c in f.ifs:
                lines.append("    " * depth + f"if {_wrap(c.test, _ANY)}:")
                depth += 1
        lines.append("    " * depth + f"{name}.append({_code(comp.elt)})")
        body = cst.parse_module("\n".join(lines) + "\n").body
        return [body[0].with_changes(leading_lines=stmt.leading_lines), body[1]]


def _visible_names(body: cst.CSTNode) -> set[str]:
    """Names a nested scope uses or a ``global``/``nonlocal`` statement declares."""
    names = _nested_scope_names(body)

    class Declared(cst.CSTVisitor):
        def visit_Global(self, node) -> None:
            names.update(item.name.value for item in node.names)

        def visit_Nonlocal(self, node) -> None:
            names.update(item.name.value for item in node.names)

    body.visit(Declared())
    return names


def _function_seed(qualname: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"L4\0{qualname}\0{seed}".encode()).digest()[:8], "big")


def _apply(func: cst.FunctionDef, name: str, rng: random.Random, p: float, taken: set[str]) -> cst.FunctionDef:
    if name == "rename":
        return _rename(func, rng, p, taken)
    body = func.body
    if name == "invert":
        body = body.visit(_Invert(rng, p))
    elif name == "swap":
        body = body.visit(_Swap(rng, p))
    elif name == "augment":
        body = body.visit(_Augment(rng, p, _int_locals(func)))
    elif name == "loops":
        body = body.visit(_Loops(rng, p, Counter(_names(func.body)), _visible_names(func.body)))
    return func.with_changes(body=body)


def _rewrite_function(func: cst.FunctionDef, qualname: str, seed: int, taken: set[str],
                      passes: tuple[str, ...]) -> cst.FunctionDef:
    if not isinstance(func.body, cst.IndentedBlock) or _is_dynamic(func):
        return func
    rng = random.Random(_function_seed(qualname, seed))
    order = rng.sample(passes, len(passes))
    for p in (0.5, 1.0):  # a second, full attempt when the coin flips changed nothing
        current = func
        for name in order:
            candidate = _apply(current, name, rng, p, set(taken))
            if _compiles(candidate):
                current = candidate
        if not current.deep_equals(func):
            taken.update(_names(current.body))
            return current
    return func


def _compiles(func: cst.FunctionDef) -> bool:
    try:
        compile(_code(cst.Module(body=[func.with_changes(leading_lines=[])])), "<l4>", "exec")
    except SyntaxError:
        return False
    return True


class _Target(cst.CSTTransformer):
    def __init__(self, qualname: str, seed: int, taken: set[str], passes: tuple[str, ...]) -> None:
        self.qualname, self.seed, self.taken, self.passes = qualname, seed, taken, passes
        self.stack, self.found = [], 0

    def visit_ClassDef(self, node) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_ClassDef(self, original, updated):
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node) -> bool:
        return False

    def leave_FunctionDef(self, original, updated):
        if ".".join([*self.stack, original.name.value]) != self.qualname:
            return updated
        self.found += 1
        return _rewrite_function(updated, self.qualname, self.seed * 1000 + self.found, self.taken,
                                 self.passes)


def rewrite_function_source(module_source: str, qualname: str, seed: int, passes: Sequence[str] = PASSES) -> str:
    """``module_source`` with every function named ``qualname`` (``f``, ``Cls.meth``,
    ``Outer.Inner.meth``) rewritten as the module doc describes, chosen by ``seed``.

    ``passes`` restricts the transformations (names from ``PASSES``). Everything outside
    those functions' bodies is byte-identical. A function with nothing safe to change comes
    back unchanged. Raises ``libcst.ParserSyntaxError`` on unparsable source, ``KeyError``
    when no function has that qualified name, ``ValueError`` on an unknown pass.
    """
    unknown = sorted(set(passes) - set(PASSES))
    if unknown:
        raise ValueError(f"unknown L4 passes {unknown}; known: {', '.join(PASSES)}")
    module = cst.parse_module(module_source)
    taken = set(re.findall(r"[A-Za-z_]\w*", module_source))
    target = _Target(qualname, seed, taken, tuple(passes))
    new = module.visit(target)
    if not target.found:
        raise KeyError(f"no function {qualname!r} at module or class level")
    return new.code


def _functions(tree: ast.AST, prefix: str = ""):
    """``(qualname, node)`` for each def at module or class level, in source order."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.ExceptHandler)):
            yield from _functions(node, prefix)


def same_interface(before: str, after: str, qualname: str) -> bool:
    """Whether every function ``qualname`` keeps its name, kind, signature, decorators,
    return annotation and docstring from module ``before`` to module ``after``.

    False when either module has no such function or their counts differ; raises
    ``SyntaxError`` when either does not parse.
    """
    def interface(source: str) -> list[str]:
        return [
            ast.dump(ast.Module(body=[*n.decorator_list, n.args, *([n.returns] if n.returns else [])],
                                type_ignores=[])) + f"|{type(n).__name__}|{n.name}|{ast.get_docstring(n, False)}"
            for q, n in _functions(ast.parse(source)) if q == qualname
        ]

    old = interface(before)
    return bool(old) and old == interface(after)


def functions_enclosing_patch(module_source: str, patch_hunks: list[tuple[int, int]]) -> list[str]:
    """Qualified names of the module- or class-level functions whose lines (decorators to
    last line) enclose a hunk, for hunks given as 1-based inclusive ``(first, last)`` line
    ranges of the original file (pass the changed lines, not the diff context). Innermost
    enclosing function per hunk, each name once, in hunk order; hunks outside any function
    contribute nothing. Raises ``SyntaxError`` on unparsable source.
    """
    spans = [(q, min([n.lineno, *(d.lineno for d in n.decorator_list)]), n.end_lineno)
             for q, n in _functions(ast.parse(module_source))]
    found: list[str] = []
    for first, last in patch_hunks:
        inside = [(end - start, q) for q, start, end in spans if start <= first and last <= end]
        if inside and min(inside)[1] not in found:
            found.append(min(inside)[1])
    return found
