"""Which mutations become instances: SWE-bench's FAIL_TO_PASS / PASS_TO_PASS rule on a bug.

A mutation is kept when some tests that pass on the release fail with it (FAIL_TO_PASS) and
every other test that passes on the release still passes with it (PASS_TO_PASS), measured
twice with the same result. Each other outcome is a rejection with one reason (``REASONS``).
The lists themselves are measured by the one rule of ``raydist.grading.rules.measure_lists``,
the bug's run as the base state and the release as the gold state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raydist.grading.rules import FAILING, PASSED, measure_lists

REASONS = {
    "does_not_compile": "the mutated file does not parse, or parses to the same program",
    "patch_does_not_apply": "git apply refused the mutation's diff",
    "timeout": "the tests did not finish within the time limit",
    "breaks_collection": "tests that pass on the release were not run at all (import or collection error)",
    "non_target_changed": "a test that passes on the release was skipped or xfailed, neither passing nor failing",
    "no_test_fails": "every test that passes on the release still passes",
    "too_many_fail": "more than the allowed share of the passing tests fail",
    "unstable": "a second run with the bug gave other failing tests",
}
"""Rejection reason -> what it means."""



@dataclass(frozen=True)
class Verdict:
    """``kept``, else the rejection ``reason`` (a key of ``REASONS``); the sorted test ids
    FAIL_TO_PASS and PASS_TO_PASS when kept (and FAIL_TO_PASS as far as known otherwise)."""

    kept: bool
    reason: str | None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()


def keep_or_drop(base_passing: frozenset[str], bug: Mapping[str, str], *, timed_out: bool = False,
          max_fail_fraction: float = 0.5) -> Verdict:
    """The verdict on one test run with the bug.

    Args:
        base_passing: the tests that pass on the release (every baseline run).
        bug: test id -> status with the bug applied.
        timed_out: the run with the bug hit its time limit.
        max_fail_fraction: at most this share of ``base_passing`` may fail (a bug that fails
            most tests is an import-time crash, not a task).
    """
    if timed_out:
        return Verdict(False, "timeout")
    if not bug or any(t not in bug for t in base_passing):
        return Verdict(False, "breaks_collection")
    failing, still_passing = measure_lists([bug], [dict.fromkeys(base_passing, PASSED)])
    if any(bug[t] != PASSED and bug[t] not in FAILING for t in base_passing):
        return Verdict(False, "non_target_changed", failing)
    if not failing:
        return Verdict(False, "no_test_fails")
    if len(failing) > max_fail_fraction * len(base_passing):
        return Verdict(False, "too_many_fail", failing)
    return Verdict(True, None, failing, still_passing)


def confirm(first: Verdict, again: Verdict) -> Verdict:
    """``first`` when a second run's verdict ``again`` keeps the same FAIL_TO_PASS, else a
    rejection as ``unstable`` (flaky tests make instances no agent can resolve)."""
    if again.kept and again.fail_to_pass == first.fail_to_pass and again.pass_to_pass == first.pass_to_pass:
        return first
    return Verdict(False, "unstable", first.fail_to_pass)
