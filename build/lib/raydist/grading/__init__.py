"""Grading: apply a patch, run the tests, parse per-test outcomes, decide ``resolved``.

Public API (docs/architecture.md, ``raydist.grading``)::

    grade, GradeResult              grade
    apply_patch, ApplyResult        apply
    parse_test_log, is_resolved     outcomes
"""
from raydist.grading.apply import ApplyResult, apply_patch
from raydist.grading.grade import GradeResult, grade
from raydist.grading.outcomes import is_resolved, parse_test_log

__all__ = ["ApplyResult", "GradeResult", "apply_patch", "grade", "is_resolved", "parse_test_log"]
