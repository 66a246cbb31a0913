"""Level 1 with the embedded Gemma 3 270M behind llama.cpp: whatever the model writes, the
result keeps its structure, and the verifier grammar forces a parsable verdict."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from raydist.models import ModelEndpoint, litellm_complete
from raydist.views.l1.statement import (
    ASPECTS,
    VERIFIER_GRAMMAR,
    VERIFY_MAX_TOKENS,
    load_l1_prompts,
    missing_spans,
    paraphrase_budget,
    parse_verdict,
    reconstruct_statement,
)

pytestmark = [pytest.mark.llm, pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "raydist" / "tasks" / "builtin" / "instances.jsonl"
INSTANCE = "jquast__wcwidth-table-upper-bound"
VERDICT_FORMAT = re.compile(r"BUG: (YES|NO)\nREQUIREMENTS: (YES|NO)\nSUCCESS: (YES|NO)\nREASON: [^\n ][^\n]*")


def statement() -> str:
    records = (json.loads(line) for line in BUILTIN.read_text().splitlines())
    return next(record["problem_statement"] for record in records if record["instance_id"] == INSTANCE)


@pytest.fixture
def complete(llama):
    _, api_base = llama
    endpoint = ModelEndpoint(litellm_model="openai/gemma3-270m", api_base=api_base, local=True,
                             grammar_server="llama_cpp")
    # A CPU server shared with other work can take minutes per answer; a retry would only
    # repeat the generation, so one long attempt.
    return litellm_complete(endpoint, timeout=300, retries=1)


def test_gemma_reconstruction_is_a_verified_paraphrase_or_the_canonical_statement(complete):
    original = statement()
    started = time.monotonic()
    prompts = load_l1_prompts(ROOT / "raydist" / "conf" / "prompts")
    result = reconstruct_statement(original, complete, attempts=2, seed=0, prompts=prompts,
                                   max_tokens=min(512, paraphrase_budget(original)))
    elapsed = time.monotonic() - started
    print(f"\nL1 with Gemma: {result.source} after {result.attempts} attempt(s), {elapsed:.1f} s, "
          f"usage {complete.usage}")
    for entry in result.history:
        print(f"--- attempt {entry['attempt']} ({entry['prompt']}): rejected={entry['rejected']} "
              f"missing={entry['missing']} verdicts={entry['verdicts']} reason={entry['reason']!r} "
              f"error={entry['error']}\n{entry['candidate']}")
    assert result.source in {"paraphrase", "rule"}
    assert [entry["attempt"] for entry in result.history] == list(range(1, len(result.history) + 1))
    assert all(entry["error"] is None for entry in result.history)  # the server is up and answers
    if result.source == "paraphrase":
        assert missing_spans(original, result.text) == []
        assert result.history[-1]["verdicts"] == dict.fromkeys(ASPECTS, "YES")
    else:  # both attempts rejected, then the rule restatement, judged: a NO marks it disputed
        assert result.attempts == 2 and [e["prompt"] for e in result.history][-1] == "rule"
        assert all(entry["rejected"] for entry in result.history[:-1])
        rule = result.history[-1]
        assert missing_spans(original, rule["candidate"]) == [] and result.text == rule["candidate"]
        assert rule["disputed"] == ("NO" in rule["verdicts"].values())
    for entry in result.history:
        if entry["verdicts"]:
            assert set(entry["verdicts"].values()) <= {"YES", "NO"} and entry["reason"]
    calls = sum((entry["prompt"] != "rule") + bool(entry["verdicts"]) for entry in result.history)  # rule: a verdict
    assert complete.usage["calls"] == calls and complete.usage["output_tokens"] > 0


def test_gemma_verifier_answer_follows_the_grammar(complete):
    original = statement()
    rewrite = original.replace("reports the wrong width", "gives an incorrect width").replace(
        "Terminal layouts that contain these characters drift by one cell.",
        "Because of this, terminal layouts containing these characters are off by one cell.")
    messages = load_l1_prompts(ROOT / "raydist" / "conf" / "prompts").messages("verify", statement=original,
                                                                               candidate=rewrite)
    started = time.monotonic()
    answer = complete(messages, seed=1, max_tokens=VERIFY_MAX_TOKENS, grammar=VERIFIER_GRAMMAR)
    print(f"\nGemma verifier, {time.monotonic() - started:.1f} s:\n{answer}")
    assert VERDICT_FORMAT.fullmatch(answer), answer
    verdicts, reason = parse_verdict(answer)
    assert set(verdicts) == set(ASPECTS) and set(verdicts.values()) <= {"YES", "NO"} and reason
