"""Which definitions L3 may move: only those *known* to be order-free (SchrodingerRepo §III-D).

§III-D moves definitions "while preserving repository behavior". Name availability (the
``deps`` graph) is not enough for that: a decorator such as ``@app.route(...)``,
``@registry.register``, ``@atexit.register``, ``@fun.register`` (``functools.singledispatch``)
or ``@pytest.fixture(autouse=True)`` runs code that appends to a list or dict, so swapping
two such definitions changes what the program does although no name moved. The rule here
is an allow-list, never a deny-list: a definition is *order-free* only when everything it
runs while being defined is known to be pure. Any other definition is *pinned*: it keeps
its relative order with every other pinned definition of its run (``reorder`` adds those
edges); module-level statements never move at all (they are the run anchors of §III-D).

A function or method is pinned when
  * a decorator is not in ``PURE_DECORATORS`` (after resolving the module's imports), or is
    a pure decorator called with arguments that call something impure;
  * a default value or an evaluated annotation calls something not in ``PURE_CALLS``;
  * pytest collects it in definition order: a top-level ``test*`` function, or a ``test*``
    method of a ``Test*`` class (pytest's default ``python_functions``/``python_classes``).
A class is pinned when, besides the decorator and pytest rules,
  * it has a ``metaclass`` outside ``PURE_METACLASSES`` or any other class keyword
    (those go to an ``__init_subclass__``);
  * a base is neither a built-in type, nor in ``PURE_BASES``, nor a class of the same module
    without a creation hook. A class has a creation hook when it defines
    ``__init_subclass__``, has an impure metaclass, or has such a base or an unknown
    (imported) base: its subclasses then run code that may register them;
  * its body holds anything but a docstring, ``pass``, order-free methods and nested
    classes, and assignments to plain names of expressions that call nothing impure
    (a call at class level, ``if``/``for``/``try``, an import, an ``x.y = ...``).
A class with an impure metaclass also pins every definition of its own body, because the
metaclass sees its namespace in order. Beyond that boundary a method's position in its
class is taken as unobservable (no hook here reads ``cls.__dict__`` order).

Groups that must stay contiguous move as one block: an ``@overload`` group with its
implementation, and a property with its ``@x.setter``/``getter``/``deleter``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from raydist.views.l3._names import Names

Definition = cst.FunctionDef | cst.ClassDef

_TYPING = ("typing", "typing_extensions")
PURE_DECORATORS = frozenset(
    {
        "builtins.staticmethod", "builtins.classmethod", "builtins.property",
        "abc.abstractmethod", "abc.abstractproperty", "abc.abstractclassmethod", "abc.abstractstaticmethod",
        "functools.wraps", "functools.lru_cache", "functools.cache", "functools.cached_property",
        "functools.total_ordering", "functools.singledispatch", "functools.singledispatchmethod",
        "contextlib.contextmanager", "contextlib.asynccontextmanager",
        "dataclasses.dataclass", "enum.unique",
        *(f"{t}.{n}" for t in _TYPING for n in (
            "overload", "final", "runtime_checkable", "no_type_check", "override", "type_check_only",
            "dataclass_transform",
        )),
    }
)
"""Decorators that only wrap or mark what they decorate and record nothing elsewhere."""

PURE_CALLS = PURE_DECORATORS | frozenset(
    {
        *(f"builtins.{n}" for n in (
            "object", "frozenset", "tuple", "list", "dict", "set", "str", "int", "float", "complex", "bool",
            "bytes", "len", "range", "slice", "repr", "isinstance", "getattr", "hasattr", "type", "sorted",
            "min", "max", "abs", "sum", "any", "all",
        )),
        "dataclasses.field", "collections.namedtuple", "re.compile", "enum.auto",
        *(f"{t}.{n}" for t in _TYPING for n in ("TypeVar", "ParamSpec", "NewType", "cast", "NamedTuple", "TypedDict")),
    }
)
"""Callables whose call at definition time has no effect outside the value it returns."""

PURE_BASES = frozenset(
    {
        "abc.ABC", "enum.Enum", "enum.IntEnum", "enum.Flag", "enum.IntFlag", "enum.StrEnum",
        *(f"{t}.{n}" for t in _TYPING for n in ("Generic", "Protocol", "NamedTuple", "TypedDict", "Any")),
    }
)
"""Base classes whose subclass creation runs no user code (beyond built-in types)."""

PURE_METACLASSES = frozenset({"builtins.type", "abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"})
_OVERLOADS = frozenset(f"{t}.overload" for t in _TYPING)
_ACCESSORS = frozenset({"setter", "getter", "deleter"})
_BUILTIN_TYPES = frozenset(n for n in dir(builtins) if isinstance(getattr(builtins, n), type))
_EMPTY = cst.Module(body=[])


def _text(node: cst.CSTNode, limit: int = 60) -> str:
    code = " ".join(_EMPTY.code_for_node(node).split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


class _ImpureCall(cst.CSTVisitor):
    def __init__(self, names: Names, shadowed: frozenset[str]) -> None:
        self.names, self.shadowed = names, shadowed
        self.found: cst.Call | None = None

    def visit_Call(self, node: cst.Call) -> bool:
        root = node.func
        while isinstance(root, cst.Attribute):
            root = root.value
        pure = not (isinstance(root, cst.Name) and root.value in self.shadowed) and (
            self.names.dotted(node.func) in PURE_CALLS
        )
        if not pure and self.found is None:
            self.found = node
        return self.found is None

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        node.params.visit(self)  # defaults run now, the body later
        return False


@dataclass
class Pinning:
    """The pin facts of one module: ``Names`` plus the creation hooks of its top-level classes."""

    names: Names
    future_annotations: bool
    hooks: dict[str, str] = field(default_factory=dict)
    """Top-level class name -> why its subclasses run code at creation."""
    metaclassed: dict[str, str] = field(default_factory=dict)
    """Top-level class name -> the impure metaclass its body's namespace goes through."""

    def impure_call(self, nodes: Sequence[cst.CSTNode | None], shadowed: frozenset[str] = frozenset()) -> str | None:
        """``call: f`` for the first call in ``nodes`` outside ``PURE_CALLS``, else None."""
        finder = _ImpureCall(self.names, shadowed)
        for node in nodes:
            if node is not None and finder.found is None:
                node.visit(finder)
        return None if finder.found is None else f"call: {_text(finder.found.func)}"

    def decorator_reason(self, deco: cst.Decorator, owner: str, earlier: frozenset[str],
                         shadowed: frozenset[str]) -> str | None:
        """Why decorator ``deco`` of definition ``owner`` pins it, or None when it is pure.

        ``earlier``: names already defined in the same body (``@owner.setter`` needs its getter);
        ``shadowed``: names bound in the enclosing class body, which decorators see first.
        """
        expr = deco.decorator
        if (
            isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
            and expr.value.value == owner and owner in earlier and expr.attr.value in _ACCESSORS
        ):
            return None
        callee = expr.func if isinstance(expr, cst.Call) else expr
        root = callee
        while isinstance(root, cst.Attribute):
            root = root.value
        known = (not (isinstance(root, cst.Name) and root.value in shadowed)
                 and self.names.dotted(callee) in PURE_DECORATORS)
        if not known:
            return f"decorator: {_text(callee)}"
        return self.impure_call(expr.args if isinstance(expr, cst.Call) else (), shadowed)

    def is_overload(self, node: Definition) -> bool:
        """True iff ``node`` is decorated with ``typing.overload`` (or typing_extensions')."""
        return any(self.names.dotted(d.decorator) in _OVERLOADS for d in node.decorators)

    def function_reason(self, node: cst.FunctionDef, earlier: frozenset[str], shadowed: frozenset[str]) -> str | None:
        """Why ``node`` runs impure code while being defined, or None."""
        for deco in node.decorators:
            reason = self.decorator_reason(deco, node.name.value, earlier, shadowed)
            if reason:
                return reason
        p = node.params
        params = [*p.posonly_params, *p.params, *p.kwonly_params]
        if isinstance(p.star_arg, cst.Param):
            params.append(p.star_arg)
        if p.star_kwarg is not None:
            params.append(p.star_kwarg)
        evaluated: list[cst.CSTNode | None] = [q.default for q in params]
        if not self.future_annotations:
            evaluated += [q.annotation for q in params] + [node.returns]
        return self.impure_call(evaluated, shadowed)

    def base_reason(self, base: cst.Arg) -> str | None:
        """Why class base ``base`` may run code when subclassed, or None."""
        expr = base.value
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        name = None if base.star else self.names.dotted(expr)
        if name is None:
            return f"base: {_text(base.value)}"
        if name.startswith("local:"):
            hook = self.hooks.get(name[6:])
            return f"base_hook: {name[6:]}" if hook else None
        if name in PURE_BASES or (name.startswith("builtins.") and name[9:] in _BUILTIN_TYPES):
            return None
        return f"base: {_text(base.value)}"

    def metaclass_reason(self, node: cst.ClassDef) -> str | None:
        """``metaclass: M`` for an impure metaclass, ``class_keyword: k`` for any other keyword."""
        for kw in node.keywords:
            if kw.keyword is None or kw.keyword.value != "metaclass":
                return f"class_keyword: {_text(kw)}"
            if self.names.dotted(kw.value) not in PURE_METACLASSES:
                return f"metaclass: {_text(kw.value)}"
        return None

    def class_reason(self, node: cst.ClassDef, shadowed: frozenset[str] = frozenset()) -> str | None:
        """Why creating class ``node`` runs impure code (decorators, keywords, bases, body), or None."""
        for deco in node.decorators:
            reason = self.decorator_reason(deco, node.name.value, frozenset(), shadowed)
            if reason:
                return reason
        reason = self.metaclass_reason(node) or next(filter(None, map(self.base_reason, node.bases)), None)
        return reason or self.body_reason(node)

    def body_reason(self, node: cst.ClassDef) -> str | None:
        """Why the statements of class body ``node`` have effects at class creation, or None."""
        if isinstance(node.body, cst.SimpleStatementSuite):
            return _simple_line_reason(self, node.body.body, frozenset())
        own = frozenset(class_bindings(node))
        earlier: set[str] = set()
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef):
                reason = self.function_reason(stmt, frozenset(earlier), own)
                reason = reason and f"class_body: {stmt.name.value} {reason}"
            elif isinstance(stmt, cst.ClassDef):
                reason = self.class_reason(stmt, own)
                reason = reason and f"class_body: {stmt.name.value} {reason}"
            elif isinstance(stmt, cst.SimpleStatementLine):
                reason = _simple_line_reason(self, stmt.body, own)
            else:
                reason = f"class_body: {type(stmt).__name__.lower()}"
            if reason:
                return reason
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                earlier.add(stmt.name.value)
        return None


def _simple_line_reason(pins: Pinning, body: Sequence[cst.BaseSmallStatement], shadowed: frozenset[str]) -> str | None:
    for small in body:
        if isinstance(small, cst.Pass) or (
            isinstance(small, cst.Expr)
            and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis))
        ):
            continue
        if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
            reason = pins.impure_call([small.value], shadowed)
        elif isinstance(small, cst.Expr):
            reason = pins.impure_call([small.value], shadowed)
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            annotation = None if pins.future_annotations else small.annotation
            reason = pins.impure_call([small.value, annotation], shadowed)
        else:
            reason = f"statement: {_text(small)}"
        if reason:
            return f"class_body: {reason}"
    return None


def class_bindings(node: cst.ClassDef) -> set[str]:
    """Names bound directly in the body of class ``node`` (defs, classes, plain assignments)."""
    names: set[str] = set()
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                    [small.target] if isinstance(small, cst.AnnAssign) else []
                )
                names.update(t.value for t in targets if isinstance(t, cst.Name))
    return names


def creation_hook(pins: Pinning, node: cst.ClassDef) -> str | None:
    """Why subclasses of top-level class ``node`` run code when created, or None."""
    if "__init_subclass__" in class_bindings(node):
        return "defines __init_subclass__"
    return pins.metaclass_reason(node) or next(
        (r for r in map(pins.base_reason, node.bases) if r), None
    )


def module_pinning(module: cst.Module, future_annotations: bool) -> Pinning:
    """The ``Pinning`` of ``module``: its imports and, in order, its top-level classes' hooks."""
    pins = Pinning(Names(module), future_annotations)
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            hook = creation_hook(pins, stmt)
            if hook:
                pins.hooks[stmt.name.value] = hook
            meta = namespace_metaclass(pins, stmt)
            if meta:
                pins.metaclassed[stmt.name.value] = meta
    return pins


def namespace_metaclass(pins: Pinning, node: cst.ClassDef) -> str | None:
    """The impure metaclass (own, or of a same-module base) that receives ``node``'s namespace."""
    reason = pins.metaclass_reason(node)
    if reason and reason.startswith("metaclass: "):
        return reason[len("metaclass: "):]
    for base in node.bases:
        expr = base.value
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        name = pins.names.dotted(expr) or ""
        if name.startswith("local:") and name[6:] in pins.metaclassed:
            return pins.metaclassed[name[6:]]
    return None


def pytest_collected(node: Definition, owner: str | None) -> bool:
    """True iff pytest would collect ``node`` (default name patterns), in definition order.

    ``owner``: the enclosing class name for a method, None at module level.
    """
    name = node.name.value
    if owner is None:
        return name.startswith("Test") if isinstance(node, cst.ClassDef) else name.startswith("test")
    return owner.startswith("Test") and isinstance(node, cst.FunctionDef) and name.startswith("test")


def groups(run: Sequence[Definition], pins: Pinning) -> list[list[int]]:
    """Indices of ``run`` cut into blocks that move as one (overloads, property accessors)."""
    blocks: list[list[int]] = []
    for i, node in enumerate(run):
        prev = run[i - 1] if i else None
        joins = prev is not None and prev.name.value == node.name.value and (
            pins.is_overload(prev) or pins.is_overload(node) or _is_accessor(node)
        )
        if joins:
            blocks[-1].append(i)
        else:
            blocks.append([i])
    return blocks


def _is_accessor(node: Definition) -> bool:
    return any(
        isinstance(d.decorator, cst.Attribute) and isinstance(d.decorator.value, cst.Name)
        and d.decorator.value.value == node.name.value and d.decorator.attr.value in _ACCESSORS
        for d in node.decorators
    )


def chain_edges(pinned: Sequence[bool]) -> list[tuple[int, int]]:
    """Edges keeping the pinned nodes of a run in their original relative order."""
    positions = [i for i, p in enumerate(pinned) if p]
    return list(zip(positions, positions[1:]))

