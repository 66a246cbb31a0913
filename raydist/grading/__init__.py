"""Grading: the test-execution service (run an instance's tests with a patch applied) and the
FAIL_TO_PASS / PASS_TO_PASS rules on its runs.

Public API (docs/architecture.md, ``raydist.grading``)::

    TestRunner, TestRun, GradeResult           testrun   the service's contract
    ContainerRunner, grade                     grade     raydist's image, pytest + junit
    OfficialRunner, grade_official, runner_for official  an official row's image, swebench's eval script
    HostRunner                                 host      a host virtualenv
    apply_patch, ApplyResult, apply_on_host    apply     SWE-bench's GIT_APPLY_CMDS; host ``git apply``
    parse_test_log, is_resolved,               rules     per-test statuses, the verdict, the lists,
    measure_lists, gate_changes                          the L4 gate's broken / fixed
"""
from raydist.grading.apply import ApplyResult, PatchError, apply_on_host, apply_patch
from raydist.grading.grade import ContainerRunner, grade
from raydist.grading.host import HostRunner
from raydist.grading.official import OfficialRunner, grade_official, runner_for
from raydist.grading.rules import gate_changes, is_resolved, measure_lists, parse_test_log
from raydist.grading.testrun import GradeResult, TestRun, TestRunner

__all__ = ["ApplyResult", "ContainerRunner", "GradeResult", "HostRunner", "OfficialRunner", "PatchError",
           "TestRun", "TestRunner", "apply_on_host", "apply_patch", "gate_changes", "grade", "grade_official",
           "is_resolved", "measure_lists", "parse_test_log", "runner_for"]
