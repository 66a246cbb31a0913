"""Per-test outcomes through a channel the code under test cannot write into by printing.

Threat model. The patch under test is code that runs inside the test process: it can print
anything (a fake ``PASSED tests/...::test_x`` line from an ``atexit`` hook defeats SWE-bench's
log parser, where the last line for an id wins), exit early (``os._exit(0)``), read its own
command line (``/proc/self/cmdline``), list ``/tmp`` and delete or rewrite files it can reach.
Defences, in the order a result must pass them:

1. The tests run as an unprivileged user (``TEST_UID``, via ``setpriv``) in a container
   where everything else runs as root. pytest writes its junit XML (``--junitxml``) to a FIFO
   in a root-owned directory named by a random token chosen at grading time; a root process
   reads the FIFO into a root-only file. The test process can write to the FIFO (it must,
   to report) but cannot delete it, replace it, read the copy, or kill the reader; any
   process of the test user still alive when pytest returns is killed before the copy is
   taken. A second document written into the FIFO (a forged report before or after
   pytest's own) makes the XML unparseable; a report that never arrives (deleted, exited
   early) leaves it empty. Both grade as not resolved.
2. The XML is cross-checked: the ``<testsuite>`` counters must equal its ``<testcase>``
   children, pytest's exit status (read by Docker, not printed) must be 0 iff no testcase
   failed or errored and be 0 or 1, every FAIL_TO_PASS / PASS_TO_PASS id must appear, and
   none may appear twice. Any mismatch: not resolved, with the reason in ``error``.
3. Test infrastructure the patch changed (``raydist.grading.infra``) is put back before
   the run, so a ``conftest.py`` that rewrites reports or exits early is not loaded.

What remains possible: code of the package under test that, on import, monkeypatches
pytest's own reporting (e.g. ``_pytest.runner``) and so forges every channel at once, or that
writes one complete, self-consistent forged document into the FIFO and then stops pytest
writing its own. Both need an attack written against raydist's grader; they are not stopped.
"""
from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass

TEST_UID = 65534  # `nobody` in Debian and Ubuntu images
_SHELL_OPERATORS = set(";&|<>()`$\n")


def is_pytest_command(test_cmd: str) -> bool:
    """True when ``test_cmd`` is one plain pytest invocation (``[VAR=x ...] python -m pytest
    ...``, ``pytest ...``, ``py.test ...``) with no shell operators, so that options appended
    to it reach pytest; anything else is graded from its log."""
    if _SHELL_OPERATORS & set(test_cmd):
        return False
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return False
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    return program in ("pytest", "py.test") or bool(
        re.fullmatch(r"python[0-9.]*", program) and words[1:3] == ["-m", "pytest"])


def setup_script(token: str) -> str:
    """The bash script (run as root before any test code runs) that makes the report FIFO,
    the root-only copy directory and the test user's home under ``/tmp/raydist-grade-<token>``
    and gives ``/testbed`` to ``TEST_UID``. It needs root (``CAP_CHOWN``); a failure is the
    machine's, not the patch's."""
    base = f"/tmp/raydist-grade-{token}"
    return " && ".join([
        f"mkdir -m 0711 {base}", f"mkdir -m 0700 {base}/out {base}/home", f"mkfifo -m 0622 {base}/r.xml",
        f"chown {TEST_UID}:{TEST_UID} {base}/home", f"chown -R {TEST_UID}:{TEST_UID} /testbed",
        "command -v setpriv >/dev/null",
    ])


def run_script(test_cmd: str, token: str) -> str:
    """The bash script (run as root in ``/testbed``, after :func:`setup_script`) that runs
    pytest as ``TEST_UID`` with its junit XML going through the FIFO into the root-only
    ``report_path(token)``; it exits with pytest's own exit status."""
    base = f"/tmp/raydist-grade-{token}"
    command = f"{test_cmd} --junitxml={base}/r.xml -o junit_family=xunit2 -o junit_logging=no"
    return "\n".join([
        f"B={base}",
        # The reader reopens the FIFO after each writer, so a report written after pytest's
        # own (an atexit hook) lands in the copy too instead of blocking.
        "setsid bash -c 'while :; do cat \"$0\" || break; done' $B/r.xml >> $B/out/r.xml 2>/dev/null & reader=$!",
        f"HOME=$B/home setpriv --reuid={TEST_UID} --regid={TEST_UID} --clear-groups -- bash -lc {shlex.quote(command)}",
        "rc=$?",
        # Nothing of the test user may outlive pytest: a process holding the FIFO open could
        # still append to the report.
        f"for _ in 1 2 3; do pkill -9 -u {TEST_UID} 2>/dev/null; sleep 0.2; done",
        "sleep 0.3; kill -9 -- -$reader 2>/dev/null; wait $reader 2>/dev/null",
        "exit $rc",
    ])


def report_path(token: str) -> str:
    """Where :func:`run_script` leaves the copy of pytest's XML (root-only)."""
    return f"/tmp/raydist-grade-{token}/out/r.xml"


@dataclass(frozen=True)
class JunitReport:
    """``statuses``: junit key (``classname::name``) -> ``PASSED``/``FAILED``/``ERROR``/
    ``SKIPPED``/``XFAIL``; ``duplicates``: keys reported more than once; ``problem``: why the
    document cannot be trusted (unparseable, counters that disagree), else None."""

    statuses: dict[str, str]
    duplicates: tuple[str, ...]
    failed: int
    problem: str | None


def junit_key(test_id: str) -> str:
    """The ``classname::name`` pytest's junitxml writes for node id ``test_id``
    (``_pytest.junitxml.mangle_test_address``: ``tests/t.py::C::f[a/b]`` ->
    ``tests.t.C::f[a/b]``)."""
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1]


def _status(case: ET.Element) -> str:
    tags = {child.tag: child for child in case}
    if "failure" in tags:
        return "FAILED"
    if "error" in tags:
        return "ERROR"
    if "skipped" in tags:
        return "XFAIL" if tags["skipped"].get("type") == "pytest.xfail" else "SKIPPED"
    return "PASSED"


def parse_junit(xml: bytes) -> JunitReport:
    """Statuses from one pytest junit XML document (xunit2), with its consistency checks.

    Never raises: an empty, unparseable or inconsistent document comes back with ``problem``
    set (and whatever statuses it had)."""
    if not xml.strip():
        return JunitReport({}, (), 0, "pytest wrote no junit report")
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        return JunitReport({}, (), 0, f"the junit report is not one XML document ({exc})")
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    statuses: dict[str, str] = {}
    duplicates: list[str] = []
    failed, problem = 0, None
    for suite in suites:
        cases = suite.findall("testcase")
        counts = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
        for case in cases:
            key = f"{case.get('classname', '')}::{case.get('name', '')}"
            status = _status(case)
            counts["failures"] += status == "FAILED"
            counts["errors"] += status == "ERROR"
            counts["skipped"] += status in ("SKIPPED", "XFAIL")
            failed += status in ("FAILED", "ERROR")
            if key in statuses:
                duplicates.append(key)
            statuses[key] = status
        stated = {name: suite.get(name) for name in counts}
        if any(stated[n] is None or not stated[n].isdigit() or int(stated[n]) != counts[n] for n in counts):
            problem = f"junit counters {stated} disagree with its testcases {counts}"
    if not suites:
        problem = "the junit report has no <testsuite>"
    return JunitReport(statuses, tuple(duplicates), failed, problem)


def check_report(report: JunitReport, returncode: int, wanted: Iterable[str]) -> str | None:
    """Why ``report`` cannot grade the ids ``wanted`` given pytest's exit status, else None.

    pytest exits 0 iff every test passed, 1 when some failed; any other status (interrupted,
    internal error, usage error, no tests) or a status that disagrees with the report, a
    wanted id reported twice or not at all make the run ungradable (not resolved)."""
    if report.problem:
        return report.problem
    if returncode not in (0, 1) or (returncode == 0) != (report.failed == 0):
        return f"pytest exit status {returncode} disagrees with its junit report ({report.failed} failed)"
    keys = {junit_key(t): t for t in wanted}
    twice = sorted(keys[k] for k in report.duplicates if k in keys)
    if twice:
        return f"tests reported more than once: {', '.join(twice[:5])}"
    return None
