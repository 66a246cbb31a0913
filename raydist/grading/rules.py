"""The FAIL_TO_PASS / PASS_TO_PASS rules, in one place: per-test outcomes from a test log,
the lists measured from runs, the resolved verdict, and the L4 gate's "broken / fixed" rule.

Parsing and grading are SWE-bench's own (swebench.harness.log_parsers, swebench.harness.grading):
the log parser is the one swebench uses for the instance (``log_parser_for``: the row's
``log_parser`` name in ``PARSER_REGISTRY``, else its repository's in ``MAP_REPO_TO_PARSER_PY``:
django's runner, sympy's, pytest with options, ...; else pytest's, whose test id is the second
whitespace-separated token of a ``-rA`` result line); a FAIL_TO_PASS test must pass (or
xfail), a PASS_TO_PASS test must pass, xfail or be skipped, and truncated parametrised ids
match by prefix. The lists are measured as SWE-bench defines them (harness ``get_logs_eval`` /
``get_eval_tests_report``): FAIL_TO_PASS fail on the base and pass with the gold patch,
PASS_TO_PASS pass in both (``measure_lists``). The L4 gate (SchrodingerRepo §III-E) refuses a
rewrite that breaks a PASS_TO_PASS test or makes a FAIL_TO_PASS test pass (``gate_changes``).
swebench is imported where it is used: importing swebench loads Docker, and the list and gate
rules are pure.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace

MISSING = "MISSING"
PASSED = "PASSED"
FAILING = ("FAILED", "ERROR")
"""The statuses that count as a failure when the lists are measured (a skip or xfail is neither)."""


class UnknownLogParser(ValueError):
    """An instance names a ``log_parser`` that swebench does not have."""


def log_parser_for(instance) -> tuple[str, Callable]:
    """``(name, parser)`` of the log parser swebench uses for ``instance`` (an ``Instance`` or
    None): the row's ``log_parser`` (SWE-bench 5.x rows carry it; looked up in
    ``PARSER_REGISTRY``), else the parser of its ``repo`` in ``MAP_REPO_TO_PARSER_PY``, else
    ``parse_log_pytest``. Raises ``UnknownLogParser`` naming the instance and the name when
    the row names a parser swebench lacks."""
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY, parse_log_pytest

    extra = getattr(instance, "extra", None) or {}
    name = getattr(instance, "log_parser", None) or extra.get("log_parser")
    if name:
        if name not in PARSER_REGISTRY:
            raise UnknownLogParser(
                f"instance {instance.instance_id!r}: log_parser {name!r} is not one of swebench's "
                f"(swebench.harness.log_parsers.PARSER_REGISTRY); fix the row's log_parser or drop it")
        return name, PARSER_REGISTRY[name]
    parser = MAP_REPO_TO_PARSER_PY.get(getattr(instance, "repo", None) or "", parse_log_pytest)
    return parser.__name__, parser  # an alias (parse_log_flask = parse_log_pytest) by its function's name


def parse_test_log(log: str, instance=None) -> dict[str, str]:
    """``{test id: PASSED|FAILED|ERROR|SKIPPED|XFAIL}`` from a test log, parsed by
    ``log_parser_for(instance)`` (pytest's ``-rA`` parser when ``instance`` is None). The
    parser's test spec argument gets the instance's ``instance_id``, ``repo`` and ``version``,
    the only fields swebench's parsers read."""
    _, parser = log_parser_for(instance)
    spec = SimpleNamespace(instance_id=getattr(instance, "instance_id", ""), repo=getattr(instance, "repo", ""),
                           version=str(getattr(instance, "version", "") or ""))
    return parser(log, spec)


def statuses_of(test_ids: Iterable[str], statuses: dict[str, str]) -> dict[str, str]:
    """Each id's status under SWE-bench's matching rule, ``MISSING`` when not reported."""
    from swebench.harness.grading import _resolve_case

    out = {}
    for test_id in test_ids:
        key = _resolve_case(test_id, statuses)
        out[test_id] = statuses[key] if key is not None else MISSING
    return out


def is_resolved(statuses: dict[str, str], fail_to_pass: Iterable[str],
                pass_to_pass: Iterable[str]) -> bool:
    """True iff every FAIL_TO_PASS and every PASS_TO_PASS test passes (SWE-bench FULL)."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    report = get_eval_tests_report(
        statuses, {FAIL_TO_PASS: list(fail_to_pass), PASS_TO_PASS: list(pass_to_pass)}
    )
    return get_resolution_status(report) == ResolvedStatus.FULL.value


def passing_in_all(runs: Sequence[Mapping[str, str]]) -> frozenset[str]:
    """The test ids ``PASSED`` in every one of ``runs`` (each ``{test id: status}``); empty for
    no runs. A test counts only when every run agrees (flaky tests are left out)."""
    if not runs:
        return frozenset()
    return frozenset.intersection(*(frozenset(t for t, s in run.items() if s == PASSED) for run in runs))


def failing_in_all(runs: Sequence[Mapping[str, str]]) -> frozenset[str]:
    """The test ids ``FAILED`` or ``ERROR`` in every one of ``runs``; empty for no runs."""
    if not runs:
        return frozenset()
    return frozenset.intersection(*(frozenset(t for t, s in run.items() if s in FAILING) for run in runs))


def measure_lists(base: Sequence[Mapping[str, str]],
                  gold: Sequence[Mapping[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(FAIL_TO_PASS, PASS_TO_PASS)``, each sorted, from the runs of the base state (the bug
    present, test patch applied) and of the gold state (the fix applied), each a
    ``{test id: status}``: FAIL_TO_PASS fail (``FAILED``/``ERROR``) in every base run and pass
    in every gold run; PASS_TO_PASS pass in every run of both (SWE-bench's definition, harness
    ``get_logs_eval`` / ``get_eval_tests_report``)."""
    passing_gold = passing_in_all(gold)
    return (tuple(sorted(failing_in_all(base) & passing_gold)),
            tuple(sorted(passing_in_all(base) & passing_gold)))


def gate_changes(fail_to_pass: Mapping[str, str],
                 pass_to_pass: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(broken, fixed)`` of a run with an L4 rewrite applied, from the statuses of the
    instance's FAIL_TO_PASS and PASS_TO_PASS ids in it (``MISSING`` for an unreported id):
    ``broken`` are the PASS_TO_PASS ids that no longer pass, ``fixed`` the FAIL_TO_PASS ids that
    now pass, each sorted. A rewrite is kept only when both are empty: it must neither break
    behaviour nor fix the bug (SchrodingerRepo §III-E, the test gate of semantic rewrites)."""
    return (tuple(sorted(t for t, s in pass_to_pass.items() if s != PASSED)),
            tuple(sorted(t for t, s in fail_to_pass.items() if s == PASSED)))
