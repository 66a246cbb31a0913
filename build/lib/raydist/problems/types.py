"""Input types of a seed problem's entry point, inferred from its tests (DyCodeEval §3.2).

The Context Generation Agent needs a type for each input variable. As in §3.2, the
concrete inputs are gathered from the seed's ``assert`` statements: every call of the
entry point whose arguments are literals (``ast.literal_eval``) contributes one observed
value per parameter, and each value is abstracted recursively into a type string.
Return types are not inferred, as §3.2 also says: arguments are concrete values, but what
an assert compares the result with may be an expression, a tolerance or a property of it.

Abstraction rules (:func:`abstract_type`):

- scalars by their Python type: ``bool``, ``int``, ``float``, ``complex``, ``str``,
  ``bytes``, ``None``;
- ``list[T]``, ``set[T]``, ``frozenset[T]``, ``dict[K, V]`` where ``T``, ``K``, ``V`` are
  the unions of the element (key, value) types; an empty container has ``Any`` there
  (``list[Any]``, ``dict[Any, Any]``);
- tuples keep one type per position (``tuple[int, str]``), except that a tuple of three or
  more elements that all have one type becomes ``tuple[T, ...]`` (such tuples are sequences,
  as in MBPP's ``test_tup`` arguments, rather than records); ``()`` is ``tuple[()]``.

Unions (``int | str``) are merged structurally: ``Any`` disappears next to any other type,
containers of one kind merge their element types (``list[int] | list[str]`` is
``list[int | str]``), tuples of equal length merge position by position, and a
``tuple[T, ...]`` absorbs the fixed tuples beside it (their positions join ``T``).
Members are ordered ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
containers, other types, then ``None`` last, so the same values always give the same string.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from raydist.problems._source import example_source, parse
from raydist.problems.seeds import Problem

ANY = "Any"
SEQUENCE_TUPLE_MIN = 3
"""A homogeneous tuple with at least this many elements is abstracted as ``tuple[T, ...]``."""
_SCALAR_ORDER = ("bool", "int", "float", "complex", "str", "bytes")
_ELEMENT_KINDS = ("list", "set", "frozenset")


@dataclass(frozen=True)
class _Type:
    """A type: ``kind`` names it (``int``, ``list``, ``tuple``, ``tuple...``, ``dict``, ``Any``...).

    ``args`` holds one union per type argument: the element of a list/set/``tuple...``,
    key and value of a dict, one per position of a fixed tuple.
    """

    kind: str
    args: tuple[frozenset[_Type], ...] = ()


def abstract_type(value: Any) -> str:
    """The type string of one concrete value, following the rules of this module's docstring.

    ``[1, "a"]`` -> ``"list[int | str]"``; ``{"a": [1]}`` -> ``"dict[str, list[int]]"``;
    ``[(1, "x")]`` -> ``"list[tuple[int, str]]"``; ``(1, 2, 3)`` -> ``"tuple[int, ...]"``;
    ``[]`` -> ``"list[Any]"``. A value of another type is named by its class (``"ellipsis"``).
    """
    return _render_union(frozenset({_abstract(value)}))


@dataclass(frozen=True)
class SkippedArgument:
    """An argument of an entry-point call that gave no type: where it is and why."""

    source: str
    """Which of the problem's ``tests`` holds the call, 1-based: ``"test 3"``."""
    argument: str
    """The argument's source text, e.g. ``"x + 1"``."""
    reason: str


@dataclass(frozen=True)
class InferredTypes:
    """Per parameter (signature order) its type string, and the arguments that were skipped."""

    types: dict[str, str]
    skipped: tuple[SkippedArgument, ...]


def infer_parameter_types(problem: Problem) -> dict[str, str]:
    """``{parameter name: type string}`` for the entry point of ``problem``, in signature order.

    ``has_close_elements`` (HumanEval/0) gives ``{"numbers": "list[float]", "threshold": "float"}``.
    See :func:`infer_types` for the sources and for what is skipped.
    """
    return infer_types(problem).types


def infer_types(problem: Problem) -> InferredTypes:
    """Parameter types of ``problem``'s entry point and the call arguments that could not be used.

    Values come from every call of the entry point in ``problem.tests`` (also calls through
    a function parameter it is passed to, as in ``check(candidate)``). A parameter that no
    test call gives a literal for takes its values from the ``>>>`` examples instead, and
    is ``"Any"`` when those give none either. Positional arguments map to parameters in
    order, keywords by name; surplus ones go to ``*args`` / ``**kwargs`` (each element
    observed separately). Arguments of the test calls that are not literals (``x + 1``,
    ``float("inf")``), ``*``/``**`` unpacking and arguments matching no parameter are
    skipped and listed in ``skipped``.
    Raises ``ValueError`` when ``problem.signature`` does not parse.
    """
    parameters = _Parameters.from_signature(problem.signature)
    from_tests = _Observations(parameters)
    for index, test in enumerate(problem.tests, start=1):
        from_tests.add_source(f"test {index}", test, problem.entry_point)
    from_examples = _Observations(parameters)
    for index, example in enumerate(problem.examples, start=1):
        from_examples.add_source(f"example {index}", example_source(example), problem.entry_point)
    types = {}
    for name in parameters.names:
        seen = from_tests.values.get(name) or from_examples.values.get(name)
        types[name] = _render_union(frozenset(seen)) if seen else ANY
    return InferredTypes(types, from_tests.skipped)


@dataclass(frozen=True)
class _Parameters:
    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    varargs: str | None
    varkw: str | None

    @classmethod
    def from_signature(cls, signature: str) -> _Parameters:
        try:
            node = parse(f"{signature.strip()}\n    pass").body[0]
        except SyntaxError as error:
            raise ValueError(f"signature {signature!r} does not parse ({error.msg})") from None
        if not isinstance(node, ast.FunctionDef):
            raise ValueError(f"signature {signature!r} is not a def header")
        arguments = node.args
        return cls(
            positional=tuple(a.arg for a in arguments.posonlyargs + arguments.args),
            keyword_only=tuple(a.arg for a in arguments.kwonlyargs),
            varargs=arguments.vararg.arg if arguments.vararg else None,
            varkw=arguments.kwarg.arg if arguments.kwarg else None,
        )

    @property
    def names(self) -> tuple[str, ...]:
        varargs = (self.varargs,) if self.varargs else ()
        varkw = (self.varkw,) if self.varkw else ()
        return self.positional + varargs + self.keyword_only + varkw

    def for_position(self, index: int) -> str | None:
        return self.positional[index] if index < len(self.positional) else self.varargs

    def for_keyword(self, keyword: str) -> str | None:
        return keyword if keyword in self.positional + self.keyword_only else self.varkw


class _Observations:
    """The abstracted values seen for each parameter, and the skipped arguments."""

    def __init__(self, parameters: _Parameters):
        self.parameters = parameters
        self.values: dict[str, set[_Type]] = {}
        self.skipped: tuple[SkippedArgument, ...] = ()

    def add_source(self, where: str, source: str, entry_point: str) -> None:
        try:
            tree = parse(source)
        except SyntaxError as error:
            self._skip(where, source, f"does not parse ({error.msg})")
            return
        for call in _entry_point_calls(tree, entry_point):
            self._add_call(where, call)

    def _add_call(self, where: str, call: ast.Call) -> None:
        bound = [(self.parameters.for_position(i), arg) for i, arg in enumerate(call.args)]
        bound += [(self.parameters.for_keyword(k.arg) if k.arg else None, k) for k in call.keywords]
        for name, node in bound:
            if isinstance(node, ast.Starred) or (isinstance(node, ast.keyword) and node.arg is None):
                self._skip(where, ast.unparse(node), "unpacks a value into several arguments")
            elif name is None:
                self._skip(where, ast.unparse(node), "matches no parameter of the signature")
            else:
                self._observe(where, name, node.value if isinstance(node, ast.keyword) else node)

    def _observe(self, where: str, name: str, node: ast.expr) -> None:
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            self._skip(where, ast.unparse(node), f"is not a literal, so it gives no type for {name!r}")
            return
        self.values.setdefault(name, set()).add(_abstract(value))

    def _skip(self, where: str, argument: str, reason: str) -> None:
        self.skipped += (SkippedArgument(where, argument, reason),)


def _entry_point_calls(tree: ast.AST, entry_point: str) -> Iterator[ast.Call]:
    """Calls of ``entry_point``, also through the parameter of a function it is passed to."""
    aliases = {entry_point} | _parameter_aliases(tree, entry_point)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in aliases:
            yield node


def _parameter_aliases(tree: ast.AST, entry_point: str) -> set[str]:
    # check(candidate) ... check(entry_point): inside check, `candidate` is the entry point.
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    aliases = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
            continue
        parameters = functions[node.func.id].args.posonlyargs + functions[node.func.id].args.args
        for position, argument in enumerate(node.args[: len(parameters)]):
            if isinstance(argument, ast.Name) and argument.id == entry_point:
                aliases.add(parameters[position].arg)
    return aliases


# --- the type algebra ---------------------------------------------------------------


def _abstract(value: Any) -> _Type:
    if value is None:
        return _Type("None")
    if isinstance(value, (list, set, frozenset)):
        return _Type(type(value).__name__, (_elements(value),))
    if isinstance(value, dict):
        return _Type("dict", (_elements(value.keys()), _elements(value.values())))
    if isinstance(value, tuple):
        items = tuple(frozenset({_abstract(item)}) for item in value)
        if len(items) >= SEQUENCE_TUPLE_MIN and len(set(items)) == 1:
            return _Type("tuple...", (items[0],))
        return _Type("tuple", items)
    return _Type(type(value).__name__)


def _elements(values: Iterable[Any]) -> frozenset[_Type]:
    types = frozenset(_abstract(value) for value in values)
    return types or frozenset({_Type(ANY)})


def _merge(types: frozenset[_Type]) -> frozenset[_Type]:
    """A union with ``Any`` dropped beside other types and same-shaped containers merged."""
    if len(types) > 1:
        types = frozenset(t for t in types if t.kind != ANY)
    groups: dict[tuple[str, int], list[_Type]] = {}
    for t in types:
        groups.setdefault(_shape(t), []).append(t)
    merged = {_merge_group(group) for group in groups.values()}
    sequences = {t for t in merged if t.kind == "tuple..."}
    if sequences:
        (sequence,) = sequences
        absorbed = {t for t in merged if t.kind == "tuple"}
        element = _merge(sequence.args[0].union(*(arg for t in absorbed for arg in t.args)))
        merged = (merged - absorbed - {sequence}) | {_Type("tuple...", (element,))}
    return frozenset(merged)


def _shape(t: _Type) -> tuple[str, int]:
    # Fixed tuples merge only with tuples of their length; other kinds merge by kind alone.
    return (t.kind, len(t.args) if t.kind == "tuple" else 0)


def _merge_group(group: list[_Type]) -> _Type:
    if len(group) == 1:
        return _Type(group[0].kind, tuple(_merge(arg) for arg in group[0].args))
    positions = zip(*(t.args for t in group))
    return _Type(group[0].kind, tuple(_merge(frozenset().union(*position)) for position in positions))


def _render_union(types: frozenset[_Type]) -> str:
    return " | ".join(_render(t) for t in sorted(_merge(types), key=_order))


def _render(t: _Type) -> str:
    if t.kind == "tuple...":
        return f"tuple[{_render_union(t.args[0])}, ...]"
    if t.kind == "tuple" and not t.args:
        return "tuple[()]"
    if not t.args:
        return t.kind
    return f"{t.kind}[{', '.join(_render_union(arg) for arg in t.args)}]"


def _order(t: _Type) -> tuple[int, str]:
    if t.kind in _SCALAR_ORDER:
        return (_SCALAR_ORDER.index(t.kind), "")
    if t.kind == "None":
        return (len(_SCALAR_ORDER) + 3, "")
    container = t.kind in _ELEMENT_KINDS or t.kind in ("dict", "tuple", "tuple...")
    return (len(_SCALAR_ORDER) + (1 if container else 2), _render(t))
