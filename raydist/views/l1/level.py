"""Level 1: problem-statement reconstruction (SchrodingerRepo §III-B).

The agent is shown a paraphrase of the problem statement that an LLM verifier judged to
preserve the bug description, the requirements and the success criteria, with every
identifier, path and code block verbatim (``raydist.views.l1.statement``). The paraphrase
needs an LLM, so it is computed before the view is built (``raydist.cluster.prepare``) and
handed in as ``Prepared.statement``; when no attempt passed the verifier the statement is
restated by seeded rules (``raydist.views.l1.rules``); the view records which.
"""

from __future__ import annotations

from dataclasses import replace

from raydist.views.base import MissingPreparation, Prepared, RepoFiles, View, ViewOptions
from raydist.views.instance import ViewInstance
from raydist.views.l1.statement import SOURCES


def statement_level(view: View, instance: ViewInstance, repo: RepoFiles, seed: int, options: ViewOptions,
                    prepared: Prepared) -> View:
    """Show ``prepared.statement`` in place of the canonical problem statement.

    Records ``meta["l1_source"]`` (``paraphrase``, ``rule`` or ``canonical``) and
    ``meta["l1_attempts"]``. Raises ``MissingPreparation`` when no statement was prepared.
    """
    if prepared.statement is None or prepared.statement_source not in SOURCES:
        raise MissingPreparation(
            f"L1 view of {view.instance_id!r} seed {seed} needs a prepared statement "
            "(raydist.cluster.prepare.prepare_statement); none was given"
        )
    meta = {**view.meta, "l1_source": prepared.statement_source, "l1_attempts": prepared.statement_attempts}
    return replace(view, problem_statement=prepared.statement, meta=meta)
