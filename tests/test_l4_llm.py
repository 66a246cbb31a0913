"""L4 with the real embedded Gemma 3 270M: whatever it answers for a real toolz method, the
result is a Proposal that either passes the static gate or names a documented reason. One
call of at most ~110 tokens (the method's budget), under the rewrite grammar."""

from __future__ import annotations

import ast

import pytest

from raydist.models import grammar_extra_body
from raydist.views.l4.llm import REASONS, Proposal, load_l4_prompts, propose_rewrite
from raydist.views.l4.rewrite import same_interface

# isort: split
import litellm  # noqa: E402  (after raydist.models, which keeps litellm offline)

pytestmark = [pytest.mark.llm, pytest.mark.ray]


def gemma(api_base: str):
    """A ``complete`` reaching the llama.cpp server through litellm, with the grammar."""

    def complete(messages, *, seed, max_tokens, grammar):
        response = litellm.completion(model="openai/gemma3-270m", api_base=api_base, api_key="sk-local",
                                      messages=messages, max_tokens=max_tokens, temperature=0.7, seed=seed,
                                      extra_body=grammar_extra_body("llama_cpp", grammar), timeout=120,
                                      num_retries=0)
        return response.choices[0].message.content

    return complete


def assert_gated(module: str, qualname: str, proposal: Proposal) -> None:
    if proposal.reason is None:
        compile(proposal.module_source, "<l4>", "exec")
        assert same_interface(module, proposal.module_source, qualname)
        assert ast.dump(ast.parse(proposal.module_source)) != ast.dump(ast.parse(module))
    else:
        assert proposal.module_source is None
        assert proposal.reason.startswith(REASONS), proposal.reason


def test_gemma_rewrite_of_a_toolz_method_is_gated(llama, toolz_src):
    _, api_base = llama
    module = (toolz_src / "toolz" / "functoolz.py").read_text()
    proposal = propose_rewrite(module, "Compose.__call__", gemma(api_base), seed=0, prompts=load_l4_prompts())
    assert_gated(module, "Compose.__call__", proposal)
    print(f"\nGemma's answer ({proposal.reason or 'accepted'}):\n{proposal.raw}")
