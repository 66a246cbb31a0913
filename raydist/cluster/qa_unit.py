"""One repository-question unit (SWE-QA under a view, SchrodingerRepo RQ3), in plain Python.

Flow: instance image (the repository's source release) -> View (pure: L1 paraphrases the
question, L2 renames, L3 reorders) -> agent sandbox with the view written -> agent explores and
submits an answer -> the answer, written in view names, translated back to the original names
(``view.translator.to_original``) -> the judge model scores it against the reference answer on
SWE-QA's five dimensions (``raydist.qa.judge``) -> one row (outcome ``answered``) and the
judge's record (``grading/<unit>.judge.json``: prompt, raw replies, scores).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from raydist.cluster.outputs import GRADING, bounded, unit_stem
from raydist.cluster.unit_key import RunUnit
from raydist.outcomes import ANSWERED, InfrastructureError
from raydist.tasks.swe_qa import QA_TASK

JUDGE_RECORD_LIMIT = 2**20


def judge_record_name(unit: RunUnit) -> str:
    """File name of a question unit's judge record in ``grading/``."""
    return f"{unit_stem(unit)}.judge.json"


def run_qa(unit: RunUnit, instance, settings, endpoint, prepared, traj_path: Path, *, image, install_view,
           agent_columns, agent_exit) -> dict:
    """The row fields of question unit ``unit`` (``raydist.cluster.unit.execute_unit`` calls it
    for an instance with ``extra["task"] == "qa"`` and adds the key fields, times and errors).

    ``image`` is ``(client, tag, repo)`` of the instance image, ``install_view(box, view)`` writes
    the view into the sandbox, ``agent_columns(outcome, view)`` the agent's common columns
    (steps, tokens, action mix, exposure audit). The oracle submits the reference answer through
    the view; the null agent submits nothing (an empty answer: score 0, no judge call).

    Raises:
        InfrastructureError: the agent's run did not end on its own (model unreachable), or the
            judge is not served (``judge.model``).
        raydist.qa.JudgeUnparseable: the judge never gave the five scores (a ``bug``-free,
            retried-never outcome: the unit's ``error_cause`` is ``judge_unparseable``).
    """
    from raydist.agents import null, run_agent
    from raydist.agents.scripted import answer as scripted_answer
    from raydist.models.completion import litellm_complete
    from raydist.qa.judge import judge_answer, load_judge_prompt
    from raydist.sandbox import Limits, Sandbox
    from raydist.views import build_view

    client, tag, repo = image
    view = build_view(instance, repo, unit.level, unit.seed, settings.view_options, prepared)
    judge = settings.judge
    if judge is None or judge.endpoint is None:
        raise InfrastructureError(f"no judge model is served for question {instance.instance_id!r}; set judge.model",
                                  cause="judge_unavailable")
    reference = instance.extra.get("reference_answer")
    if not isinstance(reference, str) or not reference.strip():
        from raydist.outcomes import InputError

        raise InputError(f"question {instance.instance_id!r} has no reference_answer to judge against; give the "
                         "row a non-empty reference_answer (benchmark=swe_qa sets it from SWE-QA's answer)",
                         cause="no_reference_answer")
    t0 = time.time()
    with Sandbox.create(client, tag, limits=settings.limits or Limits(), network=settings.network,
                        labels={"raydist.unit": unit.key}, name=f"agent-{unit.key[:12]}") as box:
        install_view(box, view)
        agent = settings.agent_settings
        if settings.agent_kind == "oracle":
            outcome = scripted_answer(view=view, sandbox=box, text=view.translator.to_view(reference),
                                      settings=agent, trajectory_path=traj_path)
        elif settings.agent_kind == "null":
            outcome = null(view=view, sandbox=box, settings=agent, trajectory_path=traj_path)
        else:
            outcome = run_agent(view=view, sandbox=box, endpoint=endpoint, settings=agent,
                                trajectory_path=traj_path, task="qa")
    out = agent_columns(outcome, view)
    out["agent_seconds"] = round(time.time() - t0, 3)
    exit_kind = agent_exit(outcome, settings)
    # The answer as the original repository names things: a view name in it would be an
    # unknown word to the judge and the reference.
    answer = view.translator.to_original(outcome.submission).strip()
    t1 = time.time()
    complete = litellm_complete(judge.endpoint, temperature=judge.temperature, timeout=judge.request_timeout_s)
    verdict = judge_answer(instance.problem_statement, reference, answer, complete,
                           prompt=load_judge_prompt(judge.prompts_dir), seed=unit.seed,
                           attempts=judge.attempts, max_tokens=judge.max_tokens)
    record = verdict.record(judge_model=judge.model, question=instance.problem_statement, reference=reference,
                            candidate=answer)
    out.update(
        agent_exit=exit_kind, outcome=ANSWERED, resolved=False, task=QA_TASK, answer=answer,
        qa_score=verdict.score, qa_scores=json.dumps(verdict.scores, sort_keys=True), judge_model=judge.model,
        grading_seconds=round(time.time() - t1, 3), grading_channel="judge",
        files={f"{GRADING}/{judge_record_name(unit)}": bounded(json.dumps(record, indent=1, ensure_ascii=False),
                                                               JUDGE_RECORD_LIMIT)},
    )
    if exit_kind == "model_error":
        out["error"] = outcome.error
    return out
