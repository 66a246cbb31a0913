"""Level 1: problem-statement reconstruction (SchrodingerRepo §III-B).

``level.statement_level`` shows the prepared paraphrase; ``statement.reconstruct_statement``
writes and verifies it with an LLM before the view is built.
"""

from raydist.views.l1.level import statement_level
from raydist.views.l1.statement import (
    L1Prompts,
    StatementResult,
    load_l1_prompts,
    paraphrase_budget,
    reconstruct_statement,
)

__all__ = ["L1Prompts", "StatementResult", "load_l1_prompts", "paraphrase_budget", "reconstruct_statement",
           "statement_level"]
