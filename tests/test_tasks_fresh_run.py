"""Fresh instances, the parts that run tests: a small real library in a host virtualenv, its
bugs judged by the keep rule, and the failure text the statement model is shown."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from raydist.tasks.fresh.keep import keep_or_drop
from raydist.tasks.fresh.mutations import apply_mutation, enumerate_mutations
from raydist.tasks.fresh.source_tree import (
    PatchError,
    SourceTree,
    detect_test_cmd,
)
from raydist.tasks.fresh.statement import failure_excerpt
from raydist.tasks.schema import DEFAULT_INSTALL
from raydist.views.recover import recover_patch

LIB = '''\
LIMIT = 3
if LIMIT < 1:
    raise ValueError("LIMIT must be positive")


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def untested(n):
    return n + 1
'''
TESTS = '''\
from lib import clamp


def test_clamp_low():
    assert clamp(-1, 0, 5) == 0


def test_clamp_high():
    assert clamp(9, 0, 5) == 5


def test_inside():
    assert clamp(3, 0, 5) == 3


def test_bounds_are_kept():
    assert clamp(0, 0, 5) == 0 and clamp(5, 0, 5) == 5


def test_below_is_raised_to_the_lower_bound():
    assert clamp(-2, 0, 5) == 0
    assert clamp(-3, -1, 5) == -1


def test_far_below():
    assert clamp(-9, 0, 5) == 0


def test_ints_only():
    assert clamp(-1, 0, 1) == 0
'''
WORK = Path(tempfile.gettempdir()) / "raydist-fresh"  # the builder's default: its test venv is reused


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> SourceTree:
    root = tmp_path_factory.mktemp("lib")
    (root / "lib.py").write_text(LIB)
    (root / "test_lib.py").write_text(TESTS)
    return SourceTree(root, DEFAULT_INSTALL, detect_test_cmd(root), WORK, timeout=120)


def bug(kind: str, before: str, after: str | None = None) -> str:
    (mutation,) = [m for m in enumerate_mutations(LIB, "lib.py")
                   if m.kind == kind and m.before.strip() == before and (after is None or m.after.strip() == after)]
    return recover_patch({"lib.py": LIB}, {"lib.py": apply_mutation(LIB, mutation)}), mutation


def test_the_release_passes_its_tests_and_the_tree_is_unchanged_after_a_bug(tree):
    base = tree.run()
    assert tree.test_cmd == 'python -m pytest -rA -p no:cacheprovider -o addopts="" test_lib.py'
    assert len(base.passing()) == 7 and "test_lib.py::test_bounds_are_kept" in base.passing()
    tree.run(bug("flip_comparison", "if x < lo:")[0])
    assert (tree.root / "lib.py").read_text() == LIB


def test_a_bug_failing_some_tests_is_kept_with_the_rest_as_pass_to_pass(tree):
    run = tree.run(bug("flip_comparison", "if x > hi:")[0])
    verdict = keep_or_drop(tree.run().passing(), run.tests)
    assert verdict.kept
    assert verdict.fail_to_pass == ("test_lib.py::test_bounds_are_kept", "test_lib.py::test_clamp_high",
                                    "test_lib.py::test_inside")
    assert verdict.pass_to_pass == ("test_lib.py::test_below_is_raised_to_the_lower_bound",
                                    "test_lib.py::test_clamp_low", "test_lib.py::test_far_below",
                                    "test_lib.py::test_ints_only")


def test_a_bug_that_breaks_no_test_is_rejected(tree):
    run = tree.run(bug("off_by_one", "return n + 1", "return n + 2")[0])
    assert keep_or_drop(tree.run().passing(), run.tests).reason == "no_test_fails"


def test_a_bug_that_breaks_the_import_is_rejected_not_counted_as_failing_tests(tree):
    run = tree.run(bug("flip_comparison", "if LIMIT < 1:")[0])
    assert "LIMIT must be positive" in run.log
    assert keep_or_drop(tree.run().passing(), run.tests).reason == "breaks_collection"


def test_a_bug_that_fails_most_tests_is_rejected(tree):
    run = tree.run(bug("flip_comparison", "if x < lo:")[0])
    assert keep_or_drop(tree.run().passing(), run.tests, max_fail_fraction=0.5).reason == "too_many_fail"


def test_a_patch_that_does_not_apply_is_an_error_and_leaves_the_tree_alone(tree):
    with pytest.raises(PatchError):
        tree.run(recover_patch({"lib.py": LIB.replace("LIMIT = 3", "LIMIT = 4")}, {"lib.py": LIB}))
    assert (tree.root / "lib.py").read_text() == LIB


def test_the_failure_text_shows_the_tests_and_errors_but_not_the_mutated_code(tree):
    diff, mutation = bug("flip_comparison", "if x > hi:")
    run = tree.run(diff)
    failing = keep_or_drop(tree.run().passing(), run.tests).fail_to_pass
    excerpt = failure_excerpt(run.log, failing, mutation)
    assert "if x <= hi:" not in excerpt and "if x > hi:" not in excerpt
    assert not [line for line in excerpt.splitlines() if line.startswith("lib.py")]
    assert ("test_clamp_high" in excerpt and "assert clamp(9, 0, 5) == 5" in excerpt
            and "E       assert 9 == 5" in excerpt)
