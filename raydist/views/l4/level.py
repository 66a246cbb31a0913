"""Level 4: functionality-preserving rewrites (SchrodingerRepo §III-E).

The functions that enclose the gold patch's hunks are shown rewritten: by an LLM whose
rewrite passed the static gate (same name, signature, decorators) and the test gate in the
instance container (PASS_TO_PASS all pass, FAIL_TO_PASS still fail), else by the
deterministic libcst rewriter (``raydist.views.l4.rewrite``) whose output passed the same
gate. Both need Docker and possibly an LLM, so the files are computed before the view is
built (``raydist.cluster.prepare``) and handed in as ``Prepared.rewrites``.

A scripted agent that writes the gold-patched original (``View.render_file``) replaces the
rewritten functions with the fixed originals: L4 presents a file unchanged there, which is
still a correct fix of the view.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from raydist.views.base import MissingPreparation, Prepared, RepoFiles, View, ViewOptions
from raydist.views.instance import ViewInstance


def rewrite_level(view: View, instance: ViewInstance, repo: RepoFiles, seed: int, options: ViewOptions,
                  prepared: Prepared) -> View:
    """Put ``prepared.rewrites`` (path -> rewritten original text) into the view's files.

    Records ``meta["l4_files"]`` (paths rewritten) and ``meta["l4_functions"]`` (per function:
    how it was rewritten). Raises ``MissingPreparation`` when no rewrite set was prepared
    (an empty set is valid: nothing could be rewritten and gated).
    """
    if prepared.rewrites is None:
        raise MissingPreparation(
            f"L4 view of {view.instance_id!r} seed {seed} needs prepared rewrites "
            "(raydist.cluster.prepare.prepare_rewrites); none were given"
        )
    files = dict(view.files)
    for path, text in sorted(prepared.rewrites.items()):
        if repo.read(path) is None:
            raise ValueError(f"L4: prepared rewrite of {path!r} names a file absent from the repository")
        files[path] = text
    meta = {**view.meta, "l4_files": sorted(prepared.rewrites), "l4_functions": dict(prepared.rewrite_meta)}
    return replace(view, files=MappingProxyType(files), meta=meta)
