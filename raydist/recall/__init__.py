"""Recall probe (SchrodingerRepo §II): before any repository access, does a model recall an
instance's files, symbols, repair logic, patch or tests from the issue alone?

    gold.py     the hidden reference: files, symbols, changed lines, repair tokens, test names
    answer.py   the answer the model is asked for (JSON), its parser and GBNF grammar
    score.py    recall raw and beyond what was revealed; the leakage level and its thresholds
"""

from raydist.recall.answer import ProbeAnswer, answer_grammar, parse_answer
from raydist.recall.gold import Gold, gold_of
from raydist.recall.score import (
           LEVELS,
           NO_ANSWER,
           THRESHOLDS,
           Scores,
           Thresholds,
           level_of,
           score_answer,
)

__all__ = ["LEVELS", "NO_ANSWER", "THRESHOLDS", "Gold", "ProbeAnswer", "Scores", "Thresholds", "answer_grammar",
           "gold_of", "level_of", "parse_answer", "score_answer"]
