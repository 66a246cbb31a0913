"""Fresh instances of one library: a recent PyPI release, bugs injected, kept by its own tests.

    release (PyPI, uploaded after a date)  releases.pick_release
      -> sdist fetched, verified, unpacked  raydist.sandbox.sources
      -> tests run twice on the release (and once in its image): the tests that pass
      -> candidates (libcst), tried in a seeded order    mutations.scan_tree, sample_order
      -> each: diff applied, tests run; kept by SWE-bench's rule, run again to confirm   keep.keep_or_drop
      -> problem statement by a model from the failing tests' output   statement.write_statement
      -> one instance line (SWE-bench fields + recipe), one log line per candidate    store

The instance: ``injected_patch`` is the bug's diff, ``patch`` its exact reverse, ``test_patch``
is "" (the tests ship with the release, as in SWE-smith), FAIL_TO_PASS / PASS_TO_PASS as
measured, and ``created_at``, ``fresh`` (the release's provenance), ``mutation`` and
``statement`` (who wrote it) recorded beside them.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from raydist.grading.apply import apply_on_host
from raydist.grading.rules import passing_in_all
from raydist.sandbox.sources import fetch_sdist, unpack_sdist
from raydist.tasks.fresh import keep
from raydist.tasks.fresh import statement as statements
from raydist.tasks.fresh.mutations import (
    KINDS,
    Mutation,
    Unparsed,
    apply_mutation,
    changes_program,
    scan_tree,
)
from raydist.tasks.fresh.releases import Release, pick_release
from raydist.tasks.fresh.source_tree import PatchError, SourceTree, detect_test_cmd
from raydist.tasks.fresh.store import append_line, log_path, read_lines
from raydist.tasks.schema import DEFAULT_INSTALL, Instance, Recipe, Sdist
from raydist.views.recover import recover_patch

BUILDER = "raydist.tasks.fresh"
ContainerStatuses = Callable[[Instance], dict]
"""(an instance of the release without a bug) -> test id -> status, run in its instance image."""


class LibraryError(RuntimeError):
    """A library cannot be built from: no tests pass on its release, or it ships none."""


@dataclass(frozen=True)
class BuildSettings:
    """How instances are made (``raydist tasks build --help`` gives each option)."""

    released_after: date | None = None
    """Only releases whose sdist was uploaded on or after this date (None: any)."""
    per_library: int = 8
    """Instances to keep per library."""
    seed: int = 0
    """Orders the candidates and seeds the statement model's requests."""
    max_tries: int = 80
    """Candidates tried per library at most (kept or rejected)."""
    max_fail_fraction: float = 0.5
    """A bug may fail at most this share of the tests that pass on the release."""
    timeout: float = 300
    """Seconds one test run may take."""
    statement_attempts: int = 2
    """Model answers tried per statement before the test-output fallback."""
    statement_workers: int = 2
    """Statements written at once (the embedded server decodes two requests in one batch)."""
    install: tuple[str, ...] = DEFAULT_INSTALL
    """Pins of the test environment (host venv and instance image)."""
    test_cmds: dict = field(default_factory=dict)
    """Library name -> test command, for releases whose tests ``detect_test_cmd`` does not find."""
    cache_dir: Path = Path.home() / ".cache" / "raydist"
    """Where sdists are cached (``<cache_dir>/sdists``)."""
    work: Path = Path(tempfile.gettempdir()) / "raydist-fresh"
    """Scratch: unpacked trees and test virtualenvs."""


@dataclass(frozen=True)
class StatementModel:
    """The model that writes problem statements: ``complete`` (None: every statement is the
    recorded fallback), its ``name`` as recorded, the prompt ``template``."""

    complete: statements.Complete | None
    name: str | None
    template: str


@dataclass(frozen=True)
class LibraryReport:
    """One library's build: its release, test command, how many tests pass on it (host, and
    how many of those the instance image drops), candidates found, files not parsed, candidates
    tried, instances kept, rejections by reason (``keep.REASONS``) and wall seconds."""

    release: Release
    test_cmd: str
    base_passing: int
    container_dropped: int
    candidates: int
    unparsed: tuple[Unparsed, ...]
    tried: int
    kept: int
    rejected: dict
    seconds: float


def sample_order(candidates: list[Mutation], seed: int) -> list[Mutation]:
    """Every candidate once, in a seeded order that takes the kinds in turn (``KINDS`` order),
    each kind's candidates shuffled: a library with 380 swappable calls still gets comparisons tried."""
    rng = random.Random(seed)
    groups = []
    for kind in KINDS:
        group = [m for m in candidates if m.kind == kind]
        rng.shuffle(group)
        groups.append(group)
    order = []
    for i in range(max((len(g) for g in groups), default=0)):
        order.extend(g[i] for g in groups if i < len(g))
    return order


def build_library(spec: str, settings: BuildSettings, model: StatementModel, out: Path,
                  container: ContainerStatuses | None = None, say: Callable[[str], None] = print) -> LibraryReport:
    """Build up to ``settings.per_library`` instances of ``spec`` (``name`` or ``name==version``)
    into ``out`` (appending; instances and log lines already there count, so a killed build
    resumes), testing in host virtualenvs; ``container`` (None: skipped) runs the release's tests
    once in its instance image, and tests that do not pass there are left out of both lists.

    Raises ``ReleaseNotFound``, ``SourceError`` (sdist), :class:`LibraryError`.
    """
    start = time.monotonic()
    release = pick_release(spec, released_after=settings.released_after)
    sdist = Sdist(release.name, release.version, release.sha256, release.filename)
    settings.work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{release.name}-", dir=settings.work))
    try:
        root = unpack_sdist(fetch_sdist(sdist, settings.cache_dir), scratch)
        test_cmd = settings.test_cmds.get(release.name) or detect_test_cmd(root)
        tree = SourceTree(root, settings.install, test_cmd, settings.work, settings.timeout)
        base, dropped = _base_passing(tree, release, sdist, settings, container)
        say(f"{release.name} {release.version} (uploaded {release.upload_time}): {len(base)} tests pass "
            f"({dropped} more only on the host); {test_cmd}")
        candidates, unparsed = scan_tree(root, check=False)
        done = {r["mutation"]: r for r in read_lines(log_path(out)) if r.get("sdist_sha256") == release.sha256}
        wanted = settings.per_library - sum(1 for r in done.values() if r["verdict"] == "kept")
        # Statements are written by the model while the next candidates' tests run.
        with ThreadPoolExecutor(max_workers=settings.statement_workers) as pool:
            pending: dict[Future, dict] = {}
            for mutation in sample_order(candidates, settings.seed):
                wanted -= _record_written(pending, done, out, say, block=False)
                if wanted - len(pending) <= 0 or len(done) + len(pending) >= settings.max_tries:
                    break
                if mutation.key() in done or any(r["mutation"] == mutation.key() for r in pending.values()):
                    continue
                row, kept = _try(mutation, tree, base, settings, release)
                if kept is None:
                    append_line(log_path(out), row)
                    done[mutation.key()] = row
                    say(f"  {mutation.kind} {mutation.file}:{mutation.line}: {row['verdict']}")
                else:
                    pending[pool.submit(_write_instance, kept, release, sdist, settings, model, tree.test_cmd)] = row
            wanted -= _record_written(pending, done, out, say, block=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rejected = Counter(r["verdict"] for r in done.values() if r["verdict"] != "kept")
    kept = sum(1 for r in done.values() if r["verdict"] == "kept")
    return LibraryReport(release, test_cmd, len(base), dropped, len(candidates), tuple(unparsed), len(done), kept,
                         dict(sorted(rejected.items())), round(time.monotonic() - start, 1))


def _base_passing(tree: SourceTree, release: Release, sdist: Sdist, settings: BuildSettings,
                  container: ContainerStatuses | None) -> tuple[frozenset[str], int]:
    runs = [tree.run(), tree.run()]
    host = passing_in_all([run.tests for run in runs])
    if not host:
        raise LibraryError(f"{release.name} {release.version}: no test passes on the release with "
                           f"{tree.test_cmd!r}; the log ends:\n{runs[0].log[-2000:]}")
    if container is None:
        return host, 0
    # The grader maps junit's keys to node ids through the test files the instance's lists name.
    listed = keep.Verdict(True, None, (), tuple(sorted(host)))
    baseline = _instance(f"{release.name}-{release.version}-release", release, sdist, settings, tree.test_cmd,
                         gold="", bug="", statement=None, mutation=None, verdict=listed)
    inside = passing_in_all([container(baseline)])
    if not host & inside:
        raise LibraryError(f"{release.name} {release.version}: none of the {len(host)} tests that pass on the host "
                           "passes in the instance image; --no-container-check skips this check")
    return host & inside, len(host - inside)


@dataclass(frozen=True)
class _Kept:
    """A candidate the keep rule kept: its diffs, verdict and the failure text for its statement."""

    mutation: Mutation
    bug: str
    gold: str
    verdict: keep.Verdict
    excerpt: str


def _try(mutation: Mutation, tree: SourceTree, base: frozenset[str], settings: BuildSettings,
         release: Release) -> tuple[dict, _Kept | None]:
    """One candidate judged: its log line, and what its instance needs when it is kept."""
    start = time.monotonic()
    source = (tree.root / mutation.file).read_text(encoding="utf-8")
    verdict, kept = keep.Verdict(False, "does_not_compile"), None
    if changes_program(source, mutation):
        buggy = apply_mutation(source, mutation)
        bug = recover_patch({mutation.file: source}, {mutation.file: buggy})
        gold = recover_patch({mutation.file: buggy}, {mutation.file: source})
        try:
            verdict, log = _judged(tree, bug, base, settings)
            if verdict.kept:
                _check_gold(tree, bug, gold, mutation.file, source)
                kept = _Kept(mutation, bug, gold, verdict,
                             statements.failure_excerpt(log, verdict.fail_to_pass, mutation))
        except PatchError:
            verdict = keep.Verdict(False, "patch_does_not_apply")
    row = {"library": release.name, "version": release.version, "sdist_sha256": release.sha256,
           "mutation": mutation.key(), "kind": mutation.kind,
           "file": mutation.file, "line": mutation.line, "verdict": "kept" if kept else verdict.reason,
           "fail_to_pass": len(verdict.fail_to_pass), "instance_id": None, "statement_source": None,
           "test_seconds": round(time.monotonic() - start, 2)}
    return row, kept


def _write_instance(kept: _Kept, release: Release, sdist: Sdist, settings: BuildSettings, model: StatementModel,
                    test_cmd: str) -> tuple[Instance, float]:
    """The instance of a kept candidate, its statement asked of the model (runs in a worker
    thread), and the seconds the statement took."""
    start = time.monotonic()
    written = statements.write_statement(
        model.complete, model=model.name, template=model.template, library=release.name, version=release.version,
        failing=kept.verdict.fail_to_pass, excerpt=kept.excerpt, mutation=kept.mutation, patch=kept.bug,
        seed=settings.seed, attempts=settings.statement_attempts)
    instance_id = f"{release.repo.replace('/', '__')}-fresh-{kept.mutation.key()[:8]}"
    instance = _instance(instance_id, release, sdist, settings, test_cmd, gold=kept.gold, bug=kept.bug,
                         statement=written, mutation=kept.mutation, verdict=kept.verdict)
    return instance, round(time.monotonic() - start, 2)


def _record_written(pending: dict[Future, dict], done: dict, out: Path, say, *, block: bool) -> int:
    """Write the instances whose statements are ready (all of them when ``block``), then their
    log lines, in that order: a candidate is logged as kept only once its instance is on disk."""
    ready = list(as_completed(pending)) if block else [f for f in pending if f.done()]
    for future in ready:
        row = pending.pop(future)
        instance, seconds = future.result()
        append_line(out, instance.to_record())
        row |= {"instance_id": instance.instance_id, "statement_source": instance.extra["statement"]["source"],
                "statement_seconds": seconds}
        append_line(log_path(out), row)
        done[row["mutation"]] = row
        say(f"  {row['kind']} {row['file']}:{row['line']}: kept ({row['fail_to_pass']} failing), "
            f"statement: {row['statement_source']}")
    return len(ready)


def _judged(tree: SourceTree, bug: str, base: frozenset[str], settings: BuildSettings) -> tuple[keep.Verdict, str]:
    """The verdict on ``bug`` (a kept one confirmed by a second run) and the last run's log."""
    first = tree.run(bug)
    verdict = keep.keep_or_drop(base, first.tests, timed_out=first.timed_out,
                                max_fail_fraction=settings.max_fail_fraction)
    if not verdict.kept:
        return verdict, first.log
    again = tree.run(bug)
    return keep.confirm(verdict, keep.keep_or_drop(base, again.tests, timed_out=again.timed_out,
                                            max_fail_fraction=settings.max_fail_fraction)), again.log


def _check_gold(tree: SourceTree, bug: str, gold: str, path: str, source: str) -> None:
    """The gold patch applies on the buggy tree and gives back the release's file exactly."""
    apply_on_host(tree.root, bug)
    try:
        apply_on_host(tree.root, gold)
    except PatchError:
        apply_on_host(tree.root, bug, reverse=True)
        raise
    if (tree.root / path).read_text(encoding="utf-8") != source:
        (tree.root / path).write_text(source, encoding="utf-8")
        raise PatchError(f"{path}: the gold patch does not give back the release's text")


def _instance(instance_id: str, release: Release, sdist: Sdist, settings: BuildSettings, test_cmd: str, *,
              gold: str, bug: str, statement: statements.Statement | None, mutation: Mutation | None,
              verdict: keep.Verdict | None) -> Instance:
    extra = {"created_at": datetime.now(UTC).isoformat(timespec="seconds"),
             "fresh": {"builder": BUILDER, "release": release.record(),
                       "released_after": str(settings.released_after) if settings.released_after else None,
                       "seed": settings.seed, "measured_runs": 2}}
    if mutation is not None:
        extra["mutation"] = mutation.record()
    if statement is not None:
        extra["statement"] = statement.record()
    return Instance(
        instance_id=instance_id, repo=release.repo, base_commit=release.version, patch=gold, test_patch="",
        problem_statement=statement.text if statement else "", version=release.version, test_cmd=test_cmd,
        FAIL_TO_PASS=verdict.fail_to_pass if verdict else (), PASS_TO_PASS=verdict.pass_to_pass if verdict else (),
        recipe=Recipe(sdist=sdist, install=settings.install, install_repo=None, injected_patch=bug), extra=extra)
