"""Grading one patch with SWE-bench semantics in a fresh container.

Steps (as swebench/harness/run_evaluation.py and its eval script do them): apply the model
patch (``GIT_APPLY_CMDS``, :mod:`raydist.grading.apply`); put back the test infrastructure it
changed (:mod:`raydist.grading.infra`); restore the files the test patch touches to the base
commit; apply the test patch; run the instance's test command. Per-test outcomes come from
pytest's junit XML through a channel the tests cannot forge by printing
(:mod:`raydist.grading.junit`, ``channel="junit"``), cross-checked with the record of
a guard plugin that catches in-process rewriting of pytest's reporting
(:mod:`raydist.grading.guard`); a test command that is not one
plain pytest call is graded from its log with the log parser swebench uses for the
instance's repository (``raydist.grading.rules.log_parser_for``;
``channel="log"``). The instance is resolved iff every FAIL_TO_PASS and every
PASS_TO_PASS test passes (swebench.harness.grading: ``get_eval_tests_report`` /
``get_resolution_status``); an id the run did not report is ``MISSING`` and never passes.
"""
from __future__ import annotations

import hashlib
import io
import secrets
import shlex
import tarfile

from raydist.grading.apply import ApplyResult, apply_patch
from raydist.grading.environment import GRADING_ENV
from raydist.grading.guard import check_guard, guard_statuses, parse_guard
from raydist.grading.infra import infra_changes, infra_kind, packaging_changes
from raydist.grading.junit import (
    check_report,
    guard_record_path,
    is_pytest_command,
    junit_key,
    parse_junit,
    report_path,
    run_script,
    setup_script,
)
from raydist.grading.rules import MISSING, is_resolved, parse_test_log, statuses_of
from raydist.grading.test_files import restore_command, touched_files
from raydist.grading.testrun import TestRun
from raydist.outcomes import InfrastructureError
from raydist.sandbox import Limits, Sandbox, SandboxProvider, as_provider

RESTORE_TIMEOUT = 120.0
# Packaging metadata in /testbed (raydist.grading.infra.is_packaging), outside .git.
_FIND_PACKAGING = ("find . -path ./.git -prune -o \\( -name '*.dist-info' -o -name '*.egg-info' -o -name '*.egg-link' "
                   "-o -name '*.pth' -o -name entry_points.txt \\) -print0 -prune")


class ContainerRunner:
    """The ``TestRunner`` of raydist's own instance images (``raydist.grading.testrun``): each
    ``run(instance, patch)`` is ``grade(provider, instance, image_tag, patch, timeout=..., limits=...)``
    in a fresh container of ``image_tag``; ``timeout`` in seconds bounds each test run."""

    def __init__(self, provider: SandboxProvider, image_tag: str, *, timeout: float, limits: Limits | None = None):
        self.provider, self.image_tag, self.timeout, self.limits = as_provider(provider), image_tag, timeout, limits

    def run(self, instance, patch: str) -> TestRun:
        """``grade`` of ``patch`` for ``instance`` (channel ``junit``, or ``log`` for a test command
        that is not one plain pytest call)."""
        return grade(self.provider, instance, self.image_tag, patch, timeout=self.timeout, limits=self.limits)


def grade(provider: SandboxProvider, instance, image_tag: str, model_patch: str, *,
          timeout: float, limits: Limits | None = None) -> TestRun:
    """Grade ``model_patch`` (a unified diff in original coordinates) for ``instance`` in a
    fresh sandbox of ``provider`` from ``image_tag``; ``timeout`` bounds the test run, in seconds.
    The test command runs under ``raydist.grading.environment.GRADING_ENV`` (TZ, hash seed, locale pinned).

    ``instance`` provides ``instance_id, test_patch, test_cmd, FAIL_TO_PASS, PASS_TO_PASS``.
    A patch that does not apply, a test patch that does not apply and a test timeout are
    recorded outcomes (``resolved=False`` with ``error`` set), never exceptions. Raises
    ``ValueError`` when the instance has no ``test_cmd``, ``InfrastructureError`` (cause
    ``grading_sandbox``) when the container cannot run the tests as an unprivileged user.
    """
    if not instance.test_cmd:
        raise ValueError(f"instance {instance.instance_id!r} has no test_cmd; add the command "
                         "that runs its tests (e.g. `python -m pytest -rA <files>`)")
    channel = "junit" if is_pytest_command(instance.test_cmd) else "log"
    labels = {"raydist.role": "grade", "raydist.instance": instance.instance_id}
    with as_provider(provider).create(image_tag, limits=limits or Limits(), name=f"grade-{instance.instance_id}",
                                      user="root", labels=labels) as box:
        # The image's /testbed may belong to its own user; git refuses such a tree to root.
        box.exec("git config --global --add safe.directory '*'", timeout=RESTORE_TIMEOUT)
        packaging = _packaging_snapshot(box) if model_patch.strip() else None
        model = apply_patch(box, model_patch, label="model")
        if not model.applied:
            return _stopped(instance, model, model.output,
                            f"patch does not apply: {instance.instance_id}: {_tail(model.output)}", channel,
                            cause="patch_does_not_apply")
        infra = _put_back_infra(box, packaging) if packaging is not None else ()
        prepared = _prepare_tests(box, instance)
        if isinstance(prepared, str):
            return _stopped(instance, model, prepared, f"{instance.instance_id}: {_tail(prepared)}", channel, infra,
                            cause="test_patch_does_not_apply")
        if channel == "junit":
            token = secrets.token_hex(16)
            setup = box.exec(setup_script(token), timeout=RESTORE_TIMEOUT)
            if setup.returncode != 0:
                raise InfrastructureError(
                    f"the grading container of {instance.instance_id!r} cannot run the tests as an unprivileged "
                    f"user (needs root with CAP_CHOWN/CAP_SETUID and setpriv): {setup.output[-500:]}",
                    cause="grading_sandbox")
            run = box.exec(run_script(instance.test_cmd, token), timeout=timeout, env=dict(GRADING_ENV))
            copies = [report_path(token).lstrip("/"), guard_record_path(token).lstrip("/")]
            read = box.read_files(copies, root="/")
            xml, record = (read[c] or b"" for c in copies)  # no copy at all: no document
        else:
            run, xml, record = box.exec(instance.test_cmd, timeout=timeout, env=dict(GRADING_ENV)), None, None
    log = f"{_section('model patch: ' + model.method, model.output)}{_section('tests', run.output)}"
    return _graded(instance, model, run, (xml, record), log, timeout, infra)


def _changed_paths(box: Sandbox) -> list[str]:
    """Paths of /testbed that differ from HEAD (modified, deleted, untracked and ignored)."""
    res = box.exec("git status --porcelain -z --untracked-files=all --ignored --no-renames", timeout=RESTORE_TIMEOUT)
    if res.returncode != 0:
        raise RuntimeError(f"git status failed in the grading container: {res.output[-2000:]}")
    return [entry[3:] for entry in res.output.split("\0") if len(entry) > 3]


def _packaging_snapshot(box: Sandbox) -> tuple[str, dict[str, str]]:
    """A root-only tar of /testbed's packaging metadata and its listing (path -> fingerprint)."""
    archive = f"/tmp/raydist-pkg-{secrets.token_hex(8)}.tar"
    res = box.exec(f"umask 077 && {_FIND_PACKAGING} | tar --null -T - -cf {archive}", timeout=RESTORE_TIMEOUT)
    if res.returncode != 0:
        raise RuntimeError(f"could not list packaging metadata in the grading container: {res.output[-2000:]}")
    data = box.read_files([archive.lstrip("/")], root="/")[archive.lstrip("/")] or b""
    listing = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            path = member.name.removeprefix("./").rstrip("/")
            if member.isfile():
                listing[path] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
            else:
                listing[path] = "dir" if member.isdir() else f"{member.type!r}:{member.linkname}"
    return archive, listing


def _restore_packaging(box: Sandbox, before: tuple[str, dict[str, str]]) -> list[str]:
    """Put /testbed's packaging metadata back as ``before`` (``_packaging_snapshot``) had it;
    the changed paths (directories left out)."""
    archive, listing = before
    after = _packaging_snapshot(box)[1]
    changed = packaging_changes(listing, after)
    if changed:
        removed = " ".join(shlex.quote(p) for p in changed if p in after)
        kept = " ".join(shlex.quote("./" + p) for p in changed if p in listing and listing[p] != "dir")
        script = " && ".join(filter(None, [removed and f"rm -rf -- {removed}",
                                           kept and f"tar -xpf {archive} --no-recursion -- {kept}"]))
        reset = box.exec(script, timeout=RESTORE_TIMEOUT)
        if reset.returncode != 0:
            raise RuntimeError(f"could not put back packaging metadata {changed}: {reset.output[-2000:]}")
    return [p for p in changed if listing.get(p) != "dir" and after.get(p) != "dir"]


def _put_back_infra(box: Sandbox, packaging: tuple[str, dict[str, str]]) -> tuple[str, ...]:
    """Restore the test infrastructure the applied model patch changed: to HEAD, and packaging
    metadata to ``packaging`` (the state before the patch); its paths."""
    candidates = [p for p in _changed_paths(box) if infra_kind(p)]
    sections = [p for p in candidates if infra_kind(p) == "section"]
    texts: dict[str, tuple[str | None, str | None]] = {p: (None, "") for p in candidates}
    if sections:
        after = box.read_files(sections)
        for path in sections:
            head = box.exec(f"git show HEAD:{shlex.quote(path)}", timeout=RESTORE_TIMEOUT)
            data = after[path]
            texts[path] = (head.output if head.returncode == 0 else None,
                           None if data is None else data.decode("utf-8", errors="replace"))
    changed = infra_changes(texts)
    if changed:
        reset = box.exec(restore_command(changed), timeout=RESTORE_TIMEOUT)
        if reset.returncode != 0:
            raise RuntimeError(f"could not put back test infrastructure {changed}: {reset.output[-2000:]}")
    return tuple(sorted(set(changed) | set(_restore_packaging(box, packaging))))


def _prepare_tests(box: Sandbox, instance) -> None | str:
    """Reset the test files to HEAD and apply the test patch; a message when that fails."""
    files = touched_files(instance.test_patch)
    if files:
        reset = box.exec(restore_command(files), timeout=RESTORE_TIMEOUT)
        if reset.returncode != 0:
            return f"restoring test files to HEAD failed: {reset.output}"
    tests = apply_patch(box, instance.test_patch, label="test", fallbacks=False)
    if not tests.applied:
        return f"test patch does not apply: {tests.output}"
    return None


def _graded(instance, model: ApplyResult, run, documents: tuple[bytes | None, bytes | None], log: str,
            timeout: float, infra: tuple[str, ...]) -> TestRun:
    f2p, p2p = tuple(instance.FAIL_TO_PASS), tuple(instance.PASS_TO_PASS)
    error = f"{instance.instance_id}: tests timed out after {timeout:g}s" if run.timed_out else None
    cause = "tests_timed_out" if error else None
    xml, record = documents
    if xml is None:
        channel, tests = "log", parse_test_log(run.output, instance)
        keyed = tests
        lookup = {t: t for t in f2p + p2p}
    else:
        channel = "junit"
        report = parse_junit(xml)
        guard = parse_guard(record or b"")
        forged = check_guard(report.statuses, guard)
        if error is None and guard.tampered:  # said first: a tampered run's XML may be broken too
            error, cause = f"{instance.instance_id}: {forged}", "reporting_tampered"
        problem = check_report(report, run.returncode, f2p + p2p)
        if error is None and problem:
            error, cause = f"{instance.instance_id}: junit report rejected: {problem}", "junit_rejected"
        if error is None and forged:
            error, cause = f"{instance.instance_id}: {forged}", "reporting_tampered"
        # A forged report says nothing: the row shows what the guard saw.
        keyed = guard_statuses(guard) if cause == "reporting_tampered" and guard.tests else report.statuses
        lookup = {t: junit_key(t) for t in f2p + p2p}
        tests = _node_ids(keyed, instance)
    f2p_status = {t: statuses_of([lookup[t]], keyed)[lookup[t]] for t in f2p}
    p2p_status = {t: statuses_of([lookup[t]], keyed)[lookup[t]] for t in p2p}
    missing = sum(s == MISSING for s in (*f2p_status.values(), *p2p_status.values()))
    resolved = error is None and missing == 0 and is_resolved(keyed, [lookup[t] for t in f2p], [lookup[t] for t in p2p])
    return TestRun(
        resolved=resolved, applied=True, apply_method=model.method, tests=tests,
        fail_to_pass=f2p_status, pass_to_pass=p2p_status, log=log, error=error,
        channel=channel, test_infra_changed=infra, error_cause=cause, missing=missing,
        timed_out=bool(run.timed_out),
    )


def _node_ids(statuses: dict[str, str], instance) -> dict[str, str]:
    """junit keys (``classname::name``) back to pytest node ids, using the test files the
    instance names (its ids and test patch); a key of an unknown file is kept as it is."""
    files = {t.split("::", 1)[0] for t in (*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS)}
    files |= {p for p in touched_files(instance.test_patch) if p.endswith(".py")}
    prefixes = sorted(((junit_key(f + "::x").rsplit("::", 1)[0], f) for f in files), key=lambda x: -len(x[0]))
    out = {}
    for key, status in statuses.items():
        classname, _, name = key.rpartition("::")
        node = key
        for prefix, path in prefixes:
            if classname == prefix or classname.startswith(prefix + "."):
                node = "::".join([path, *filter(None, classname[len(prefix) + 1:].split(".")), name])
                break
        out[node] = status
    return out


def _stopped(instance, model: ApplyResult, log: str, error: str, channel: str,
             infra: tuple[str, ...] = (), *, cause: str) -> TestRun:
    missing = MISSING
    return TestRun(
        resolved=False, applied=model.applied, apply_method=model.method, tests={},
        fail_to_pass={t: missing for t in instance.FAIL_TO_PASS},
        pass_to_pass={t: missing for t in instance.PASS_TO_PASS},
        log=log, error=error, channel=channel, test_infra_changed=infra, error_cause=cause,
        missing=len(instance.FAIL_TO_PASS) + len(instance.PASS_TO_PASS),
    )


def _section(title: str, text: str) -> str:
    return f">>>>> {title}\n{text.rstrip()}\n"


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
