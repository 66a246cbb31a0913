"""Task kinds: what an agent is asked to do in a view and how its run is scored.

A unit's path is the same for every kind (``raydist.cluster.unit.execute_unit``): instance
image -> View -> sandbox with the view installed -> agent -> ``kind.score`` -> ``UnitResult``
-> one row. A kind decides only the parts that differ:

- ``patch`` (SWE-bench, SchrodingerRepo RQ1/RQ2): the agent edits the repository; the work
  tree's changes are recovered as a patch in original coordinates (§III-G) and graded by the
  instance's FAIL_TO_PASS / PASS_TO_PASS tests in a fresh container. The validity gate applies.
- ``qa`` (SWE-QA, SchrodingerRepo RQ3: ``raydist.tasks.swe_qa``): the agent answers a question
  about the repository; the answer, written in view names, is translated back to the original
  names and scored by the judge model on SWE-QA's five dimensions (``raydist.qa.judge``). There
  are no tests, so no validity gate; the judge must be served.

A kind is looked up once per instance by ``kind_of`` (``Instance.extra["task"]``, absent for a
patch task). Adding a kind: a class with the ``TaskKind`` members, ``register_kind(...)`` of
it, instances whose ``extra["task"]`` names it (a loader in ``raydist.tasks``), and any new row
column in ``raydist.results.schema`` (tests/test_task_kinds.py registers one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from raydist.agents import null, oracle, run_agent
from raydist.agents.scripted import answer
from raydist.cluster.errors import UnitInputError
from raydist.cluster.outputs import GRADING, bounded, grading_log, unit_stem
from raydist.cluster.unit_key import RunUnit
from raydist.cluster.workspace import read_changes
from raydist.grading.apply import is_empty_patch
from raydist.models.completion import litellm_complete
from raydist.outcomes import ANSWERED, INPUT_ERROR, RESOLVED, UNRESOLVED, InfrastructureError, InputError
from raydist.qa.judge import judge_answer, load_judge_prompt
from raydist.tasks.swe_qa import QA_TASK
from raydist.views import PatchApplyError, View, levels_needing, recover_patch
from raydist.views.contracts import defines_contract, naming_contract

if TYPE_CHECKING:  # a unit's settings live with execute_unit, which looks kinds up here
    from raydist.cluster.unit_image import UnitImage, UnitSettings
    from raydist.models import ModelEndpoint
    from raydist.sandbox import Sandbox
    from raydist.tasks import Instance

PATCH_TASK = "patch"
"""Name of the patch kind (an instance without ``extra["task"]`` is one)."""

JUDGE_RECORD_LIMIT = 2**20

#: Agent kinds whose empty patch is graded all the same: the validity gate's scripted agents,
#: whose test runs are the gate's evidence (SchrodingerRepo §V-C: the null agent's unchanged
#: repository must not resolve). Any other agent's empty patch is not graded (``not_graded``).
GRADED_EMPTY = ("null", "oracle")


@dataclass(frozen=True)
class AgentRun:
    """What an agent's run in the sandbox left: ``outcome`` (``raydist.agents.AgentOutcome``:
    exit status, steps, tokens, ``submission``) and, for a kind whose submission is the work
    tree, ``changes`` (``raydist.views.recover.FinalTree``, read before the sandbox closed)."""

    outcome: Any
    changes: Any = None


@dataclass(frozen=True)
class Score:
    """A kind's verdict on one agent run: ``outcome`` (``resolved``, ``unresolved``,
    ``answered`` or ``input_error``: ``raydist.outcomes.OUTCOMES``), ``resolved``, the kind's
    row columns (``raydist.results.schema.RUNS_SCHEMA`` names), the unit's files of the scoring
    (``{"grading/<name>": text}``) and an error of the scoring with its cause, if any."""

    outcome: str
    resolved: bool
    columns: Mapping[str, Any]
    files: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    error_cause: str | None = None


class TaskKind(Protocol):
    """One kind of task (module docstring). ``name`` is ``Instance.extra["task"]`` of its
    instances; ``gated``: the validity gate (oracle resolves, null does not: §V-C) applies to
    its views; ``needs_tests``: an instance without ``test_cmd`` is an input error; ``served``:
    the config nodes of the models it needs served besides the agent's (``("judge",)``)."""

    name: str
    gated: bool
    needs_tests: bool
    served: tuple[str, ...]

    def check_plan(self, instances: Sequence, levels: Sequence[str]) -> None:
        """Raise ValueError, naming what to change, when ``instances`` cannot run at ``levels``."""

    def check_unit(self, instance: Instance, settings: UnitSettings) -> None:
        """Raise for a unit that cannot be scored (before its sandbox is created)."""

    def run_agent(self, settings: UnitSettings, view: View, box: Sandbox, endpoint: ModelEndpoint | None,
                  traj_path: Path, instance: Instance, repo, initial: Mapping[str, tuple]) -> AgentRun:
        """Run the unit's agent (``settings.agent_kind``) in ``box``, the view installed
        (``initial``: its tree entries); read what the kind scores before the sandbox closes."""

    def score(self, unit: RunUnit, instance: Instance, settings: UnitSettings, image: UnitImage, view: View,
              run: AgentRun) -> Score:
        """Score ``run`` of ``unit``."""


class PatchKind:
    """The patch kind: recover the work tree's changes as a patch and grade it (module docstring)."""

    name = PATCH_TASK
    gated = True
    needs_tests = True
    served: tuple[str, ...] = ()

    def check_plan(self, instances: Sequence, levels: Sequence[str]) -> None:
        """Nothing to check before a launch: a row without tests is refused per unit."""

    def check_unit(self, instance: Instance, settings: UnitSettings) -> None:
        """Nothing to check: ``needs_tests`` is checked with the instance image."""

    def run_agent(self, settings: UnitSettings, view: View, box: Sandbox, endpoint: ModelEndpoint | None,
                  traj_path: Path, instance: Instance, repo, initial: Mapping[str, tuple]) -> AgentRun:
        """The LLM agent, or the oracle writing the gold patch through the view, or the null
        agent; then the work tree's changes against the view's initial tree. Raises
        ``UnitInputError`` (``gold_patch_does_not_apply``) when the oracle's gold patch does not
        apply to its base."""
        agent_settings = settings.agent_settings
        if settings.agent_kind == "oracle":
            def record(method: str) -> None:  # which of SWE-bench's methods applied the gold patch
                view.meta["gold_apply_method"] = method

            try:
                outcome = oracle(view=view, sandbox=box, instance=instance, read_original=repo.read,
                                 settings=agent_settings, trajectory_path=traj_path, on_gold_applied=record)
            except PatchApplyError as exc:
                raise UnitInputError(f"the gold patch of {instance.instance_id!r} does not apply to its base: {exc}",
                                     cause="gold_patch_does_not_apply") from exc
        elif settings.agent_kind == "null":
            outcome = null(view=view, sandbox=box, settings=agent_settings, trajectory_path=traj_path)
        else:
            outcome = run_agent(view=view, sandbox=box, endpoint=endpoint, settings=agent_settings,
                                trajectory_path=traj_path)
        return AgentRun(outcome, read_changes(box, initial, repo))

    def score(self, unit: RunUnit, instance: Instance, settings: UnitSettings, image: UnitImage, view: View,
              run: AgentRun) -> Score:
        """The changes as a patch in original coordinates (§III-G), graded (``grade_patch``);
        an agent's empty patch is not graded (``not_graded``). Changes a text patch cannot carry
        (binary files, symlinks) are named in ``view_meta``'s ``recovery_dropped``."""
        final = run.changes.final
        original = {path: image.repo.read(path) for path in final}
        patch = recover_patch(original, final)
        dropped = {}
        if run.changes.dropped:  # changes a text patch cannot carry: named, not lost
            dropped["view_meta"] = json.dumps({**view.meta, "recovery_dropped": run.changes.dropped}, default=str,
                                              sort_keys=True)
        if is_empty_patch(patch) and settings.agent_kind not in GRADED_EMPTY:
            score = not_graded(unit, instance, patch)
        else:
            score = grade_patch(unit, instance, image, patch)
        return Score(score.outcome, score.resolved, {**dropped, **score.columns}, score.files, score.error,
                     score.error_cause)


def grade_patch(unit: RunUnit, instance: Instance, image: UnitImage, patch: str) -> Score:
    """``patch`` graded in a fresh container of ``image`` (``image.tests``: pytest + junit, or
    the official eval script) and its result as row columns: per-test counts of FAIL_TO_PASS
    and PASS_TO_PASS, how the patch applied, the channel, the grading log. A test patch that
    does not apply is the instance's problem (``input_error``, never retried); a model patch
    that does not apply, tests that time out and a junit report that fails its checks are the
    agent's (``unresolved``, with the reason in ``error``)."""
    t1 = time.time()
    result = image.tests.run(instance, patch)
    columns = dict(
        # An empty submission has nothing to apply: null, not a misleading True.
        model_patch=patch, patch_applied=result.applied if patch else None,
        apply_method=result.apply_method, grading_seconds=round(time.time() - t1, 3),
        fail_to_pass_passed=sum(1 for s in result.fail_to_pass.values() if s == "PASSED"),
        fail_to_pass_total=len(instance.FAIL_TO_PASS),
        pass_to_pass_passed=sum(1 for s in result.pass_to_pass.values() if s == "PASSED"),
        pass_to_pass_total=len(instance.PASS_TO_PASS), tests_missing=result.missing,
        grading_channel=result.grading_channel, test_infra_changed=json.dumps(list(result.test_infra_changed)),
        **contract_columns(instance, patch),
    )
    outcome = RESOLVED if result.resolved else UNRESOLVED
    if result.error and result.error_cause == "test_patch_does_not_apply":
        outcome = INPUT_ERROR
    return Score(outcome, bool(result.resolved), columns, grading_log(unit, result.log),
                 result.error or None, result.error_cause if result.error else None)


def not_graded(unit: RunUnit, instance, patch: str) -> Score:
    """The score of an agent's empty patch, which is not graded: ``unresolved`` with no test
    run (``grading_channel="none"``, per-test counts null, totals kept). SWE-bench's harness
    does the same (``run_evaluation`` leaves empty predictions out and its report counts them
    unresolved, as ``empty_patch_ids``). The tests of an empty patch are those of the unchanged
    repository, which the validity gate's null agent runs for every view (``GRADED_EMPTY``):
    with the gate on, a view whose unchanged repository already resolves is excluded before
    any agent runs."""
    note = ("model patch: empty\n\nnot graded: an empty patch leaves the repository unchanged and "
            "resolves nothing (SWE-bench's run_evaluation skips empty predictions too); the tests of the "
            "unchanged repository are the validity gate's null run of this view (gate=true)\n")
    return Score(UNRESOLVED, False, {
        "model_patch": patch, "patch_applied": None, "apply_method": "empty", "grading_seconds": 0.0,
        "fail_to_pass_passed": None, "fail_to_pass_total": len(instance.FAIL_TO_PASS), "pass_to_pass_passed": None,
        "pass_to_pass_total": len(instance.PASS_TO_PASS), "tests_missing": None, "grading_channel": "none",
        "test_infra_changed": "[]", **contract_columns(instance, "")}, grading_log(unit, note))


def contract_columns(instance, patch: str) -> dict:
    """``naming_contract`` (JSON list of the instance's contract names, from its rows' diffs:
    ``raydist.views.contracts``) and ``contract_used`` (whether ``patch`` defines them all;
    null without a contract or a patch)."""
    contract = naming_contract(instance)
    used = defines_contract(contract, patch) if patch else None
    return {"naming_contract": json.dumps(contract.labels()), "contract_used": used}


def judge_record_name(unit: RunUnit) -> str:
    """File name of a question unit's judge record in ``grading/``."""
    return f"{unit_stem(unit)}.judge.json"


class QuestionKind:
    """The question kind: translate the answer back and have the judge score it (module docstring)."""

    name = QA_TASK
    gated = False
    needs_tests = False
    served = ("judge",)

    def check_plan(self, instances: Sequence, levels: Sequence[str]) -> None:
        """Raises ValueError for a level with L4, whose rewrites must pass the instance's tests
        (§III-E), when a question's repository has no test command (SWE-QA has none)."""
        with_l4 = [level for level in levels if "L4" in levels_needing(level)]
        untested = sorted({i.repo for i in instances if not i.test_cmd})
        if with_l4 and untested:
            raise ValueError(
                f"levels {', '.join(with_l4)} include L4, whose rewrites are kept only when the repository's "
                f"tests pass (§III-E); the questions of {', '.join(untested)} have no test command: give their "
                f"release a test_cmd and install pins (benchmark.releases.<repo>), or use L0-L3 and their "
                f"combinations, e.g. levels=[L0,L1,L2,L3,L1+L2+L3]")

    def check_unit(self, instance: Instance, settings: UnitSettings) -> None:
        """Raises ``InfrastructureError`` (``judge_unavailable``) when no judge is served and
        ``InputError`` (``no_reference_answer``) for a question without a reference answer."""
        judge = settings.judge
        if judge is None or settings.judge_endpoint is None:
            raise InfrastructureError(f"no judge model is served for question {instance.instance_id!r}; set "
                                      "judge.model", cause="judge_unavailable")
        reference = instance.extra.get("reference_answer")
        if not isinstance(reference, str) or not reference.strip():
            raise InputError(f"question {instance.instance_id!r} has no reference_answer to judge against; give the "
                             "row a non-empty reference_answer (benchmark=swe_qa sets it from SWE-QA's answer)",
                             cause="no_reference_answer")

    def run_agent(self, settings: UnitSettings, view: View, box: Sandbox, endpoint: ModelEndpoint | None,
                  traj_path: Path, instance: Instance, repo, initial: Mapping[str, tuple]) -> AgentRun:
        """The LLM agent with the question prompts, or the oracle submitting the reference answer
        through the view (in view names), or the null agent (an empty answer)."""
        agent = settings.agent_settings
        if settings.agent_kind == "oracle":
            reference = instance.extra["reference_answer"]
            return AgentRun(answer(view=view, sandbox=box, text=view.translator.to_view(reference), settings=agent,
                                   trajectory_path=traj_path))
        if settings.agent_kind == "null":
            return AgentRun(null(view=view, sandbox=box, settings=agent, trajectory_path=traj_path))
        return AgentRun(run_agent(view=view, sandbox=box, endpoint=endpoint, settings=agent,
                                  trajectory_path=traj_path, task="qa"))

    def score(self, unit: RunUnit, instance: Instance, settings: UnitSettings, image: UnitImage, view: View,
              run: AgentRun) -> Score:
        """The answer as the original repository names things (a view name in it would be an
        unknown word to the judge and the reference), judged against the reference answer:
        ``answered`` with the five scores and their mean, and the judge's record (prompt, raw
        replies, scores) as ``grading/<unit>.judge.json``. Raises ``raydist.qa.JudgeUnparseable``
        when the judge never gave the five scores."""
        judge = settings.judge
        reference = instance.extra["reference_answer"]
        answer = view.translator.to_original(run.outcome.submission).strip()
        t1 = time.time()
        complete = litellm_complete(settings.judge_endpoint, temperature=judge.temperature,
                                    timeout=judge.request_timeout_s)
        verdict = judge_answer(instance.problem_statement, reference, answer, complete,
                               prompt=load_judge_prompt(judge.prompts_dir), seed=unit.seed,
                               attempts=judge.attempts, max_tokens=judge.max_tokens)
        record = verdict.record(judge_model=judge.model, question=instance.problem_statement, reference=reference,
                                candidate=answer)
        columns = dict(task=QA_TASK, answer=answer, qa_score=verdict.score,
                       qa_scores=json.dumps(verdict.scores, sort_keys=True), judge_model=judge.model,
                       grading_seconds=round(time.time() - t1, 3), grading_channel="judge")
        files = {f"{GRADING}/{judge_record_name(unit)}": bounded(json.dumps(record, indent=1, ensure_ascii=False),
                                                                 JUDGE_RECORD_LIMIT)}
        return Score(ANSWERED, False, columns, files)


#: The task kinds by ``name`` (``Instance.extra["task"]``); ``register_kind`` adds one.
KINDS: dict[str, TaskKind] = {kind.name: kind for kind in (PatchKind(), QuestionKind())}


def register_kind(kind: TaskKind) -> TaskKind:
    """Add ``kind`` to ``KINDS`` under ``kind.name``; returns it. Raises ValueError when another
    kind has that name."""
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise ValueError(f"task kind {kind.name!r} is already registered ({type(KINDS[kind.name]).__name__})")
    KINDS[kind.name] = kind
    return kind


class UnknownTask(InputError, ValueError):
    """An instance names a task kind that is not registered (a launch refuses it when it plans,
    a unit records it as an ``input_error``)."""

    default_cause = "unknown_task"


def kind_of(instance: Instance) -> TaskKind:
    """The kind of ``instance``: ``KINDS[instance.extra["task"]]``, the patch kind without one.
    Raises ``UnknownTask`` naming the registered kinds for any other value."""
    name = (getattr(instance, "extra", None) or {}).get("task") or PATCH_TASK
    try:
        return KINDS[name]
    except KeyError:
        raise UnknownTask(f"instance {getattr(instance, 'instance_id', instance)!r} has task {name!r}; the task "
                          f"kinds are {', '.join(sorted(KINDS))}") from None


def kinds_of(instances: Iterable) -> dict[str, tuple[TaskKind, list]]:
    """``{name: (kind, its instances)}`` of ``instances``, in first-seen order."""
    out: dict[str, tuple[TaskKind, list]] = {}
    for instance in instances:
        kind = kind_of(instance)
        out.setdefault(kind.name, (kind, []))[1].append(instance)
    return out

