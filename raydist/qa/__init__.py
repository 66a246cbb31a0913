"""Repository question answering (SWE-QA under views, SchrodingerRepo RQ3): the judge of answers.

Public API::

    judge_answer, Judgement, parse_scores, average_score, DIMENSIONS    judge
"""
from raydist.qa.judge import DIMENSIONS, Judgement, JudgeUnparseable, average_score, judge_answer, parse_scores

__all__ = ["DIMENSIONS", "Judgement", "JudgeUnparseable", "average_score", "judge_answer", "parse_scores"]
