"""The recall probe over instances: per instance and round, one request to the model, its reply
parsed and scored against the hidden gold, one record kept.

    instance -> gold (hidden)                                   raydist.recall.gold
    round -> revealed fields -> prompt -> llm(messages) -> reply    raydist.recall.rounds
    reply -> ProbeAnswer | no answer -> Scores -> level           raydist.recall.answer, .score

The model is reached only through the injected ``llm`` (``raydist.problems.llm.RecordedLLM`` in
practice: answers cached by request); this module writes, into ``run_dir``:

    transcripts.jsonl       every request and raw reply (also failed calls), appended as made
    records/<id>/<round>.json   one finished round, written at once: a probe killed midway
                            loses nothing answered, and the same call resumes after it

An instance whose answer already reached the highest level skips its later rounds (the
experts of §II stopped once they had patch- or test-level evidence).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from raydist._util.files import atomic_write_json
from raydist._util.hashing import stable_hash
from raydist.problems.llm import LLMCallFailed
from raydist.prompts import read_templates, render
from raydist.recall.answer import parse_answer
from raydist.recall.gold import gold_of
from raydist.recall.rounds import REVEALABLE, Round, revealed_fields, revealed_text
from raydist.recall.score import LEVELS, NO_ANSWER, level_of, score_answer

__all__ = ["PROMPT_STEMS", "ProbeResult", "ProbeSettings", "load_prompts", "probe_instance", "run_probe"]

PROMPT_STEMS = {"system": "recall_system", "round": "recall_round"}
ROLE = "recall_probe"


def load_prompts(prompts_dir: str | Path) -> dict[str, str]:
    """``{"system", "round"}`` template texts from ``prompts_dir`` (``raydist.prompts.read_templates``)."""
    return read_templates(prompts_dir, PROMPT_STEMS, "recall probe")


@dataclass(frozen=True)
class ProbeSettings:
    """What determines an answer: the ``model`` name, the ``rounds``, the ``prompts`` texts, the
    request's ``seed`` and ``max_tokens``, the ``grammar`` (GBNF or None) and ``temperature``
    (recorded; the ``llm`` applies it)."""

    model: str
    rounds: tuple[Round, ...]
    prompts: dict = field(hash=False)
    seed: int = 0
    max_tokens: int = 512
    grammar: str | None = None
    temperature: float = 0.0

    def round_key(self, round: Round) -> str:
        """16 hex chars naming everything a round's answer depends on besides the instance."""
        return stable_hash({"model": self.model, "round": asdict(round), "prompts": self.prompts, "seed": self.seed,
                            "max_tokens": self.max_tokens, "grammar": self.grammar,
                            "temperature": self.temperature})


@dataclass(frozen=True)
class ProbeResult:
    """``rows``: one per instance x round run (finished now or before), in instance and round
    order; ``failed``: ``{instance_id: error}`` of instances a model call failed for (their
    rounds run again next time)."""

    rows: tuple[dict, ...]
    failed: dict


def messages_for(instance, round: Round, prompts: dict) -> tuple[list[dict], dict[str, str]]:
    """The chat messages of ``round`` for ``instance`` and the fields they reveal."""
    fields = revealed_fields(instance, round)
    variables = {name: fields.get(name, "") for name in REVEALABLE}  # what the round hides renders empty
    user = render(prompts["round"], variables)
    return [{"role": "system", "content": render(prompts["system"], {}).strip()},
            {"role": "user", "content": user}], fields


def score_reply(reply: str, gold, fields: dict[str, str]) -> dict:
    """The scored part of a row: ``answered``, ``level`` (``NO_ANSWER`` for a reply that does
    not parse), every ``Scores`` column and the parsed answer's fields."""
    answer = parse_answer(reply)
    if answer is None:
        return {"answered": False, "level": NO_ANSWER}
    scores = score_answer(answer, gold, revealed_text(fields))
    return {"answered": True, "level": level_of(scores), **scores.as_row(),
            "answer_files": list(answer.files), "answer_symbols": list(answer.symbols),
            "answer_tests": list(answer.tests), "repair_logic": answer.repair_logic, "patch": answer.patch}


def probe_round(instance, gold, round: Round, index: int, settings: ProbeSettings, llm, transcripts: Path) -> dict:
    """One round: the request, its transcript line, the scored row. Raises what ``llm`` raises
    (``raydist.problems.llm.LLMCallFailed``), after writing the transcript line."""
    messages, fields = messages_for(instance, round, settings.prompts)
    line = {"instance_id": instance.instance_id, "round": round.name, "model": settings.model,
            "revealed": list(fields), "messages": messages, "seed": settings.seed, "max_tokens": settings.max_tokens,
            "grammar": settings.grammar is not None}
    started = time.monotonic()
    try:
        reply = llm(ROLE, messages, seed=settings.seed, max_tokens=settings.max_tokens, grammar=settings.grammar,
                    problem_id=instance.instance_id)
    except Exception as exc:
        _append(transcripts, line | {"ok": False, "reply": None, "error": str(exc),
                                     "seconds": _elapsed(started)})
        raise
    call = (getattr(llm, "calls", None) or [{}])[-1]
    _append(transcripts, line | {"ok": True, "reply": reply, "error": None, "cached": call.get("cached"),
                                 "input_tokens": call.get("input_tokens"), "output_tokens": call.get("output_tokens"),
                                 "seconds": _elapsed(started)})
    return {"instance_id": instance.instance_id, "repo": instance.repo, "model": settings.model,
            "round": round.name, "round_index": index, "revealed": list(fields), "reply_chars": len(reply),
            **score_reply(reply, gold, fields)}


def _elapsed(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _record_path(run_dir: Path, instance_id: str, round: Round) -> Path:
    return run_dir / "records" / instance_id.replace("/", "__") / f"{round.name}.json"


def _finished(path: Path, key: str) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("row") if isinstance(data, dict) and data.get("key") == key else None


def probe_instance(instance, settings: ProbeSettings, llm, run_dir: Path) -> list[dict]:
    """The rows of ``instance``'s rounds, in order: read back when finished under the same
    ``round_key``, else asked now and recorded; none after a round that reached the highest
    level. Raises what ``llm`` raises; the rounds recorded before stay."""
    gold = gold_of(instance.patch, instance.test_patch, instance.FAIL_TO_PASS)
    rows = []
    for index, round in enumerate(settings.rounds):
        path, key = _record_path(run_dir, instance.instance_id, round), settings.round_key(round)
        row = _finished(path, key)
        if row is None:
            row = probe_round(instance, gold, round, index, settings, llm, run_dir / "transcripts.jsonl")
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {"key": key, "row": row})
        rows.append(row)
        if row["level"] == LEVELS[-1]:
            break
    return rows


def run_probe(instances, settings: ProbeSettings, llm, run_dir: str | Path, progress=None) -> ProbeResult:
    """Probe every instance (in order) on ``llm``; ``progress(instance_id, rows)`` after each.
    A failed model call (``LLMCallFailed``) ends that instance's rounds (named in
    ``ProbeResult.failed``), not the probe."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rows, failed = [], {}
    for instance in instances:
        try:
            done = probe_instance(instance, settings, llm, run_dir)
        except LLMCallFailed as exc:  # recorded in the transcripts; asked again on resume
            failed[instance.instance_id] = f"{type(exc).__name__}: {exc}"
            continue
        rows.extend(done)
        if progress is not None:
            progress(instance.instance_id, done)
    return ProbeResult(tuple(rows), failed)
