"""Level 4: functionality-preserving rewrites (SchrodingerRepo §III-E).

``prepare.rewrite_loop`` rewrites the functions the gold patch touches, by an LLM (``llm``,
checked by the static ``gate``, spliced back by ``splice``) or deterministically
(``rewrite``), each accepted only through a test gate; ``level.rewrite_level`` shows the
result.
"""

from raydist.views.l4.gate import REASONS, Proposal, check_answer
from raydist.views.l4.level import rewrite_level
from raydist.views.l4.llm import L4Prompts, load_l4_prompts, propose_rewrite
from raydist.views.l4.prepare import Gate, GateVerdict, changed_line_ranges, rewrite_loop, rewrite_targets
from raydist.views.l4.rewrite import functions_enclosing_patch, rewrite_function_source, same_interface

__all__ = ["REASONS", "Gate", "GateVerdict", "L4Prompts", "Proposal", "changed_line_ranges", "check_answer",
           "functions_enclosing_patch", "load_l4_prompts", "propose_rewrite", "rewrite_function_source",
           "rewrite_level", "rewrite_loop", "rewrite_targets", "same_interface"]
