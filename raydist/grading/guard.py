"""The guard of pytest's reporting: its plugin's source, its record, and the cross-check with
the junit XML.

Code of the package under test runs inside pytest's process, so it can rewrite pytest's
reporting before any report is written (``_pytest.reports.TestReport``, the runner's
``call_and_report``, ``_pytest.junitxml``, a hook implementation registered on the fly): the
junit XML, its counters and pytest's exit status then agree on a forged outcome. The guard
plugin (:mod:`raydist.grading._pytest_guard`, loaded with ``-p`` from a root-owned
directory) fingerprints pytest's and pluggy's code before conftests and test modules load,
watches plugin registrations, records each test phase's outcome from ``call.excinfo`` itself,
and writes that record through a second FIFO (``raydist.grading.junit.run_script``).

A run grades only if the record arrived, names no tampering, and agrees with the XML: every
test the guard saw is in the XML, and every PASSED / SKIPPED / XFAIL testcase of the XML is
one the guard saw pass / skip / xfail. Anything else is the patch's doing (the guard's
channel is out of the test user's reach): not resolved, ``error_cause="reporting_tampered"``.

Limits: tests run in other processes (``pytest -n`` with pytest-xdist) make no record in the
guard's process, so their PASSED testcases are refused; no instance's test command uses it.
A module named in a restored conftest's ``pytest_plugins`` is trusted as the conftest is,
though the patch may have changed it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).with_name("_pytest_guard.py")
# What a junit status needs the guard to have seen in at least one phase (PASSED: in all).
_NEEDS = {"SKIPPED": "skipped", "XFAIL": "xfailed"}


def guard_module(token: str) -> str:
    """The module name (``-p`` argument) of the guard plugin of grading run ``token``; random
    per run, so no file of the repository can stand in for it."""
    return f"raydist_guard_{token}"


def guard_source(record_path: str, repo: str = "/testbed") -> str:
    """The guard plugin's source with its record path (a FIFO) and the repository root filled in."""
    text = PLUGIN_SOURCE.read_text(encoding="utf-8")
    return text.replace('"@RECORD@"', json.dumps(record_path)).replace('"@REPO@"', json.dumps(repo))


@dataclass(frozen=True)
class GuardRecord:
    """``tests``: junit key -> phase (``setup``/``call``/``teardown``) -> ``passed``/
    ``skipped``/``xfailed``/``raised``; ``tampered``: what the guard caught; ``problem``: why
    the record itself cannot be trusted (absent, not one JSON document), else None."""

    tests: dict[str, dict[str, str]]
    tampered: tuple[str, ...]
    problem: str | None


def parse_guard(data: bytes) -> GuardRecord:
    """The guard's record from the bytes its FIFO delivered. Never raises: an empty, doubled or
    malformed record comes back with ``problem`` set."""
    if not data.strip():
        return GuardRecord({}, (), "the reporting guard wrote no record (pytest did not reach unconfigure, "
                                   "or the guard plugin was unregistered)")
    try:
        doc = json.loads(data)
        tests = {str(k): {str(p): str(v) for p, v in phases.items()} for k, phases in doc["tests"].items()}
        return GuardRecord(tests, tuple(str(t) for t in doc["tampered"]), None)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return GuardRecord({}, (), f"the reporting guard's record is not one well-formed document ({exc})")


def check_guard(statuses: dict[str, str], record: GuardRecord) -> str | None:
    """Why the junit ``statuses`` (``JunitReport.statuses``: junit key -> status) cannot be
    believed given the guard's ``record``, else None.

    The reasons, first one found: the record's own problem; tampering the guard caught; a test
    the guard saw run that the XML omits; a PASSED testcase the guard did not see pass in
    every phase; a SKIPPED (XFAIL) testcase it did not see skip (xfail) in some phase. A
    SKIPPED testcase the guard never saw is a skip at collection (a skipped module), which
    reaches the XML without running a test phase."""
    if record.problem:
        return record.problem
    if record.tampered:
        return "pytest's reporting was tampered with: " + "; ".join(record.tampered[:5])
    unreported = sorted(set(record.tests) - set(statuses))
    if unreported:
        return f"tests that ran are missing from the junit report: {', '.join(unreported[:5])}"
    for key, status in sorted(statuses.items()):
        phases = record.tests.get(key)
        if status == "PASSED" and (not phases or set(phases.values()) != {"passed"}):
            return f"the junit report says {key} PASSED but the guard saw {phases or 'no run of it'}"
        if status in _NEEDS and _NEEDS[status] not in (phases or {}).values() and (phases or status != "SKIPPED"):
            return f"the junit report says {key} {status} but the guard saw {phases or 'no run of it'}"
    return None


def guard_statuses(record: GuardRecord) -> dict[str, str]:
    """Per-test statuses as the guard saw them (junit key -> ``FAILED`` when the call raised,
    ``ERROR`` when set-up or teardown did, else ``XFAIL``/``SKIPPED``/``PASSED``): what a run
    whose junit report was forged is graded by, for the record (it is not resolved)."""
    out = {}
    for key, phases in record.tests.items():
        kinds = set(phases.values())
        if phases.get("call") == "raised":
            out[key] = "FAILED"
        elif "raised" in kinds:
            out[key] = "ERROR"
        else:
            out[key] = "XFAIL" if "xfailed" in kinds else "SKIPPED" if "skipped" in kinds else "PASSED"
    return out
