"""Grading one patch with SWE-bench semantics in a fresh container.

Steps (as swebench/harness/run_evaluation.py and test_spec's eval script do them): apply the
model patch; restore the files the test patch touches to the base commit; apply the test
patch; run the instance's test command; parse per-test outcomes with SWE-bench's pytest log
parser; the instance is resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test passes
(swebench.harness.grading: ``get_eval_tests_report`` / ``get_resolution_status``).
"""
from __future__ import annotations

from dataclasses import dataclass

import docker

from raydist.grading.apply import ApplyResult, apply_patch
from raydist.grading.outcomes import is_resolved, parse_test_log, statuses_of
from raydist.grading.test_files import restore_command, touched_files
from raydist.sandbox import Limits, Sandbox

RESTORE_TIMEOUT = 120.0


@dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one patch.

    ``tests``: every parsed test id -> ``PASSED``/``FAILED``/``ERROR``/``SKIPPED``/``XFAIL``;
    ``fail_to_pass`` / ``pass_to_pass``: each of the instance's ids -> its status, or
    ``MISSING`` when the log does not report it; ``log``: apply and test output; ``error``:
    why grading stopped short (patch not applying, timeout), else ``None``.
    """

    resolved: bool
    applied: bool
    apply_method: str
    tests: dict[str, str]
    fail_to_pass: dict[str, str]
    pass_to_pass: dict[str, str]
    log: str
    error: str | None


def grade(client: docker.DockerClient, instance, image_tag: str, model_patch: str, *,
          timeout: float = 900, limits: Limits | None = None) -> GradeResult:
    """Grade ``model_patch`` (a unified diff in original coordinates) for ``instance`` in a
    fresh container from ``image_tag``; ``timeout`` bounds the test run, in seconds.

    ``instance`` provides ``instance_id, test_patch, test_cmd, FAIL_TO_PASS, PASS_TO_PASS``.
    A patch that does not apply, a test patch that does not apply and a test timeout are
    recorded outcomes (``resolved=False`` with ``error`` set), never exceptions. Raises
    ``ValueError`` when the instance has no ``test_cmd``.
    """
    if not instance.test_cmd:
        raise ValueError(f"instance {instance.instance_id!r} has no test_cmd; add the command "
                         "that runs its tests (e.g. `python -m pytest -rA <files>`)")
    with Sandbox.create(client, image_tag, limits=limits or Limits(), name=f"grade-{instance.instance_id}",
                        labels={"raydist.role": "grade", "raydist.instance": instance.instance_id}) as box:
        model = apply_patch(box, model_patch, label="model")
        if not model.applied:
            return _stopped(instance, model, model.output,
                            f"patch does not apply: {instance.instance_id}: {_tail(model.output)}")
        prepared = _prepare_tests(box, instance)
        if isinstance(prepared, str):
            return _stopped(instance, model, prepared, f"{instance.instance_id}: {_tail(prepared)}")
        run = box.exec(instance.test_cmd, timeout=timeout)
    log = f"{_section('model patch: ' + model.method, model.output)}{_section('tests', run.output)}"
    return _graded(instance, model, run, log, timeout)


def _prepare_tests(box: Sandbox, instance) -> None | str:
    """Reset the test files to HEAD and apply the test patch; a message when that fails."""
    files = touched_files(instance.test_patch)
    if files:
        reset = box.exec(restore_command(files), timeout=RESTORE_TIMEOUT)
        if reset.returncode != 0:
            return f"restoring test files to HEAD failed: {reset.output}"
    tests = apply_patch(box, instance.test_patch, label="test")
    if not tests.applied:
        return f"test patch does not apply: {tests.output}"
    return None


def _graded(instance, model: ApplyResult, run, log: str, timeout: float) -> GradeResult:
    tests = parse_test_log(run.output)
    f2p, p2p = tuple(instance.FAIL_TO_PASS), tuple(instance.PASS_TO_PASS)
    error = f"{instance.instance_id}: tests timed out after {timeout:g}s" if run.timed_out else None
    return GradeResult(
        resolved=error is None and is_resolved(tests, f2p, p2p),
        applied=True, apply_method=model.method, tests=tests,
        fail_to_pass=statuses_of(f2p, tests), pass_to_pass=statuses_of(p2p, tests),
        log=log, error=error,
    )


def _stopped(instance, model: ApplyResult, log: str, error: str) -> GradeResult:
    missing = "MISSING"
    return GradeResult(
        resolved=False, applied=model.applied, apply_method=model.method, tests={},
        fail_to_pass={t: missing for t in instance.FAIL_TO_PASS},
        pass_to_pass={t: missing for t in instance.PASS_TO_PASS},
        log=log, error=error,
    )


def _section(title: str, text: str) -> str:
    return f">>>>> {title}\n{text.rstrip()}\n"


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
