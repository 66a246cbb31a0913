"""Correct fixes the tests have not seen: the gold patch with the functions it changes rewritten
by L4's deterministic, behaviour-preserving rewriter (``raydist.views.l4.rewrite``:
local renames, aliasing, inverted branches, loops to comprehensions, swapped comparisons,
augmented assignments; §III-E).

Such a fix does what the gold patch does. A FAIL_TO_PASS or PASS_TO_PASS test that rejects it
asserts something besides behaviour (a local variable's name, the source text, the bytecode):
a test that rejects correct fixes (``raydist.grading.false_rejections`` runs and confirms them).
Pure: no Docker.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from unidiff import PatchSet

from raydist.views.base import RepoFiles
from raydist.views.l4.rewrite import functions_enclosing_patch, rewrite_function_source
from raydist.views.recover import apply_patch_to_texts, patched_paths, recover_patch


@dataclass(frozen=True)
class RewrittenFix:
    """The gold patch with ``functions`` (``path::qualname``) rewritten for ``seed``: ``patch``
    is a unified diff against the original repository, as a model patch would be."""

    seed: int
    functions: tuple[str, ...]
    patch: str


def gold_texts(instance, repo: RepoFiles) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """``(originals, fixed)``: the texts of the gold patch's files before and after it, by path
    (None: no such file). Raises ``raydist.views.PatchApplyError`` when the patch does not apply
    to ``repo``."""
    originals = {path: repo.read(path) for path in patched_paths(instance.patch)}
    return originals, apply_patch_to_texts(originals, instance.patch)


def fixed_line_ranges(patch: str, path: str) -> list[tuple[int, int]]:
    """1-based inclusive ranges of lines of ``path`` *after* ``patch`` that it adds, one per hunk
    that adds any (a hunk that only removes marks the line after the removal)."""
    ranges = []
    for patched in PatchSet(patch):
        if patched.path != path:
            continue
        for hunk in patched:
            added = [line.target_line_no for line in hunk if line.is_added and line.target_line_no is not None]
            if added:
                ranges.append((min(added), max(added)))
            else:
                anchor = next((line.target_line_no for line in hunk if line.is_context and line.target_line_no
                               and line.source_line_no and line.source_line_no > _first_removed(hunk)),
                              hunk.target_start)
                ranges.append((anchor, anchor))
    return ranges


def _first_removed(hunk) -> int:
    return min((line.source_line_no for line in hunk if line.is_removed), default=0)


def rewritten_fixes(instance, repo: RepoFiles, seeds: range | list[int]) -> list[RewrittenFix]:
    """For each of ``seeds``, the gold patch with every Python function it changes (innermost
    function around each hunk, in the fixed file) rewritten by the deterministic L4 rewriter for
    that seed; seeds whose rewrite changes nothing are left out, and equal patches are kept
    once. Raises ``PatchApplyError`` when the gold patch does not apply to ``repo``."""
    originals, fixed = gold_texts(instance, repo)
    targets = []
    for path, text in sorted(fixed.items()):
        if text is None or not path.endswith(".py"):
            continue
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        targets += [(path, name) for name in functions_enclosing_patch(text, fixed_line_ranges(instance.patch, path))]
    out: list[RewrittenFix] = []
    seen = {recover_patch(originals, fixed)}
    for seed in seeds:
        texts = dict(fixed)
        changed: list[str] = []
        for path, name in targets:
            before = texts[path] or ""  # a target's file is Python text (``targets`` above)
            new = rewrite_function_source(before, name, seed)
            if new != before:
                texts[path], changed = new, [*changed, f"{path}::{name}"]
        patch = recover_patch(originals, texts)
        if changed and patch not in seen:
            seen.add(patch)
            out.append(RewrittenFix(seed, tuple(changed), patch))
    return out
