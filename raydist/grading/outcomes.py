"""Per-test outcomes from a test log and the SWE-bench resolution rule.

Parsing and grading are SWE-bench's own (swebench.harness.log_parsers, swebench.harness.grading):
the log parser is the one swebench uses for the instance (``log_parser_for``: the row's
``log_parser`` name in ``PARSER_REGISTRY``, else its repository's in ``MAP_REPO_TO_PARSER_PY``:
django's runner, sympy's, pytest with options, ...; else pytest's, whose test id is the second
whitespace-separated token of a ``-rA`` result line); a FAIL_TO_PASS test must pass (or
xfail), a PASS_TO_PASS test must pass, xfail or be skipped, and truncated parametrised ids
match by prefix.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from types import SimpleNamespace

from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
from swebench.harness.grading import _resolve_case, get_eval_tests_report, get_resolution_status
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY, parse_log_pytest

MISSING = "MISSING"


class UnknownLogParser(ValueError):
    """An instance names a ``log_parser`` that swebench does not have."""


def log_parser_for(instance) -> tuple[str, Callable]:
    """``(name, parser)`` of the log parser swebench uses for ``instance`` (an ``Instance`` or
    None): the row's ``log_parser`` (SWE-bench 5.x rows carry it; looked up in
    ``PARSER_REGISTRY``), else the parser of its ``repo`` in ``MAP_REPO_TO_PARSER_PY``, else
    ``parse_log_pytest``. Raises ``UnknownLogParser`` naming the instance and the name when
    the row names a parser swebench lacks."""
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
    out = {}
    for test_id in test_ids:
        key = _resolve_case(test_id, statuses)
        out[test_id] = statuses[key] if key is not None else MISSING
    return out


def is_resolved(statuses: dict[str, str], fail_to_pass: Iterable[str],
                pass_to_pass: Iterable[str]) -> bool:
    """True iff every FAIL_TO_PASS and every PASS_TO_PASS test passes (SWE-bench FULL)."""
    report = get_eval_tests_report(
        statuses, {FAIL_TO_PASS: list(fail_to_pass), PASS_TO_PASS: list(pass_to_pass)}
    )
    return get_resolution_status(report) == ResolvedStatus.FULL.value
