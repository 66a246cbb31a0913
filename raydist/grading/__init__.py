"""Grading: the test-execution service (run an instance's tests with a patch applied) and the
FAIL_TO_PASS / PASS_TO_PASS rules on its runs.

Public API (docs/architecture.md, ``raydist.grading``)::

    TestRunner, TestRun, GradeResult           testrun   the service's contract
    ContainerRunner, grade                     container raydist's image, pytest + junit
    OfficialRunner, grade_official, runner_for official  an official row's image, swebench's eval script
    HostRunner                                 host      a host virtualenv
    apply_patch, ApplyResult, apply_on_host    apply     SWE-bench's GIT_APPLY_CMDS; host ``git apply``
    parse_test_log, is_resolved,               rules     per-test statuses, the verdict, the lists,
    measure_lists, gate_changes                          the L4 gate's broken / fixed

Names load from their modules on first use (PEP 562), so the rules load no Docker.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "ApplyResult": "apply", "PatchError": "apply", "apply_on_host": "apply", "apply_patch": "apply",
    "ContainerRunner": "container", "grade": "container",
    "HostRunner": "host",
    "OfficialRunner": "official", "grade_official": "official", "runner_for": "official",
    "gate_changes": "rules", "is_resolved": "rules", "measure_lists": "rules", "parse_test_log": "rules",
    "GradeResult": "testrun", "TestRun": "testrun", "TestRunner": "testrun",
}

__all__ = sorted(_PUBLIC)  # noqa: PLE0605 - as raydist/__init__.py


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use; AttributeError for any other name."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'raydist.grading' has no attribute {name!r}; its public names are "
                             f"{', '.join(__all__)}")
    value = getattr(importlib.import_module(f"raydist.grading.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
