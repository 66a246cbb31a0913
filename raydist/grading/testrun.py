"""The test-execution service's contract: a ``TestRunner`` runs an instance's tests with a patch
applied and returns one ``TestRun``.

Three runners implement it, one per place tests can run:

    ContainerRunner   raydist.grading.container  fresh container of raydist's image, pytest + junit
    OfficialRunner    raydist.grading.official   the row's official image, swebench's eval script
    HostRunner        raydist.grading.host       a scratch tree in a host virtualenv

Grading a unit, measuring FAIL_TO_PASS / PASS_TO_PASS (``raydist.tasks.measure``), keeping fresh
tasks (``raydist.tasks.fresh``) and L4's test gate (``raydist.cluster.rewrites``) all take a
``TestRunner``; the rules they apply to its runs are ``raydist.grading.rules``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from raydist.grading.rules import PASSED


@dataclass(frozen=True)
class TestRun:
    """One run of an instance's tests with a patch applied (SWE-bench harness semantics).

    ``tests``: every test id the run reported -> ``PASSED``/``FAILED``/``ERROR``/``SKIPPED``/
    ``XFAIL``; ``fail_to_pass`` / ``pass_to_pass``: each of the instance's ids -> its status, or
    ``MISSING`` when the run does not report it (never a pass); ``missing``: how many of the
    instance's ids are ``MISSING``; ``resolved``: SWE-bench's verdict (every FAIL_TO_PASS and
    PASS_TO_PASS passes, no error); ``log``: apply and test output; ``channel``: where ``tests``
    came from: ``junit`` (pytest's junit XML), ``log`` (the log, by swebench's parser),
    ``official`` (swebench's eval script and report) or ``host`` (a host virtualenv's log);
    ``applied`` / ``apply_method``: whether and how the patch applied
    (``raydist.grading.apply.METHOD_NAMES``, ``"empty"``, ``"none"``); ``error``: why the run
    stopped short, else ``None``, with ``error_cause`` a short token for it
    (``patch_does_not_apply``, ``test_patch_does_not_apply``, ``tests_timed_out``,
    ``junit_rejected``, ``reporting_tampered``, ``tests_not_reported``); ``timed_out``: the tests
    hit their time limit; ``test_infra_changed``: test-infrastructure paths the patch changed,
    put back before the run; ``seconds``: wall time of the test command (0.0 when not timed).

    The unit's row columns are these fields as they are (``grading_channel`` is ``channel``).
    """

    __test__ = False  # not a pytest class, whatever a test module imports it as

    resolved: bool
    applied: bool
    apply_method: str
    tests: dict[str, str]
    fail_to_pass: dict[str, str]
    pass_to_pass: dict[str, str]
    log: str
    error: str | None
    channel: str = "log"
    test_infra_changed: tuple[str, ...] = ()
    error_cause: str | None = None
    missing: int = 0
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def grading_channel(self) -> str:
        """``channel`` under its row column's name."""
        return self.channel

    def passing(self) -> frozenset[str]:
        """The ids of the tests that ``PASSED``."""
        return frozenset(t for t, s in self.tests.items() if s == PASSED)


GradeResult = TestRun
"""The name grading's result had before the service; the same class."""


class TestRunner(Protocol):
    """Runs an instance's tests with a patch applied.

    ``run(instance, patch)``: ``instance`` an ``Instance`` (its ``test_patch``, test command or
    eval script, FAIL_TO_PASS / PASS_TO_PASS), ``patch`` a unified diff in the repository's own
    coordinates ("" for none). A patch that does not apply, a test patch that does not apply and
    a timeout are outcomes of the returned ``TestRun`` (``error`` set), never exceptions; a
    runner raises only when the tests cannot run at all (Docker, the host's virtualenv)."""

    def run(self, instance, patch: str) -> TestRun:
        """The run of ``instance``'s tests with ``patch`` applied."""
        ...
