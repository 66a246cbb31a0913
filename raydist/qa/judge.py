"""The LLM judge of repository answers: SWE-QA's five dimensions and its Average Score.

SWE-QA (``score/llm-score.py`` of SWE-QA-Bench) asks a judge model for five integer scores from
0 to 10 (correctness, completeness, relevance, clarity, reasoning) of a candidate answer against
the reference answer, and sums them (0-50). SchrodingerRepo §IV-B reports SWE-QA's Average
Score on a 0-100 scale (RQ3: 70.35 -> 65.71), so :attr:`Judgement.score` is that sum times 2.

Plain Python: the model is a ``Complete`` handed in (``raydist.models.litellm_complete``), the
prompt is ``conf/prompts/qa_judge.j2``. Every request and raw reply is kept in the
:class:`Judgement`, which the unit stores beside its row.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from raydist._util.hashing import stable_hash
from raydist._util.protocols import Complete
from raydist._util.settings import keyless
from raydist.outcomes import InfrastructureError
from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates, render

DIMENSIONS = ("correctness", "completeness", "relevance", "clarity", "reasoning")
"""SWE-QA's five dimensions, each an integer 0-10, in the order the prompt asks for them."""

SCALE = 100 / (10 * len(DIMENSIONS))
"""Average Score per point of SWE-QA's 0-50 total: 2, so a perfect answer scores 100."""

JUDGE_GRAMMAR = (
    'root ::= "{" ' + ' ", " '.join(f'"\\"{d}\\": " n' for d in DIMENSIONS) + ' "}"\n'
    'n ::= "10" | [0-9]\n'
)
"""GBNF of the judge's reply on a local server: the JSON object with five integers 0-10."""

EMPTY_ANSWER = "empty answer: not judged, every dimension 0"


class JudgeUnparseable(InfrastructureError):
    """The judge model never answered with the five scores in ``attempts`` tries (the raw
    replies are in ``replies``): the judge's failure, never the answering agent's, so the unit
    is an ``infrastructure_error`` (cause ``judge_unparseable``), retried within the bound."""

    def __init__(self, message: str, replies: tuple[str, ...]):
        super().__init__(message, cause="judge_unparseable")
        self.replies = replies


@dataclass(frozen=True)
class Judgement:
    """One judged answer: ``scores`` (dimension -> 0-10), ``score`` (the Average Score, 0-100),
    the ``messages`` sent, every raw ``replies`` (the last one parsed), and ``note`` (why no
    model was asked, for an empty answer)."""

    scores: dict[str, int]
    score: float
    messages: list[dict] = field(default_factory=list)
    replies: tuple[str, ...] = ()
    note: str = ""

    def record(self, *, judge_model: str, question: str, reference: str, candidate: str) -> dict:
        """The JSON-able record kept beside the row: everything needed to re-check the score."""
        return {"judge_model": judge_model, "question": question, "reference": reference, "candidate": candidate,
                "messages": self.messages, "replies": list(self.replies), "scores": self.scores,
                "score": self.score, "note": self.note}


def load_judge_prompt(prompts_dir: str | Path = DEFAULT_PROMPTS_DIR) -> str:
    """The text of ``qa_judge.j2`` from ``prompts_dir`` (raises ``FileNotFoundError`` naming it)."""
    return read_templates(prompts_dir, {"judge": "qa_judge"}, "SWE-QA judge")["judge"]


def parse_scores(reply: str) -> dict[str, int] | None:
    """The five scores in ``reply`` (a JSON object, possibly inside a markdown code fence, as
    hosted models answer), or None when it is not exactly that: every dimension present, an
    integer (bools refused) from 0 to 10. Extra keys are ignored, as SWE-QA ignores them."""
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", reply.strip())
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    scores = {}
    for dimension in DIMENSIONS:
        value = data.get(dimension)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10:
            return None
        scores[dimension] = value
    return scores


def average_score(scores: dict[str, int]) -> float:
    """SWE-QA's total (the sum of the five dimensions) on the 0-100 scale of SchrodingerRepo's RQ3."""
    return round(sum(scores[d] for d in DIMENSIONS) * SCALE, 6)


def judge_answer(question: str, reference: str, candidate: str, complete: Complete, *, prompt: str,
                 seed: int = 0, attempts: int = 3, max_tokens: int = 64) -> Judgement:
    """Score ``candidate`` against ``reference`` for ``question``.

    An empty (whitespace-only) candidate is not sent to the judge: it scores 0 on every
    dimension (SWE-QA's scorer skips such records, which would drop them from the average; here
    they count, as an empty patch counts unresolved). Otherwise the judge is asked up to
    ``attempts`` times (seed, seed+1, ...) until a reply parses (:func:`parse_scores`); on a local
    server :data:`JUDGE_GRAMMAR` constrains the reply.

    Raises:
        JudgeUnparseable: no reply parsed (the replies are attached).
        ValueError: ``attempts`` < 1.
        Exception: whatever ``complete`` raises (an unreachable judge is an infrastructure failure).
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    if not candidate.strip():
        return Judgement({d: 0 for d in DIMENSIONS}, 0.0, note=EMPTY_ANSWER)
    messages = [{"role": "user", "content": render(prompt, {"question": question, "reference": reference,
                                                            "candidate": candidate})}]
    replies: list[str] = []
    for attempt in range(attempts):
        reply = complete(messages, seed=seed + attempt, max_tokens=max_tokens, grammar=JUDGE_GRAMMAR)
        replies.append(reply)
        scores = parse_scores(reply)
        if scores is not None:
            return Judgement(scores, average_score(scores), messages, tuple(replies))
    raise JudgeUnparseable(f"the judge answered {attempts} times without the five scores 0-10 "
                           f"({', '.join(DIMENSIONS)}); last reply: {replies[-1][:200]!r}", tuple(replies))


@dataclass(frozen=True)
class JudgeSettings:
    """``judge``: the LLM judge of repository answers (``benchmark=swe_qa``; SWE-QA's five
    dimensions). Part of every question unit's key but ``request_timeout_s``; unused by patch
    tasks. The served judge's ``ModelEndpoint`` travels beside it (``UnitSettings.judge_endpoint``)."""

    model: str = "gemma3-270m"
    """Any litellm model name or a ``local_models`` entry (the embedded model by default)."""
    attempts: int = 3
    """Requests per answer until a reply gives the five scores (a local server's grammar makes the first do)."""
    max_tokens: int = 64
    """Completion tokens per judge request."""
    temperature: float = 0.0
    """Sampling temperature of the judge."""
    request_timeout_s: float = keyless(120.0)
    """Seconds one judge request may take (part of no key)."""
    prompts_dir: str = "conf/prompts"
    """Folder holding ``qa_judge.j2`` (a relative path is taken from the raydist package)."""

    def key(self, model_identity: str) -> dict:
        """What a question unit's key hashes of its judge: ``model_identity`` (the served
        model's, ``raydist.cluster.served.model_identity``, or the hosted name), the sha256 of
        ``qa_judge.j2``'s text and the scoring settings. Raises ``FileNotFoundError`` naming a
        ``prompts_dir`` without ``qa_judge.j2``."""
        return {"model": model_identity, "prompt": stable_hash(load_judge_prompt(self.prompts_dir)),
                "attempts": int(self.attempts), "max_tokens": int(self.max_tokens),
                "temperature": float(self.temperature)}

    def __post_init__(self) -> None:
        if int(self.attempts) < 1:
            raise ValueError(f"judge.attempts={self.attempts}: give at least 1")
