"""The registry of view levels, and how a level spec becomes a view.

Every level of SchrodingerRepo §III is one ``Level`` in ``LEVELS``: its name, where it applies
in a composition, the pure function that refines a view, and whether it reads inputs computed
before the view is built (``Prepared``: L1's paraphrase, L4's test-gated rewrites). A spec
joins levels with ``+`` (``L1+L3``) or names an alias (``full``); ``build_view`` applies its
levels in registry order.

To find what one level does, follow its ``build`` function: ``raydist.views.l0`` (L0),
``l1.level`` (L1), ``l2.namespace`` (L2), ``l3.reorder`` (L3), ``l4.level`` (L4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Protocol

from raydist.views.audit import identity_tokens
from raydist.views.base import Prepared, RepoFiles, View, ViewOptions
from raydist.views.l0 import canonical
from raydist.views.l1.level import statement_level
from raydist.views.l2.namespace import namespace_level
from raydist.views.l3.reorder import reorder_level
from raydist.views.l4.level import rewrite_level


class _Instance(Protocol):
    instance_id: str
    problem_statement: str
    patch: str
    test_patch: str


#: ``(view, instance, repo, seed, options, prepared) -> view``
LevelFn = Callable[[View, _Instance, RepoFiles, int, ViewOptions, Prepared], View]


@dataclass(frozen=True)
class Level:
    """One view level.

    ``order`` fixes where the level applies in a composition, whatever order the user writes:
    the statement first (L1), then file content (L4 rewrites the original functions, L3
    reorders the result), then names (L2 translates whatever the others produced).
    ``needs_preparation``: ``build`` reads ``Prepared`` inputs that ``raydist.cluster.prepare``
    computes with an LLM or a test gate before the view is built.
    """

    name: str
    order: int
    build: LevelFn
    needs_preparation: bool = False


LEVELS: dict[str, Level] = {
    level.name: level
    for level in (
        Level("L0", 0, canonical),
        Level("L1", 10, statement_level, needs_preparation=True),
        Level("L4", 20, rewrite_level, needs_preparation=True),
        Level("L3", 30, reorder_level),
        Level("L2", 40, namespace_level),
    )
}
#: Names that stand for a composition: ``full`` is every level of SchrodingerRepo §III at once.
ALIASES = {"full": ("L1", "L2", "L3", "L4")}


def register_level(name: str, order: int, needs_preparation: bool = False) -> Callable[[LevelFn], LevelFn]:
    """Decorator adding a level function to ``LEVELS`` under ``name`` (e.g. ``"L5"``); ``order``
    and ``needs_preparation`` as in ``Level``.

    Raises ValueError when ``name`` is empty, contains ``+``, is an alias or is already
    registered by another function.
    """
    if not name or "+" in name or name in ALIASES:
        raise ValueError(f"level name {name!r} must be non-empty, must not contain '+' and must not be an alias")

    def register(fn: LevelFn) -> LevelFn:
        if name in LEVELS and LEVELS[name].build is not fn:
            raise ValueError(f"level {name!r} is already registered by {LEVELS[name].build.__module__}")
        LEVELS[name] = Level(name, order, fn, needs_preparation)
        return fn

    return register


def known_levels() -> list[str]:
    """Registered level names, sorted (aliases such as ``full`` are not listed)."""
    return sorted(LEVELS)


def implemented_levels() -> list[str]:
    """Every level a launch can name: the registered ones, sorted, then the aliases whose
    parts are all registered (``full``)."""
    return known_levels() + [a for a, parts in ALIASES.items() if all(p in LEVELS for p in parts)]


class UnknownLevel(ValueError):
    """A level spec names a level that is not registered: ``name`` in ``spec``."""

    def __init__(self, name: str, spec: str) -> None:
        super().__init__(f"unknown level {name!r} in {spec!r}; known levels: {', '.join(implemented_levels())}")
        self.name, self.spec = name, spec


def parse_level(level: str) -> list[str]:
    """Split a ``+``-joined level spec (aliases expanded) into registered level names, in
    application order (``Level.order``). The one parser of level specs: a launch's ``levels``
    setting goes through it too (``level_specs``).

    Raises ``UnknownLevel`` (a ValueError) naming an unknown level, and ValueError naming a
    repeated level or an empty spec, each listing the known ones.
    """
    if not isinstance(level, str) or not level.strip():
        raise ValueError(f"level {level!r} is empty; use one of {known_levels()} or a '+' join like 'L1+L3'")
    names = [n for part in level.split("+") for n in ALIASES.get(part.strip(), (part.strip(),))]
    for name in names:
        if name not in LEVELS:
            raise UnknownLevel(name, level)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"level {level!r} repeats {', '.join(repeated)}; name each level once")
    return sorted(names, key=lambda n: LEVELS[n].order)


def level_specs(levels: str | Sequence[str]) -> list[str]:
    """The level specs of a launch's ``levels`` setting, as written, each checked by
    ``parse_level``: a list of specs (``L0``, ``L3``, ``L1+L3``, ``full``...), one spec, or the
    word ``implemented`` (every ``implemented_levels()`` name).

    Raises ValueError before any unit runs: ``levels: unknown level ...`` listing the
    implemented levels, or the repeated level of a spec (``L1+full``).
    """
    if isinstance(levels, str):
        if levels == "implemented":
            return implemented_levels()
        levels = [levels]
    out = []
    for level in map(str, levels):
        try:
            parse_level(level)
        except UnknownLevel as exc:
            raise ValueError(f"levels: unknown level {exc.name!r} in {level!r}; implemented levels are "
                             f"{', '.join(implemented_levels())} (compose with '+', e.g. L0+L3)") from None
        out.append(level)
    return out


def levels_needing(level: str) -> set[str]:
    """The levels of ``level`` that need ``Prepared`` inputs (``Level.needs_preparation``):
    ``{"L1", "L4"}`` or a subset."""
    return {n for n in parse_level(level) if LEVELS[n].needs_preparation}


def _check_instance(instance: Any) -> None:
    missing = [a for a in ("instance_id", "problem_statement", "patch", "test_patch") if not hasattr(instance, a)]
    if missing:
        raise TypeError(f"build_view: instance {instance!r} lacks {', '.join(missing)}; pass a raydist.tasks.Instance")


def build_view(
    instance: _Instance, repo: RepoFiles, level: str, seed: int, options: ViewOptions | None = None,
    prepared: Prepared | None = None,
) -> View:
    """Build the view of ``instance`` at ``level`` (``L0``, ``L3``, ``L1+L3``, ``full``...) for ``seed``.

    Levels apply in registry order (``Level.order``), each refining the previous view. The
    result's ``files`` keeps only paths whose view content differs from ``repo``. Same inputs
    give an equal view (SchrodingerRepo §III-A: the mapping is seeded). L1 and L4 read
    ``prepared`` (``raydist.cluster.prepare``). Every view carries the repository's identity
    tokens for the exposure audit (``View.identity``). Raises ValueError on an unknown level,
    ``MissingPreparation`` when L1/L4 lack their prepared inputs, TypeError on a non-integer
    seed or an instance without the task fields.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"build_view: seed must be an int, got {seed!r}")
    _check_instance(instance)
    names = parse_level(level)
    opts = options or ViewOptions()
    ready = prepared or Prepared()
    view = View(
        instance_id=instance.instance_id,
        level=level,
        seed=seed,
        problem_statement=instance.problem_statement,
        files={},
        identity=identity_tokens(repo, instance),
    )
    for name in names:
        view = LEVELS[name].build(view, instance, repo, seed, opts, ready)
    changed = {p: t for p, t in sorted(view.files.items()) if repo.read(p) != t}
    return replace(view, files=MappingProxyType(changed))
