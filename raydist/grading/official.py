"""Grading one patch as SWE-bench's harness does it, for an official row on its image.

For a row that carries SWE-bench 5.x's ``eval_script`` (and ``image``, ``log_parser``,
``eval_type``), the steps are ``swebench.harness.run_evaluation.run_instance``'s: a fresh
container of the instance image, the model patch applied with ``GIT_APPLY_CMDS``
(:mod:`raydist.grading.apply`), the eval script of ``swebench.harness.utils.make_test_spec``
(which records the test command's exit status) run as ``/bin/bash /eval.sh``, and its output
graded by ``swebench.harness.grading.get_logs_eval`` and ``get_eval_report``: the parser of the
row, the start/end markers, the exit-status cross-check against printed ``PASSED`` lines.
Nothing of this grading is raydist's own; the output is kept whole as the grading log.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from raydist.grading.apply import apply_patch
from raydist.grading.container import ContainerRunner, _section, _stopped, _tail
from raydist.grading.environment import GRADING_ENV
from raydist.grading.rules import MISSING, statuses_of
from raydist.grading.testrun import TestRun
from raydist.sandbox import Limits, SandboxProvider, as_provider

OFFICIAL_FIELDS = ("instance_id", "image", "repo", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "log_parser",
                   "eval_type", "eval_script")
"""What ``make_test_spec`` reads from a row (swebench 5.0.2, harness/utils.py)."""


def has_eval_script(instance) -> bool:
    """Whether ``instance`` is an official 5.x row this module grades (its ``eval_script``)."""
    return bool((getattr(instance, "extra", None) or {}).get("eval_script"))


def test_spec_of(instance):
    """``swebench.harness.utils.make_test_spec`` of ``instance``'s row (``Instance.to_record()``).
    Raises ``ValueError`` naming the instance and the fields its row lacks."""
    from swebench.harness.utils import make_test_spec

    row = instance.to_record()
    missing = [f for f in OFFICIAL_FIELDS if row.get(f) in (None, "")]
    if missing:
        raise ValueError(f"instance {instance.instance_id!r}: its row lacks {', '.join(missing)}, which swebench's "
                         "make_test_spec needs to grade it on its official image")
    return make_test_spec(row)


def grade_official(provider: SandboxProvider, instance, image_tag: str, model_patch: str, *,
                   timeout: float, limits: Limits | None = None) -> TestRun:
    """Grade ``model_patch`` (a unified diff in original coordinates) for the official row
    ``instance`` in a fresh container of ``image_tag``; ``timeout`` bounds the eval script, in
    seconds; the eval script runs under ``raydist.grading.environment.GRADING_ENV``. Returns a
    ``TestRun`` with ``channel="official"``: ``tests`` is the
    parser's status map, each FAIL_TO_PASS / PASS_TO_PASS id's status (``MISSING`` when the log
    does not report it), ``resolved`` is ``get_eval_report``'s. A patch that does not apply, a
    log without markers (the eval script stopped early) and a timeout are outcomes
    (``resolved=False``, ``error`` set), never exceptions. Raises ``ValueError`` for a row
    ``make_test_spec`` cannot read (``test_spec_of``)."""
    from swebench.harness.grading import get_eval_report, get_logs_eval

    spec = test_spec_of(instance)
    labels = {"raydist.role": "grade", "raydist.instance": instance.instance_id}
    with as_provider(provider).create(image_tag, limits=limits or Limits(), name=f"grade-{instance.instance_id}",
                                      user="root", labels=labels) as box:
        box.exec("git config --global --add safe.directory '*'", timeout=60)
        model = apply_patch(box, model_patch, label="model")
        if not model.applied:
            return _stopped(instance, model, model.output,
                            f"patch does not apply: {instance.instance_id}: {_tail(model.output)}", "official",
                            cause="patch_does_not_apply")
        box.write_files({"eval.sh": spec.eval_script}, root="/")
        run = box.exec("/bin/bash /eval.sh", timeout=timeout, cwd="/testbed", env=dict(GRADING_ENV))
    output = run.output + (f"\n\nTimeout error: {timeout:g} seconds exceeded." if run.timed_out else "")
    with tempfile.TemporaryDirectory(prefix="raydist-official-") as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(output)
        statuses, found = get_logs_eval(spec, str(path))
        prediction = {"instance_id": instance.instance_id, "model_patch": model_patch,
                      "model_name_or_path": "raydist"}
        report = get_eval_report(spec, prediction, str(path), include_tests_status=True)[instance.instance_id]
    log = f"{_section('model patch: ' + model.method, model.output)}{_section('eval script (swebench)', output)}"
    log += _section("report (swebench get_eval_report)", json.dumps(report, indent=1, sort_keys=True))
    f2p = statuses_of(instance.FAIL_TO_PASS, statuses)
    p2p = statuses_of(instance.PASS_TO_PASS, statuses)
    error = cause = None
    if run.timed_out:
        error, cause = f"{instance.instance_id}: tests timed out after {timeout:g}s", "tests_timed_out"
    elif not found:
        error, cause = (f"{instance.instance_id}: the eval script's log has no test results swebench accepts "
                        f"(markers, results, exit status); {_tail(output)}"), "tests_not_reported"
    missing = sum(s == MISSING for s in (*f2p.values(), *p2p.values()))
    return TestRun(resolved=bool(report.get("resolved")) and error is None, applied=True,
                   apply_method=model.method, tests=dict(statuses), fail_to_pass=f2p, pass_to_pass=p2p,
                   log=log, error=error, channel="official", error_cause=cause, missing=missing,
                   timed_out=bool(run.timed_out))


class OfficialRunner:
    """The ``TestRunner`` of an official SWE-bench 5.x row on its image
    (``raydist.grading.testrun``): each ``run(instance, patch)`` is ``grade_official`` in a fresh
    container of ``image_tag`` (swebench's ``make_test_spec`` eval script, ``get_logs_eval``,
    ``get_eval_report``; channel ``official``); ``timeout`` in seconds bounds each eval script."""

    def __init__(self, provider: SandboxProvider, image_tag: str, *, timeout: float, limits: Limits | None = None):
        self.provider, self.image_tag, self.timeout, self.limits = as_provider(provider), image_tag, timeout, limits

    def run(self, instance, patch: str) -> TestRun:
        """``grade_official`` of ``patch`` for the official row ``instance``."""
        return grade_official(self.provider, instance, self.image_tag, patch, timeout=self.timeout, limits=self.limits)


def runner_for(provider: SandboxProvider, instance, image_tag: str, *, timeout: float,
               limits: Limits | None = None):
    """The ``TestRunner`` of ``instance`` on ``image_tag``: ``OfficialRunner`` for an official 5.x
    row (``has_eval_script``: no recipe, an ``eval_script``), else ``ContainerRunner``
    (``raydist.grading.container``); ``timeout`` in seconds bounds each run."""
    if getattr(instance, "recipe", None) is None and has_eval_script(instance):
        return OfficialRunner(provider, image_tag, timeout=timeout, limits=limits)
    return ContainerRunner(provider, image_tag, timeout=timeout, limits=limits)
