"""The FAIL_TO_PASS / PASS_TO_PASS rules of ``raydist.grading.rules``: the lists measured from
runs, SWE-bench's resolved verdict, and the L4 gate's broken / fixed rule (§III-E)."""

from __future__ import annotations

from raydist.grading.rules import MISSING, gate_changes, is_resolved, measure_lists, passing_in_all, statuses_of

BASE = {"t.py::a": "FAILED", "t.py::b": "PASSED", "t.py::c": "ERROR", "t.py::d": "PASSED", "t.py::e": "SKIPPED",
        "t.py::f": "FAILED"}
GOLD = {"t.py::a": "PASSED", "t.py::b": "PASSED", "t.py::c": "PASSED", "t.py::d": "FAILED", "t.py::e": "PASSED",
        "t.py::f": "FAILED", "t.py::g": "PASSED"}


def test_the_lists_are_fail_on_base_pass_on_gold_and_pass_on_both():
    assert measure_lists([BASE], [GOLD]) == (("t.py::a", "t.py::c"), ("t.py::b",))


def test_a_test_counts_only_when_every_run_of_its_state_agrees():
    flaky_base = {**BASE, "t.py::c": "PASSED"}  # c passed once on the base: not FAIL_TO_PASS
    flaky_gold = {**GOLD, "t.py::b": "FAILED"}  # b failed once with the fix: not PASS_TO_PASS
    assert measure_lists([BASE, flaky_base], [GOLD]) == (("t.py::a",), ("t.py::b",))
    assert measure_lists([BASE], [GOLD, flaky_gold]) == (("t.py::a", "t.py::c"), ())
    assert passing_in_all([BASE, GOLD]) == frozenset({"t.py::b"}) and passing_in_all([]) == frozenset()


def test_resolved_needs_every_fail_to_pass_and_pass_to_pass_test_passing():
    f2p, p2p = measure_lists([BASE], [GOLD])
    assert is_resolved(GOLD, f2p, p2p) is True
    assert is_resolved(BASE, f2p, p2p) is False
    assert is_resolved({**GOLD, "t.py::b": "FAILED"}, f2p, p2p) is False  # a broken PASS_TO_PASS test
    assert is_resolved({k: v for k, v in GOLD.items() if k != "t.py::c"}, f2p, p2p) is False  # one unreported


def test_an_unreported_id_is_missing_and_never_passes():
    assert statuses_of(["t.py::a", "t.py::zz"], GOLD) == {"t.py::a": "PASSED", "t.py::zz": MISSING}


def test_the_gate_names_broken_pass_to_pass_and_fixed_fail_to_pass_tests():
    f2p = {"t.py::a": "PASSED", "t.py::c": "FAILED"}
    p2p = {"t.py::b": "PASSED", "t.py::d": "FAILED", "t.py::e": "SKIPPED", "t.py::g": MISSING}
    assert gate_changes(f2p, p2p) == (("t.py::d", "t.py::e", "t.py::g"), ("t.py::a",))
    assert gate_changes({"t.py::a": "FAILED", "t.py::c": "ERROR"}, {"t.py::b": "PASSED"}) == ((), ())
