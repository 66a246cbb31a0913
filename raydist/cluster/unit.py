"""One run unit, start to finish, in plain Python (the Ray task in ``runner`` only calls it).

Flow (docs/architecture.md): instance image -> View (pure) -> agent sandbox with the view
written and git re-initialised at the view state (so no history reveals the original) ->
agent -> changed files read back -> patch recovered in original coordinates (§III-G) ->
graded in a fresh container (an agent's empty patch is not graded: ``_not_graded``) -> one row.
"""

from __future__ import annotations

import io
import json
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from raydist.cluster.outputs import grading_log, read_trajectory, scratch_trajectory
from raydist.cluster.plan import RunUnit
from raydist.outcomes import (
    BUG,
    INPUT_ERROR,
    RESOLVED,
    UNRESOLVED,
    InfrastructureError,
    InputError,
    agent_exit_of,
    classify_exception,
)
from raydist.tasks.swe_qa import is_qa

if TYPE_CHECKING:  # imported where used: the sandbox's Limits loads Docker
    from raydist.agents.settings import AgentSettings
    from raydist.qa.judge import JudgeSettings
    from raydist.sandbox import Limits
    from raydist.views import ViewOptions

# Files an agent's tools leave behind that are never part of a submission.
IGNORED = ("__pycache__/", "*.pyc", ".pytest_cache/", "*.egg-info/", ".mypy_cache/")

#: Agent kinds whose empty patch is graded all the same: the validity gate's scripted agents,
#: whose test runs are the gate's evidence (SchrodingerRepo §V-C: the null agent's unchanged
#: repository must not resolve). Any other agent's empty patch is not graded (``_not_graded``).
GRADED_EMPTY = ("null", "oracle")


@dataclass(frozen=True)
class UnitSettings:
    """Everything a unit needs besides the unit, the instance and the model endpoint. The
    sandbox fields are the launch's ``sandbox`` settings (``raydist.driver.config.SandboxConfig``
    holds their defaults); ``limits`` None means ``raydist.sandbox.Limits``' defaults. None of it
    is hashed here: the unit key hashes the composed config (``raydist.driver.plan``)."""

    agent_kind: str  # "llm" | "oracle" | "null"
    agent_settings: AgentSettings
    view_options: ViewOptions
    cache_dir: str
    run_dir: str
    network: str
    grading_timeout_s: float
    docker_host: str | None = None
    base_image: str | None = None
    limits: Limits | None = None
    image_namespace: str = "swebench"
    judge: JudgeSettings | None = None  # repository questions: who scores the answers (raydist.qa.judge)


class UnitInputError(InputError):
    """The instance itself cannot be run as given (recorded, not retried)."""


def execute_unit(unit: RunUnit, instance, settings: UnitSettings, endpoint=None, prepared=None, *,
                 run=None) -> dict:
    """Run one unit and return its result row (see ``raydist.results.schema``), with the
    agent's per-command records under ``step_records`` when it ran (``ResultStore.write_row``
    stores them as the unit's steps) and the unit's files under ``files``
    (``raydist.cluster.outputs``: the trajectory, also of a run that failed after the agent
    saved one, and the grading log), which the driver writes into its run directory: nothing
    is written into ``settings.run_dir`` from here, which may be on another machine.

    ``prepared`` is the unit's ``raydist.views.Prepared`` (L1 statement, L4 rewrites) from
    ``raydist.cluster.prepare``; levels without L1/L4 need none.

    Never raises for an outcome of the run: the row's ``outcome`` is one of
    ``raydist.outcomes.OUTCOMES``. A finished run is ``resolved`` or ``unresolved`` with its
    ``agent_exit``; an exception is classified by ``raydist.outcomes.classify_exception``
    (``infrastructure_error``: Docker, image build, model server, retried within a bound;
    ``input_error``: the instance; ``bug``: raydist itself, with the traceback in ``error``),
    with its ``error_cause``. An error row also carries ``retry_after`` (seconds or None; not
    a stored column) for the scheduler's backoff.

    ``run(unit, instance, settings, endpoint, prepared, trajectory_path) -> fields`` is the
    run itself (default: the sandboxed agent and grading of this module); it saves the
    trajectory at ``trajectory_path`` (a scratch file on this node)."""
    started = time.time()
    row = _base_row(unit)
    with scratch_trajectory(unit) as scratch:
        try:
            row.update((run or _run)(unit, instance, settings, endpoint, prepared, scratch))
        except Exception as exc:  # noqa: BLE001 - every failure must become a recorded row
            row.update(error_fields(exc))
        files = {**read_trajectory(scratch), **row.get("files", {})}
    if files:
        row["files"] = files
    row["wall_seconds"] = round(time.time() - started, 3)
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def error_fields(exc: BaseException) -> dict:
    """The row fields of a unit ended by ``exc``: ``outcome``, ``error_cause``, ``error``
    (``Type: message``; a bug's traceback follows, at most 4000 characters in all),
    ``resolved=False`` and ``retry_after``."""
    outcome, cause = classify_exception(exc)
    error = f"{type(exc).__name__}: {exc}"
    if outcome == BUG:
        error = f"{error}\n{traceback.format_exc()}"
    return {"outcome": outcome, "error_cause": cause, "error": error[:4000], "resolved": False,
            "retry_after": getattr(exc, "retry_after", None)}


def _base_row(unit: RunUnit) -> dict:
    return {
        "key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
        "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash, "resolved": False,
    }


def _run(unit: RunUnit, instance, settings: UnitSettings, endpoint, prepared, traj_path: Path) -> dict:
    from raydist.grading.apply import is_empty_patch
    from raydist.sandbox import Limits
    from raydist.views import build_view, recover_patch

    client, tag, repo, runner = _instance_image(instance, settings)
    if is_qa(instance):
        from raydist.cluster.qa_unit import run_qa

        return run_qa(unit, instance, settings, endpoint, prepared, traj_path, image=(client, tag, repo),
                      install_view=_install_view, agent_columns=agent_columns, agent_exit=agent_exit_or_raise)
    view = build_view(instance, repo, unit.level, unit.seed, settings.view_options, prepared)
    limits = settings.limits or Limits()

    t0 = time.time()
    from raydist.sandbox import Sandbox

    with Sandbox.create(client, tag, limits=limits, network=settings.network,
                        labels={"raydist.unit": unit.key}, name=f"agent-{unit.key[:12]}") as box:
        initial = _install_view(box, view)
        outcome = _run_agent(settings, view, box, endpoint, traj_path, instance, repo)
        changes = _read_changes(box, initial, repo)
    out = agent_columns(outcome, view)
    out["agent_seconds"] = round(time.time() - t0, 3)
    agent_exit = agent_exit_or_raise(outcome, settings)
    out["agent_exit"] = agent_exit
    if agent_exit == "model_error":
        out.update(outcome=UNRESOLVED, error=outcome.error)
    final = changes.final
    original = {path: repo.read(path) for path in final}
    patch = recover_patch(original, final)
    if changes.dropped:  # changes a text patch cannot carry (binary files, symlinks): named, not lost
        out["view_meta"] = json.dumps({**view.meta, "recovery_dropped": changes.dropped}, default=str, sort_keys=True)
    if is_empty_patch(patch) and settings.agent_kind not in GRADED_EMPTY:
        out.update(_not_graded(unit, instance, patch))
        return out
    t1 = time.time()
    result = runner.run(instance, patch)
    out.update(
        # An empty submission has nothing to apply: null, not a misleading True.
        resolved=bool(result.resolved), model_patch=patch, patch_applied=result.applied if patch else None,
        apply_method=result.apply_method, grading_seconds=round(time.time() - t1, 3),
        fail_to_pass_passed=sum(1 for s in result.fail_to_pass.values() if s == "PASSED"),
        fail_to_pass_total=len(instance.FAIL_TO_PASS),
        pass_to_pass_passed=sum(1 for s in result.pass_to_pass.values() if s == "PASSED"),
        pass_to_pass_total=len(instance.PASS_TO_PASS), tests_missing=result.missing,
        grading_channel=result.grading_channel, test_infra_changed=json.dumps(list(result.test_infra_changed)),
        files=grading_log(unit, result.log),
    )
    out.update(outcome=RESOLVED if result.resolved else UNRESOLVED)
    if result.error:
        out["error"] = result.error if not out.get("error") else f"{out['error']}\n{result.error}"
        out["error_cause"] = result.error_cause
        if result.error_cause == "test_patch_does_not_apply":
            # The instance's problem, not the agent's: recorded, never retried. A model patch
            # that does not apply, tests that time out and a junit report that fails its checks
            # (a forgery) are the agent's outcome: unresolved, with the reason.
            out["outcome"] = INPUT_ERROR
    return out


def agent_columns(outcome, view) -> dict:
    """The row columns every agent run fills, patch or question: exit status, steps, tokens,
    cost, the view's size and statement source, the §IV RQ2 action mix, the §III-F exposure
    audit (``view_meta`` with its ``audit``), and the step records (for the steps file)."""
    from raydist.agents.outcome import exposure_columns

    out = {
        "exit_status": outcome.exit_status, "steps": outcome.steps, "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens, "cost": outcome.cost, "view_files": len(view.files),
        "statement_source": view.meta.get("l1_source", "canonical"),
        "statement_attempts": int(view.meta.get("l1_attempts", 0)),
        **{f"actions_{category}": n for category, n in outcome.action_counts.items()},
        "step_records": [dict(r) for r in outcome.step_records],
    }
    exposure = exposure_columns(view, outcome.step_records)
    out["view_meta"] = json.dumps({**view.meta, "audit": exposure.pop("audit")}, default=str, sort_keys=True)
    out.update(exposure)
    return out


def agent_exit_or_raise(outcome, settings: UnitSettings) -> str:
    """``agent_exit`` of a finished agent run (``raydist.outcomes.agent_exit_of``). Raises
    ``InfrastructureError`` for a run that did not end on its own (ModelUnreachable, or any end
    that is not the agent's): the machine failed it, not the model."""
    agent_exit = agent_exit_of(outcome.exit_status, cost=outcome.cost,
                               cost_limit=float(settings.agent_settings.cost_limit))
    if agent_exit is None:
        cause = "model_unreachable" if outcome.exit_status == "ModelUnreachable" else "agent_exit"
        raise InfrastructureError(outcome.error or f"the agent ended with {outcome.exit_status!r}", cause=cause)
    return agent_exit


def _instance_image(instance, settings: UnitSettings):
    """``(client, image tag, RepoFiles of its /testbed, TestRunner)`` of ``instance``: raydist's image of its
    sdist recipe, or an official 5.x row's own image (no recipe, an ``eval_script``; ``raydist.sandbox.official``),
    and the runner of its tests there (``raydist.grading.runner_for``). Raises ``UnitInputError`` for a row with
    neither, or without a test command, ``InfrastructureError`` (cause ``official_image``) when it is missing."""
    from raydist.grading.official import has_eval_script, runner_for
    from raydist.sandbox import connect, ensure_instance_image
    from raydist.sandbox.official import (
        OfficialImageMissing,
        ensure_official_image,
        official_image_name,
        official_repo_dir,
    )
    from raydist.views import RepoFiles

    if instance.recipe is None and has_eval_script(instance):
        client = connect(settings.docker_host)
        try:
            tag = ensure_official_image(client, instance, settings.image_namespace)
        except OfficialImageMissing as exc:
            raise InfrastructureError(str(exc), cause="official_image") from None
        return (client, tag, RepoFiles(official_repo_dir(client, tag, Path(settings.cache_dir))),
                runner_for(client, instance, tag, timeout=settings.grading_timeout_s, limits=settings.limits))
    if instance.recipe is None:
        raise UnitInputError(
            f"instance {instance.instance_id!r} has no build recipe (sdist) and no eval_script: raydist builds an "
            "instance's image offline from a PyPI sdist and exact pins, or runs an official SWE-bench 5.x row "
            f"(image, eval_script, log_parser, eval_type) on its image (this row's is "
            f"{official_image_name(instance, settings.image_namespace)}); "
            "give the row `sdist` and `install` fields as the rows of ../shared/data/swebench/offline.jsonl have, or "
            "use the dataset's 5.x rows", cause="no_recipe")
    if not instance.test_cmd and not is_qa(instance):  # a question is judged, not tested
        raise UnitInputError(f"instance {instance.instance_id!r} has no test_cmd; add one to the instance",
                             cause="no_test_cmd")
    client = connect(settings.docker_host)
    image = ensure_instance_image(client, instance.recipe, base_tag=settings.base_image,
                                  cache_dir=Path(settings.cache_dir))
    return (client, image.tag, RepoFiles(Path(image.repo_dir)),
            runner_for(client, instance, image.tag, timeout=settings.grading_timeout_s, limits=settings.limits))


def _not_graded(unit: RunUnit, instance, patch: str) -> dict:
    """The grading columns of an agent's empty patch, which is not graded: ``unresolved`` with
    no test run (``grading_channel="none"``, per-test counts null, totals kept). SWE-bench's
    harness does the same (``run_evaluation`` leaves empty predictions out and its report
    counts them unresolved, as ``empty_patch_ids``). The tests of an empty patch are those of
    the unchanged repository, which the validity gate's null agent runs for every view
    (``GRADED_EMPTY``): with the gate on, a view whose unchanged repository already resolves
    is excluded before any agent runs."""
    note = ("model patch: empty\n\nnot graded: an empty patch leaves the repository unchanged and "
            "resolves nothing (SWE-bench's run_evaluation skips empty predictions too); the tests of the "
            "unchanged repository are the validity gate's null run of this view (gate=true)\n")
    return {"resolved": False, "outcome": UNRESOLVED, "model_patch": patch, "patch_applied": None,
            "apply_method": "empty", "grading_seconds": 0.0, "fail_to_pass_passed": None,
            "fail_to_pass_total": len(instance.FAIL_TO_PASS), "pass_to_pass_passed": None,
            "pass_to_pass_total": len(instance.PASS_TO_PASS), "tests_missing": None, "grading_channel": "none",
            "test_infra_changed": "[]", "files": grading_log(unit, note)}


def _install_view(box, view) -> dict[str, tuple]:
    """Write the view's files and make the view the repository's only history; return the
    initial tree's entries (``raydist.views.recover.tree_entries``), kept on the host where
    nothing the agent does can reach them: the patch is the diff from this tree."""
    from raydist.agents.scripted import write_file_commands

    # Written by commands, not put_archive, so the files keep belonging to the image's user
    # (an agent that runs unprivileged must be able to edit them).
    for path, text in sorted(view.files.items()):
        for command in write_file_commands(path, text):
            res = box.exec(command, timeout=300)
            if res.returncode != 0:
                raise RuntimeError(f"could not write view file {path} in the sandbox: {res.output[-2000:]}")
    excludes = "\\n".join(IGNORED)
    script = (
        "rm -rf .git && git init -q && "
        f"printf '{excludes}\\n' > .git/info/exclude && git add -A && "
        "git -c user.name=raydist -c user.email=raydist@localhost commit -qm 'initial commit' --no-verify"
    )
    res = box.exec(script, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"could not install the view in the sandbox: {res.output[-2000:]}")
    entries, _ = _tree(box)
    return entries


def _tree(box, baseline=None):
    """``tree_entries`` of the sandbox's /testbed, read through Docker's archive API (not the
    agent's tools or git); a /testbed the agent removed reads as an empty tree."""
    from docker.errors import NotFound

    from raydist.views.recover import tree_entries

    try:
        stream, _ = box.container.get_archive("/testbed")
    except NotFound:
        return {}, {}
    return tree_entries(_ChunkReader(stream), baseline=baseline)


class _ChunkReader(io.RawIOBase):
    """A file object over Docker's archive chunks, read once, front to back."""

    def __init__(self, chunks):
        self._chunks, self._buffer = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buffer:
            self._buffer = next(self._chunks, None)
            if self._buffer is None:
                self._buffer = b""
                return 0
        n = min(len(target), len(self._buffer))
        target[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        return n


def _read_changes(box, initial: dict[str, tuple], repo):
    """The agent's submission: the final work tree against the view's initial tree
    (``raydist.views.recover.changed_files``), whatever the agent did to ``.git`` (commit,
    stash, branches, removal). New files the repository's own ignore rules ignore (build
    output, virtualenvs) are not part of it."""
    from raydist.views.recover import FinalTree, changed_files

    final_entries, contents = _tree(box, baseline=initial)
    added = [p for p in final_entries if p not in initial]
    ignored = set(_ignored(added, Path(repo.root)))
    final_entries = {p: e for p, e in final_entries.items() if p not in ignored}
    tree = changed_files(initial, final_entries, contents, repo.read)
    return FinalTree(tree.final, tree.dropped)


def _ignored(paths: list[str], root: Path) -> list[str]:
    """Those of ``paths`` the original repository's ``.gitignore`` files (and ``IGNORED``)
    ignore, decided by git on the host in a scratch repository holding only those rules."""
    import shutil
    import subprocess
    import tempfile

    if not paths:
        return []
    with tempfile.TemporaryDirectory(prefix="raydist-ignore-") as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True, capture_output=True)
        for rule in root.rglob(".gitignore"):
            target = Path(scratch) / rule.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rule, target)
        (Path(scratch) / ".git" / "info" / "exclude").write_text("\n".join(IGNORED) + "\n")
        done = subprocess.run(["git", "-C", scratch, "check-ignore", "--no-index", "-z", "--stdin"],
                              input=b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths) + b"\0",
                              capture_output=True, check=False)
    return [p.decode("utf-8", "surrogateescape") for p in done.stdout.split(b"\0") if p]


def _run_agent(settings: UnitSettings, view, box, endpoint, traj_path: Path, instance, repo):
    from raydist.agents import null, oracle, run_agent

    agent_settings = settings.agent_settings
    if settings.agent_kind == "oracle":
        from raydist.views import PatchApplyError

        def record(method: str) -> None:  # which of SWE-bench's methods applied the gold patch
            view.meta["gold_apply_method"] = method

        try:
            return oracle(view=view, sandbox=box, instance=instance, read_original=repo.read,
                          settings=agent_settings, trajectory_path=traj_path, on_gold_applied=record)
        except PatchApplyError as exc:
            raise UnitInputError(f"the gold patch of {instance.instance_id!r} does not apply to its base: {exc}",
                                 cause="gold_patch_does_not_apply") from exc
    if settings.agent_kind == "null":
        return null(view=view, sandbox=box, settings=agent_settings, trajectory_path=traj_path)
    return run_agent(view=view, sandbox=box, endpoint=endpoint, settings=agent_settings,
                     trajectory_path=traj_path)
