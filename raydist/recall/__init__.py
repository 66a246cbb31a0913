"""Recall probe (SchrodingerRepo §II): before any repository access, does a model recall an
instance's files, symbols, repair logic, patch or tests from the issue alone?

    gold.py     the hidden reference: files, symbols, changed lines, repair tokens, test names
    answer.py   the answer the model is asked for (JSON), its parser and GBNF grammar
    score.py    recall raw and beyond what was revealed; the leakage level and its thresholds
    rounds.py   what each round reveals (data)
    probe.py    instances x rounds on an injected LLM: transcripts, records (resumable)
    table.py    recall.parquet, summary.json / summary.md (shares of each level per model)
    select.py   the instances at or above a level (``benchmark.leakage``, ``benchmark.min_leakage``)
    launch.py   ``python -m raydist.launch_recall`` (Hydra: conf/recall.yaml, schema in config.py)
"""

from raydist.recall.answer import ProbeAnswer, answer_grammar, parse_answer
from raydist.recall.gold import Gold, gold_of
from raydist.recall.rounds import DEFAULT_ROUNDS, Round, rounds_from
from raydist.recall.score import (
           LEVELS,
           NO_ANSWER,
           THRESHOLDS,
           Scores,
           Thresholds,
           level_of,
           score_answer,
)
from raydist.recall.select import leakage_levels, select_by_leakage

__all__ = ["DEFAULT_ROUNDS", "LEVELS", "NO_ANSWER", "THRESHOLDS", "Gold", "ProbeAnswer", "Round", "Scores",
           "Thresholds", "answer_grammar", "gold_of", "leakage_levels", "level_of", "parse_answer", "rounds_from",
           "score_answer", "select_by_leakage"]
