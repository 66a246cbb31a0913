"""DyCodeEval's agents with the embedded Gemma 3 270M behind llama.cpp: whatever the model
writes, the outcome is a well-formed record that says why it was or was not accepted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from raydist.models import ModelEndpoint, litellm_complete
from raydist.problems import (
    RecordedLLM,
    Variant,
    generate_variant,
    load_dyc_prompts,
    load_seeds,
    propose_scenarios,
)
from raydist.problems.agents import normalise_scenario

pytestmark = [pytest.mark.llm, pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai/gemma3-270m"
POOL = ["inventory management for a bakery", "patient appointment scheduling", "fleet fuel tracking"]


@pytest.fixture
def llm(llama, tmp_path):
    _, api_base = llama
    endpoint = ModelEndpoint(litellm_model=MODEL, api_base=api_base, local=True, grammar_server="llama_cpp")
    # One long attempt: a CPU server shared with other work can take minutes per answer.
    return RecordedLLM(litellm_complete(endpoint, timeout=300, retries=1), model=MODEL, cache_dir=tmp_path)


def _report(llm: RecordedLLM, started: float) -> None:
    print(f"\n{time.monotonic() - started:.1f} s, usage {llm.complete.usage}")
    for call in llm.calls:
        print(f"  {call['role']}: ok={call['ok']} cached={call['cached']} tokens={call['input_tokens']}/"
              f"{call['output_tokens']} {call['seconds']:.1f} s error={call['error']}")
        cached = llm.cache_dir / f"{call['request_hash']}.json"
        if cached.is_file():
            print(f"  raw answer: {json.loads(cached.read_text())['answer']!r}")


def test_the_server_parses_the_rewrite_grammars_of_the_widest_and_the_narrowest_seed(llama):
    """The grammar's bounds grow with the seed (lines and characters per line); the server must
    accept both ends of that range, or every rewrite of those seeds fails as a bad request."""
    import litellm

    from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
    from raydist.problems.agents import rewrite_grammar

    _, api_base = llama
    grammars = sorted(filter(None, map(rewrite_grammar, load_seeds("humaneval"))), key=len)
    assert len(grammars) == 164  # every HumanEval seed has one
    for grammar in (grammars[0], grammars[-1]):
        answer = litellm.completion(model=MODEL, api_base=api_base, api_key=LOCAL_PLACEHOLDER_KEY, max_tokens=4,
                                    messages=[{"role": "user", "content": "Rewrite it."}], num_retries=0,
                                    extra_body={"grammar": grammar})
        assert answer.choices[0].message.content.startswith("```")


def test_gemma_scenario_round_gives_distinct_short_names(llm):
    started = time.monotonic()
    pool = propose_scenarios(llm, ["retail", "health care"], target=3, seed=0, prompts=load_dyc_prompts(),
                             per_round=3, max_rounds=1)
    _report(llm, started)
    print(f"  pool: {pool}")
    assert len(pool) <= 3
    assert len({normalise_scenario(name) for name in pool}) == len(pool)
    assert [(call["role"], call["ok"]) for call in llm.calls] == [("scenario", True)]


def test_gemma_variant_of_humaneval_0_is_accepted_or_says_why(llm):
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    started = time.monotonic()
    variant = generate_variant(llm, problem, POOL, 0, load_dyc_prompts())
    _report(llm, started)
    print(f"  scenario: {variant.scenario}\n  contexts: {variant.contexts}\n  verdicts: "
          f"{variant.semantic_verdict}/{variant.consistency_verdict}\n  accepted: {variant.accepted}\n"
          f"  rejection: {variant.rejection}\n  error: {variant.error}\n  prompt:\n{variant.prompt}")
    assert isinstance(variant, Variant)
    assert variant.scenario in POOL and variant.generator_model == MODEL
    if variant.accepted:
        assert (variant.semantic_verdict, variant.consistency_verdict) == ("YES", "YES")
        assert problem.signature in variant.prompt
        assert variant.rejection is None and variant.error is None
    else:
        assert variant.rejection or variant.error
    assert llm.calls and all(isinstance(call["ok"], bool) for call in llm.calls)
    assert [call["ok"] for call in llm.calls].count(False) == (1 if variant.error else 0)
    assert {call["problem_id"] for call in llm.calls} == {"HumanEval/0"}



def test_gemma_generation_seeds_give_different_contexts(llm):
    """The generation seed reaches the model's sampling: with the scenario held fixed, three
    seeds of one problem give at least two different answers from the Context Generator."""
    from raydist.problems.agents import Rejected, generate_contexts
    from raydist.problems.types import infer_parameter_types

    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    started = time.monotonic()
    for seed in range(3):
        try:
            generate_contexts(llm, problem, POOL[0], infer_parameter_types(problem), seed, prompts=load_dyc_prompts())
        except Rejected:
            pass  # a rejected answer is still an answer: compared below
    _report(llm, started)
    cached = [json.loads((llm.cache_dir / f"{call['request_hash']}.json").read_text()) for call in llm.calls]
    assert [c["request"]["seed"] for c in cached] == [0, 1, 2]
    assert len({c["answer"] for c in cached}) >= 2, [c["answer"] for c in cached]
