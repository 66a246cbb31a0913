"""Level 3: intra-file layout reordering (SchrodingerRepo §III-D).

In each target file every maximal run of consecutive top-level ``def``/``class``
statements, and every such run inside a class body, is permuted to a seeded random
topological order of its definition-time dependency graph (``l3_deps``), drawn uniformly
(``l3_sample``). Every other statement is an anchor and never moves, so the overlay runs
exactly like the original: each name a definition reads while being defined is bound to
the same object as before.

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

from raydist.views.base import Prepared, FileRenderer, RepoFiles, View, ViewOptions, register_level
from raydist.views.l3_deps import (
    Definition,
    call_closure,
    definition_reads,
    has_future_annotations,
    module_call_reads,
    run_edges,
)
from raydist.views.l3_sample import sample_linear_extension
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
        self.graphs: list[tuple[list[str], list[tuple[int, int]]]] = []

    def module_body(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        return self._reorder(body, top_level=True)

    def _reads(self, node: Definition, top_level: bool) -> frozenset[str]:
        reads = definition_reads(node, future_annotations=self.future)
        # In a class body only class-local names can constrain siblings, and what a
        # function called at class creation reads is global, so no closure there.
        return call_closure(reads, self.call_reads) if top_level else reads

    def _reorder(self, body: Sequence[cst.BaseStatement], *, top_level: bool) -> list[cst.BaseStatement]:
        stmts = [self._inside_class(s) if isinstance(s, cst.ClassDef) else s for s in body]
        out: list[cst.BaseStatement] = []
        run: list[Definition] = []
        for stmt in [*stmts, None]:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                run.append(stmt)
                continue
            out.extend(self._permute(run, top_level))
            run = []
            if stmt is not None:
                out.append(stmt)
        return out

    def _inside_class(self, node: cst.ClassDef) -> cst.ClassDef:
        if not isinstance(node.body, cst.IndentedBlock):
            return node
        body = self._reorder(node.body.body, top_level=False)
        return node.with_changes(body=node.body.with_changes(body=body))

    def _permute(self, run: list[Definition], top_level: bool) -> list[Definition]:
        if len(run) < 2:
            return run
        names = [d.name.value for d in run]
        edges = run_edges(names, [self._reads(d, top_level) for d in run])
        self.graphs.append((names, edges))
        order = sample_linear_extension(len(run), edges, self.rng)
        if order == list(range(len(run))):
            return run
        return _relayout(run, order)


def _split_leading(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """(blank separator lines, the rest from the first comment on)."""
    for i, line in enumerate(lines):
        if line.comment is not None:
            return list(lines[:i]), list(lines[i:])
    return list(lines), []


def _relayout(run: Sequence[Definition], order: Sequence[int]) -> list[Definition]:
    parts = [_split_leading(d.leading_lines) for d in run]
    return [
        run[src].with_changes(leading_lines=[*parts[slot][0], *parts[src][1]])
        for slot, src in enumerate(order)
    ]


def reorder_source(source: str, rng: random.Random) -> str:
    """``source`` with its definition runs permuted by ``rng`` (see module doc).

    Raises ``libcst.ParserSyntaxError`` when libcst cannot parse ``source``. A file whose
    runs have no alternative order comes back byte-identical.
    """
    module = cst.parse_module(source)
    new_body = _Reorderer(module, rng).module_body(module.body)
    return module.with_changes(body=new_body).code


def definition_graphs(source: str) -> list[tuple[list[str], list[tuple[int, int]]]]:
    """The graph of every run of two or more definitions in ``source``: ``(names, edges)``.

    ``names`` in original order, ``edges`` as in ``l3_deps.run_edges``. A class body's run
    is listed before the run holding the class. Raises ``libcst.ParserSyntaxError``.
    """
    module = cst.parse_module(source)
    reorderer = _Reorderer(module, random.Random(0))
    reorderer.module_body(module.body)
    return reorderer.graphs


def reorder_file(source: str, instance_id: str, path: str, seed: int) -> str:
    """L3 presentation of one file: ``reorder_source`` seeded by ``file_seed``."""
    return reorder_source(source, random.Random(file_seed(instance_id, path, seed)))


def target_files(instance: object, repo: RepoFiles, options: ViewOptions) -> list[str]:
    """Files L3 transforms: the .py files the gold patch touches, or all with ``l3_files="all"``."""
    if options.l3_files == "all":
        return repo.python_files()
    return [p for p in patched_paths(instance.patch) if p.endswith(".py")]


def _try_reorder(text: str, instance_id: str, path: str, seed: int) -> tuple[str, str | None]:
    try:
        cst.parse_module(text)
    except Exception as err:  # libcst reports unparsable input with several exception types
        return text, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return reorder_file(text, instance_id, path, seed), None


@register_level("L3", order=30)
def reorder_level(view: View, instance: object, repo: RepoFiles, seed: int, options: ViewOptions, prepared: Prepared) -> View:
    """Apply L3 to ``view``: reorder the target files' definitions (SchrodingerRepo §III-D).

    Records ``meta["l3_files"]`` (targets present in the repo), ``meta["l3_reordered"]``
    (those whose text changed) and ``meta["l3_skipped"]`` (path -> reason: not UTF-8 or
    not parsable by libcst; such files are left unchanged).
    """
    files: dict[str, str] = dict(view.files)
    present, reordered, skipped = [], [], {}
    for path in target_files(instance, repo, options):
        try:
            current = files.get(path, repo.read(path))
        except ValueError as err:
            skipped[path] = str(err)
            continue
        if current is None:
            continue
        present.append(path)
        new, reason = _try_reorder(current, view.instance_id, path, seed)
        if reason is not None:
            skipped[path] = reason
        elif new != current:
            files[path] = new
            reordered.append(path)
    meta = {**view.meta, "l3_files": present, "l3_reordered": reordered, "l3_skipped": skipped}
    render = _renderer(view.instance_id, seed, frozenset(present))
    return replace(view.with_file_renderer(render), files=MappingProxyType(files), meta=meta)


def _renderer(instance_id: str, seed: int, targets: frozenset[str]) -> FileRenderer:
    def render(path: str, text: str) -> str:
        if path not in targets:
            return text
        return _try_reorder(text, instance_id, path, seed)[0]

    return render
