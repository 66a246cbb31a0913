"""L4's test gate (SchrodingerRepo §III-E), and the preparation of L4's rewrites with it.

The rewrite loop itself is pure (``raydist.views.l4.prepare``); here it meets the
test-execution service (the gate runs the instance's tests through a ``raydist.grading``
``TestRunner``: raydist's image, or an official row's image and eval script) and the
preparation's error (``PreparationError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from raydist._util.protocols import Complete
from raydist.cluster.errors import PreparationError
from raydist.grading import TestRunner, gate_changes, measure_lists
from raydist.models.retry import ModelUnreachable
from raydist.outcomes import InputError
from raydist.views.base import RepoFiles, ViewOptions
from raydist.views.l4.prepare import Gate, GateVerdict, rewrite_loop
from raydist.views.recover import recover_patch


def prepare_rewrites(instance, seed: int, repo: RepoFiles, options: ViewOptions, gate: Gate,
                     complete: Complete | None = None, targets: list[tuple[str, str]] | None = None) -> dict:
    """The L4 record of ``instance`` for ``seed`` (``raydist.views.l4.prepare.rewrite_loop``;
    ``targets``: the functions to rewrite when not those enclosing the gold patch).

    Raises ``PreparationError`` when ``gate`` does or the model is unreachable: neither may be
    cached as a finished preparation.
    """
    try:
        return rewrite_loop(instance, seed, repo, options, gate, complete, fatal=(ModelUnreachable,), targets=targets)
    except ModelUnreachable as exc:
        raise PreparationError(f"L4 of {instance.instance_id!r}: {exc}") from exc


def with_passing_tests(runner: TestRunner, instance):
    """``instance`` with ``PASS_TO_PASS`` the tests its tests pass on the unchanged repository,
    measured twice with ``runner`` (``raydist.grading.TestRunner``; a test counts only when both
    runs pass it, ``raydist.grading.rules.measure_lists``): the L4 gate of an instance that ships
    no test lists (a repository question). Raises ``PreparationError`` when a run fails to
    happen, ``InputError`` naming the instance when it has no test command or no test passes."""
    if not instance.test_cmd:
        raise InputError(f"L4 of {instance.instance_id!r} needs the repository's tests to gate its rewrites "
                         "(§III-E), and it has no test_cmd; give its release a test_cmd (benchmark.releases)",
                         cause="l4_needs_tests")
    runs = []
    for _ in range(2):
        try:
            result = runner.run(instance, "")
        except Exception as exc:  # noqa: BLE001 - Docker failures are infrastructure
            raise PreparationError(f"L4 tests of {instance.instance_id!r}: {type(exc).__name__}: {exc}") from exc
        if result.error:
            raise PreparationError(f"L4 tests of {instance.instance_id!r}: {result.error}")
        runs.append(result.tests)
    passing = measure_lists(runs, runs)[1]
    if not passing:
        raise InputError(f"L4 of {instance.instance_id!r}: no test of its test_cmd passes on the unchanged "
                         "repository, so no rewrite can be checked; fix test_cmd or its install pins",
                         cause="l4_needs_tests")
    return replace(instance, PASS_TO_PASS=passing)


def rewrite_gate(runner: TestRunner, instance, repo: RepoFiles) -> Gate:
    """The L4 test gate of ``instance`` (SchrodingerRepo §III-E): the rewritten files
    (``{path: text}``) are turned into a patch against ``repo`` (``recover_patch``) and run by
    ``runner`` (``raydist.grading.TestRunner``: raydist's image with pytest + junit, or an
    official row's image with swebench's eval script); the rewrite passes when no PASS_TO_PASS
    test stops passing and no FAIL_TO_PASS test starts passing (``raydist.grading.rules.
    gate_changes``: it must neither break behaviour nor fix the bug). A refusal's feedback
    names the broken / fixed tests, the run's channel and the log's tail. Raises
    ``PreparationError`` when the test run itself cannot happen (Docker, a test timeout, a
    log without results)."""
    def run(files: Mapping[str, str]) -> GateVerdict:
        patch = recover_patch({p: repo.read(p) for p in files}, dict(files))
        try:
            result = runner.run(instance, patch)
        except Exception as exc:  # noqa: BLE001 - Docker failures are infrastructure
            raise PreparationError(f"L4 test gate of {instance.instance_id!r}: {type(exc).__name__}: {exc}") from exc
        if result.error and not result.applied:
            return GateVerdict(False, f"the rewrite does not apply: {result.error}")
        if result.error:
            raise PreparationError(f"L4 test gate of {instance.instance_id!r}: {result.error}")
        broken, fixed = gate_changes(result.fail_to_pass, result.pass_to_pass)
        if not broken and not fixed:
            return GateVerdict(True, "")
        lines = []
        if broken:
            lines.append("These tests passed before the rewrite and fail after it: " + ", ".join(broken[:10]))
        if fixed:
            lines.append("The rewrite changed behaviour (these tests changed outcome): " + ", ".join(fixed[:10]))
        lines.append(f"Test output ({result.channel}, tail):\n" + result.log[-1500:])
        return GateVerdict(False, "\n".join(lines))

    return run
