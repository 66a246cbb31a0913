"""Level 3: intra-file layout reordering (SchrodingerRepo §III-D).

In each target file every maximal run of consecutive top-level ``def``/``class``
statements, and every such run inside a class body, is permuted to a seeded random
topological order of its definition-time dependency graph (``deps``), drawn uniformly
(``sample``). Every other statement is an anchor and never moves, so the overlay runs
exactly like the original: each name a definition reads while being defined is bound to
the same object as before, and (``pins``) every definition that is not known to be
order-free (a registering decorator such as ``@app.route``, a class whose creation runs
code, a pytest test) keeps its order relative to the other such definitions of its run.
Overload groups and property accessors move as one block.

Layout: comments above a definition travel with it; the blank lines that separate a
definition from the statement before it stay with the position, so a body's first
statement keeps its spacing and top-level definitions keep their two-line gaps.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

import libcst as cst

from raydist.views.base import FileRenderer, Prepared, RepoFiles, View, ViewOptions
from raydist.views.instance import ViewInstance
from raydist.views.l3.deps import (
    Definition,
    call_closure,
    definition_reads,
    has_future_annotations,
    module_call_reads,
    run_edges,
)
from raydist.views.l3.pins import (
    chain_edges,
    class_bindings,
    groups,
    module_pinning,
    namespace_metaclass,
    pytest_collected,
)
from raydist.views.l3.sample import sample_linear_extension
from raydist.views.recover import patched_paths


def file_seed(instance_id: str, path: str, seed: int) -> int:
    """64-bit RNG seed for one file of one view: sha256 of ``instance_id, path, seed``.

    Stable across processes and Python versions (unlike ``hash()``), so a view is
    byte-identical wherever it is rebuilt.
    """
    digest = hashlib.sha256(f"{instance_id}\0{path}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class _Reorderer:
    def __init__(self, module: cst.Module, rng: random.Random) -> None:
        self.rng = rng
        self.future = has_future_annotations(module)
        self.call_reads = module_call_reads(module)
        self.pins = module_pinning(module, self.future)
        self.graphs: list[tuple[list[str], list[tuple[int, int]]]] = []
        self.pinned: list[tuple[str, str]] = []

    def module_body(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        return self._reorder(body, owner=None, frozen=None, shadowed=frozenset())

    def _reads(self, node: Definition, top_level: bool) -> frozenset[str]:
        reads = definition_reads(node, future_annotations=self.future)
        # In a class body only class-local names can constrain siblings, and what a
        # function called at class creation reads is global, so no closure there.
        return call_closure(reads, self.call_reads) if top_level else reads

    def _pin_reason(self, node: Definition, owner: str | None, earlier: frozenset[str],
                    shadowed: frozenset[str]) -> str | None:
        if isinstance(node, cst.FunctionDef):
            reason = self.pins.function_reason(node, earlier, shadowed)
        else:
            reason = self.pins.class_reason(node, shadowed)
        return reason or ("pytest_order" if pytest_collected(node, owner) else None)

    def _reorder(
        self, body: Sequence[cst.BaseStatement], *, owner: str | None, frozen: str | None, shadowed: frozenset[str],
        prefix: str = "",
    ) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        run: list[tuple[Definition, bool]] = []
        earlier: set[str] = set()
        for stmt in [*body, None]:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                reason = frozen or self._pin_reason(stmt, owner, frozenset(earlier), shadowed)
                earlier.add(stmt.name.value)
                if reason:
                    self.pinned.append((prefix + stmt.name.value, reason))
                if isinstance(stmt, cst.ClassDef):
                    stmt = self._inside_class(stmt, prefix)
                run.append((stmt, reason is not None))
                continue
            out.extend(self._permute(run, top_level=owner is None))
            run = []
            if stmt is not None:
                out.append(stmt)
        return out

    def _inside_class(self, node: cst.ClassDef, prefix: str) -> cst.ClassDef:
        if not isinstance(node.body, cst.IndentedBlock):
            return node
        meta = namespace_metaclass(self.pins, node)
        body = self._reorder(
            node.body.body, owner=node.name.value, frozen=meta and f"metaclass_namespace: {meta}",
            shadowed=frozenset(class_bindings(node)), prefix=f"{prefix}{node.name.value}.",
        )
        return node.with_changes(body=node.body.with_changes(body=body))

    def _permute(self, run: list[tuple[Definition, bool]], top_level: bool) -> list[Definition]:
        nodes = [node for node, _ in run]
        if len(nodes) < 2:
            return nodes
        blocks = groups(nodes, self.pins)
        names = [nodes[block[0]].name.value for block in blocks]
        reads = [frozenset().union(*(self._reads(nodes[i], top_level) for i in block)) for block in blocks]
        pinned = [any(run[i][1] for i in block) for block in blocks]
        edges = sorted(set(run_edges(names, reads)) | set(chain_edges(pinned)))
        self.graphs.append((names, edges))
        order = sample_linear_extension(len(blocks), edges, self.rng)
        if order == list(range(len(blocks))):
            return nodes
        return _relayout(nodes, blocks, order)


def _split_leading(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """(blank separator lines, the rest from the first comment on)."""
    for i, line in enumerate(lines):
        if line.comment is not None:
            return list(lines[:i]), list(lines[i:])
    return list(lines), []


def _relayout(nodes: Sequence[Definition], blocks: Sequence[Sequence[int]], order: Sequence[int]) -> list[Definition]:
    """``blocks`` of ``nodes`` in ``order``; the block put in a slot takes that slot's separator."""
    parts = [_split_leading(nodes[block[0]].leading_lines) for block in blocks]
    out: list[Definition] = []
    for slot, src in enumerate(order):
        first, *rest = blocks[src]
        out.append(nodes[first].with_changes(leading_lines=[*parts[slot][0], *parts[src][1]]))
        out.extend(nodes[i] for i in rest)
    return out


def _reorder_module(source: str, rng: random.Random) -> tuple[str, _Reorderer]:
    module = cst.parse_module(source)
    reorderer = _Reorderer(module, rng)
    new_body = reorderer.module_body(module.body)
    return module.with_changes(body=new_body).code, reorderer


def reorder_source(source: str, rng: random.Random) -> str:
    """``source`` with its definition runs permuted by ``rng`` (see module doc).

    Raises ``libcst.ParserSyntaxError`` when libcst cannot parse ``source``. A file whose
    runs have no alternative order comes back byte-identical.
    """
    return _reorder_module(source, rng)[0]


def definition_graphs(source: str) -> list[tuple[list[str], list[tuple[int, int]]]]:
    """The graph of every run of two or more definitions in ``source``: ``(names, edges)``.

    One node per block that moves as one (a definition, or an overload or property group,
    named by its shared name), in original order; ``edges`` as in ``deps.run_edges``
    plus the chain that keeps pinned blocks in order (``pins``). A class body's run is
    listed before the run holding the class. Raises ``libcst.ParserSyntaxError``.
    """
    return _reorder_module(source, random.Random(0))[1].graphs


def pinned_definitions(source: str) -> list[tuple[str, str]]:
    """``(qualified name, reason)`` of every definition of ``source`` that L3 keeps in order.

    Names are dotted within the file (``Class.method``), in source order (a class before its
    members); reasons are the ``pins`` tokens (``decorator: app.route``, ``base: Model``,
    ``class_body: call: print``, ``pytest_order``...). Raises ``libcst.ParserSyntaxError``.
    """
    return _reorder_module(source, random.Random(0))[1].pinned


def reorder_file(source: str, instance_id: str, path: str, seed: int) -> str:
    """L3 presentation of one file: ``reorder_source`` seeded by ``file_seed``."""
    return reorder_source(source, random.Random(file_seed(instance_id, path, seed)))


def target_files(instance: ViewInstance, repo: RepoFiles, options: ViewOptions) -> list[str]:
    """Files L3 transforms: the .py files the gold patch touches, or all with ``l3_files="all"``."""
    if options.l3_files == "all":
        return repo.python_files()
    return [p for p in patched_paths(instance.patch) if p.endswith(".py")]


def _try_reorder(text: str, instance_id: str, path: str, seed: int) -> tuple[str, list[tuple[str, str]], str | None]:
    """(text, pinned definitions, None), or (text unchanged, [], why libcst cannot parse it)."""
    try:
        new, reorderer = _reorder_module(text, random.Random(file_seed(instance_id, path, seed)))
    except Exception as err:  # libcst reports unparsable input with several exception types
        return text, [], f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return new, reorderer.pinned, None


def reorder_level(view: View, instance: ViewInstance, repo: RepoFiles, seed: int, options: ViewOptions,
                  prepared: Prepared) -> View:
    """Apply L3 to ``view``: reorder the target files' definitions (SchrodingerRepo §III-D).

    Records ``meta["l3_files"]`` (targets present in the repo), ``meta["l3_reordered"]``
    (those whose text changed), ``meta["l3_skipped"]`` (path -> reason: not UTF-8 or
    not parsable by libcst; such files are left unchanged) and ``meta["l3_pinned"]``
    (path -> ``[[name, reason], ...]`` of the definitions kept in order, see ``pins``;
    files without any are left out).
    """
    files: dict[str, str] = dict(view.files)
    present, reordered, skipped, pinned = [], [], {}, {}
    for path in target_files(instance, repo, options):
        try:
            current = files.get(path, repo.read(path))
        except ValueError as err:
            skipped[path] = str(err)
            continue
        if current is None:
            continue
        present.append(path)
        new, pins, reason = _try_reorder(current, view.instance_id, path, seed)
        if pins:
            pinned[path] = [list(pin) for pin in pins]
        if reason is not None:
            skipped[path] = reason
        elif new != current:
            files[path] = new
            reordered.append(path)
    meta = {**view.meta, "l3_files": present, "l3_reordered": reordered, "l3_skipped": skipped, "l3_pinned": pinned}
    render = _renderer(view.instance_id, seed, frozenset(present))
    return replace(view.with_file_renderer(render), files=MappingProxyType(files), meta=meta)


def _renderer(instance_id: str, seed: int, targets: frozenset[str]) -> FileRenderer:
    def render(path: str, text: str) -> str:
        if path not in targets:
            return text
        return _try_reorder(text, instance_id, path, seed)[0]

    return render
