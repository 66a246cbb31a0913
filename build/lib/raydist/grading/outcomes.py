"""Per-test outcomes from a pytest log and the SWE-bench resolution rule.

Parsing and grading are SWE-bench's own (swebench.harness.log_parsers.python.parse_log_pytest,
swebench.harness.grading): the test id is the second whitespace-separated token of a ``-rA``
result line, a FAIL_TO_PASS test must pass (or xfail), a PASS_TO_PASS test must pass, xfail
or be skipped, and truncated parametrised ids match by prefix.
"""
from __future__ import annotations

from collections.abc import Iterable

from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
from swebench.harness.grading import (_resolve_case, get_eval_tests_report,
                                      get_resolution_status)
from swebench.harness.log_parsers.python import parse_log_pytest

MISSING = "MISSING"


def parse_test_log(log: str) -> dict[str, str]:
    """``{test id: PASSED|FAILED|ERROR|SKIPPED|XFAIL}`` from a ``pytest -rA`` log."""
    return parse_log_pytest(log, None)  # the pytest parser never reads its test spec


def statuses_of(test_ids: Iterable[str], statuses: dict[str, str]) -> dict[str, str]:
    """Each id's status under SWE-bench's matching rule, ``MISSING`` when not reported."""
    out = {}
    for test_id in test_ids:
        key = _resolve_case(test_id, statuses)
        out[test_id] = statuses[key] if key is not None else MISSING
    return out


def is_resolved(statuses: dict[str, str], fail_to_pass: Iterable[str],
                pass_to_pass: Iterable[str]) -> bool:
    """True iff every FAIL_TO_PASS and every PASS_TO_PASS test passes (SWE-bench FULL)."""
    report = get_eval_tests_report(
        statuses, {FAIL_TO_PASS: list(fail_to_pass), PASS_TO_PASS: list(pass_to_pass)}
    )
    return get_resolution_status(report) == ResolvedStatus.FULL.value
