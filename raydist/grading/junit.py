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
   failed or errored and be 0 or 1, and no FAIL_TO_PASS / PASS_TO_PASS id may appear twice.
   Any mismatch: not resolved, with the reason in ``error``. An id that does not appear is
   ``MISSING``, which never passes (as in SWE-bench), and the row counts them.
3. Test infrastructure the patch changed (``raydist.grading.infra``) is put back before
   the run, so a ``conftest.py`` that rewrites reports or exits early is not loaded, nor a
   ``*.dist-info`` in ``/testbed`` that registers a ``pytest11`` plugin.
4. A guard plugin (``raydist.grading.guard``), loaded with ``-p`` from a root-owned directory
   under a random name, fingerprints pytest's reporting code before the package under test is
   imported, keeps its own per-test record and writes it through a second FIFO; code of the
   package that rewrites pytest's reporting in process is caught there.

What remains possible: an attack written against raydist's guard itself (code that finds the
guard in ``sys.modules`` and rewrites its record, or writes one complete, self-consistent
forged pair of documents into both FIFOs and then stops pytest writing its own).
"""
from __future__ import annotations

import base64
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass

from raydist.grading.guard import guard_module, guard_source

TEST_UID = 65534  # `nobody` in Debian and Ubuntu images
REPORT_FIFO, GUARD_FIFO = "r.xml", "g.json"
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
    """The bash script (run as root before any test code runs) that makes, under
    ``/tmp/raydist-grade-<token>``, the report and guard FIFOs, the root-only copy directory,
    the test user's home and the root-owned directory holding the guard plugin
    (``raydist.grading.guard``), and gives ``/testbed`` to ``TEST_UID``. It needs root
    (``CAP_CHOWN``); a failure is the machine's, not the patch's."""
    base = f"/tmp/raydist-grade-{token}"
    plugin = f"{base}/guard/{guard_module(token)}.py"
    source = base64.b64encode(guard_source(f"{base}/{GUARD_FIFO}").encode()).decode()
    return " && ".join([
        f"mkdir -m 0711 {base}", f"mkdir -m 0700 {base}/out {base}/home", f"mkdir -m 0755 {base}/guard",
        f"mkfifo -m 0622 {base}/{REPORT_FIFO} {base}/{GUARD_FIFO}",
        f"echo {source} | base64 -d > {plugin}", f"chmod 0644 {plugin}",
        f"chown {TEST_UID}:{TEST_UID} {base}/home", f"chown -R {TEST_UID}:{TEST_UID} /testbed",
        "command -v setpriv >/dev/null",
    ])


def run_script(test_cmd: str, token: str) -> str:
    """The bash script (run as root in ``/testbed``, after :func:`setup_script`) that runs
    pytest as ``TEST_UID`` with the guard plugin loaded, its junit XML and the guard's record
    going through their FIFOs into the root-only ``report_path(token)`` and
    ``guard_record_path(token)``; it exits with pytest's own exit status."""
    base = f"/tmp/raydist-grade-{token}"
    command = (f"export PYTHONPATH={base}/guard${{PYTHONPATH:+:$PYTHONPATH}}; {test_cmd} -p {guard_module(token)} "
               f"--junitxml={base}/{REPORT_FIFO} -o junit_family=xunit2 -o junit_logging=no")
    # Each reader reopens its FIFO after each writer, so a document written after pytest's
    # own (an atexit hook) lands in the copy too instead of blocking.
    readers = [f"setsid bash -c 'while :; do cat \"$0\" || break; done' $B/{fifo} >> $B/out/{fifo} 2>/dev/null & "
               f"readers=\"$readers $!\"" for fifo in (REPORT_FIFO, GUARD_FIFO)]
    return "\n".join([
        f"B={base}", "readers=", *readers,
        f"HOME=$B/home setpriv --reuid={TEST_UID} --regid={TEST_UID} --clear-groups -- bash -lc {shlex.quote(command)}",
        "rc=$?",
        # Nothing of the test user may outlive pytest: a process holding a FIFO open could
        # still append to a copy.
        f"for _ in 1 2 3; do pkill -9 -u {TEST_UID} 2>/dev/null; sleep 0.2; done",
        "sleep 0.3; for r in $readers; do kill -9 -- -$r 2>/dev/null; wait $r 2>/dev/null; done",
        "exit $rc",
    ])


def report_path(token: str) -> str:
    """Where :func:`run_script` leaves the copy of pytest's XML (root-only)."""
    return f"/tmp/raydist-grade-{token}/out/{REPORT_FIFO}"


def guard_record_path(token: str) -> str:
    """Where :func:`run_script` leaves the copy of the guard plugin's record (root-only)."""
    return f"/tmp/raydist-grade-{token}/out/{GUARD_FIFO}"


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
    internal error, usage error, no tests) or a status that disagrees with the report, or a
    wanted id reported twice make the run ungradable (not resolved). A wanted id reported not
    at all is no reason to reject the run: it is ``MISSING`` and, as in SWE-bench, not passed
    (``raydist.grading.rules.statuses_of``)."""
    if report.problem:
        return report.problem
    if returncode not in (0, 1) or (returncode == 0) != (report.failed == 0):
        return f"pytest exit status {returncode} disagrees with its junit report ({report.failed} failed)"
    keys = {junit_key(t): t for t in wanted}
    twice = sorted(keys[k] for k in report.duplicates if k in keys)
    if twice:
        return f"tests reported more than once: {', '.join(twice[:5])}"
    return None
