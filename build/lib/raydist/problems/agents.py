"""The four agents of DyCodeEval (§3.1-§3.2) as plain functions over an injected model.

1. Scenario Proposer (:func:`propose_scenarios`): grows a pool of short practical scenarios
   from seed domains (Appendix C.1).
2. Context Generator (:func:`generate_contexts`): for one scenario, one context per input
   variable of the entry point, given its inferred type (§3.2, Appendix C.3).
3. Prompt Rewriter (:func:`rewrite_prompt`): tailors the seed prompt to the scenario and the
   contexts, keeping the complexity, the constraints, the signature and the examples; then
   checks the signature, the examples and (for Python prompts) the syntax without a model.
4. Validator (:func:`validate`): two separate questions, each answered YES or NO: is the
   variant semantically equivalent to the seed, and is it consistent with the seed's
   canonical solution? A variant is kept only when both are YES (§3.2).

The model is reached only through an :class:`~raydist.problems.llm.LLM` (a
:class:`~raydist.problems.llm.RecordedLLM` in practice), so this module stays pure. A model
failure surfaces as ``LLMCallFailed``; an answer that cannot make a variant raises
:class:`Rejected` naming why. The grammars, parsers and checks of the answers live in
``raydist.problems._answers`` and are re-exported here.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raydist.problems._answers import (
    CONTEXT_MAX_CHARS,
    REASON_MAX_CHARS,
    VERDICT_GRAMMAR,
    clean_rewrite,
    contexts_grammar,
    normalise_scenario,
    parse_contexts,
    parse_scenarios,
    parse_verdict,
    rewrite_grammar,
    rewrite_rejection,
    scenario_grammar,
)
from raydist.problems._source import function_node
from raydist.problems.llm import LLM
from raydist.problems.seeds import Problem
from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates, render

__all__ = [
    "DEFAULT_PROMPTS_DIR", "VERDICT_GRAMMAR", "DycPrompts", "Rejected", "Verdicts", "clean_rewrite", "contexts_grammar",
    "generate_contexts", "load_dyc_prompts", "normalise_scenario", "parse_contexts", "parse_scenarios",
    "parse_verdict", "propose_scenarios", "rewrite_budget", "rewrite_grammar", "rewrite_prompt", "rewrite_rejection",
    "scenario_grammar", "solution_code", "validate",
]

PROMPT_FILES = {"scenario": "dyc_scenario", "context": "dyc_context", "rewrite": "dyc_rewrite",
                "validate_semantic": "dyc_validate_semantic", "validate_solution": "dyc_validate_solution"}
"""Template name -> file stem under the prompts folder (``.j2``)."""

MAX_ROUNDS = 999  # scenario round r sends request seed seed * 1000 + r
SCENARIOS_SHOWN = 40
"""At most this many pool members (the newest) are listed as taken in a proposer prompt."""
TOKENS_PER_SCENARIO = 24
TOKENS_PER_CONTEXT = CONTEXT_MAX_CHARS // 3 + 8
VERDICT_MAX_TOKENS = 16 + REASON_MAX_CHARS // 3
REWRITE_MAX_TOKENS = 1024


class Rejected(ValueError):
    """An agent's answer cannot make a variant; ``str()`` is ``"<stage>: <reason>"``.

    Attributes:
        stage: ``"contexts"`` or ``"rewrite"``.
        reason: what is wrong, e.g. ``"no context for parameter(s) threshold"``.
        candidate: the rejected rewritten prompt (rewrite stage), else None.
    """

    def __init__(self, stage: str, reason: str, candidate: str | None = None):
        self.stage, self.reason, self.candidate = stage, reason, candidate
        super().__init__(f"{stage}: {reason}")


@dataclass(frozen=True)
class Verdicts:
    """The Validator's two answers (§3.2): each "YES", "NO" or None (unparsable).

    Attributes:
        semantic: the variant is semantically equivalent to the seed.
        consistent: the variant is consistent with the seed's canonical solution.
        reasons: ``{"semantic": reason, "consistent": reason}`` as the model gave them.
    """

    semantic: str | None
    consistent: str | None
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        """Both answers are YES."""
        return self.semantic == "YES" and self.consistent == "YES"

    def rejection(self) -> str | None:
        """None when accepted, else ``"validator: semantic NO: <reason>; consistent no verdict"``
        listing each check that is not YES with its reason."""
        parts = []
        for name, verdict in (("semantic", self.semantic), ("consistent", self.consistent)):
            if verdict != "YES":
                reason = self.reasons.get(name, "")
                parts.append(f"{name} {verdict or 'no verdict'}" + (f": {reason}" if reason else ""))
        return f"validator: {'; '.join(parts)}" if parts else None


@dataclass(frozen=True)
class DycPrompts:
    """The Jinja2 templates of the four agents; each renders one user message.

    Attributes:
        scenario: variables ``domains`` (list), ``count`` (int), ``existing`` (list of taken names).
        context: ``prompt``, ``param_types`` (name -> type string), ``scenario``.
        rewrite: ``prompt``, ``signature``, ``examples`` (list), ``scenario``, ``contexts``.
        validate_semantic: ``seed_prompt``, ``variant_prompt``.
        validate_solution: ``variant_prompt``, ``solution``.
    """

    scenario: str
    context: str
    rewrite: str
    validate_semantic: str
    validate_solution: str

    def messages(self, name: str, **variables: Any) -> list[dict]:
        """``[user]`` chat messages with template ``name`` rendered from ``variables``.

        Instructions travel in the user message: some chat formats (Gemma's) drop system messages.

        Raises:
            jinja2.UndefinedError: the template uses a variable that was not given.
        """
        text = render(getattr(self, name), variables, trim_blocks=True, lstrip_blocks=True).strip()
        return [{"role": "user", "content": text}]


def load_dyc_prompts(prompts_dir: str | Path = DEFAULT_PROMPTS_DIR) -> DycPrompts:
    """Read the five ``dyc_*.j2`` templates of :data:`PROMPT_FILES` from ``prompts_dir`` (a
    relative path is taken from the raydist checkout, not the working directory).

    Raises:
        FileNotFoundError: a template is missing; the message names the file, the folder and
            the five files it must hold.
        jinja2.TemplateSyntaxError: a template does not parse.
    """
    return DycPrompts(**read_templates(prompts_dir, PROMPT_FILES, "DyCodeEval"))


def propose_scenarios(llm: LLM, domains: list[str], target: int, seed: int, *, prompts: DycPrompts | None = None,
                      per_round: int = 10, max_rounds: int = 10) -> list[str]:
    """A pool of up to ``target`` distinct practical scenario names (Scenario Proposer, §3.2, C.1).

    Round ``r`` (0-based) asks for ``per_round`` scenarios from ``domains`` with request seed
    ``seed * 1000 + r``, listing the newest ``SCENARIOS_SHOWN`` pool members as taken; the
    answer's lines are read by :func:`parse_scenarios` and a name joins the pool unless its
    :func:`normalise_scenario` key is already there or occurs in the request itself (an
    echo of the prompt's example or of the domain list, as small models write). Rounds stop at ``target`` names or after
    ``max_rounds``, so the pool may be smaller than ``target``: the caller checks. Equal
    arguments give equal requests, hence (with the cache) an equal pool.

    Returns:
        The names in the order they were first proposed, as the model spelled them (cleaned).

    Raises:
        ValueError: no domains, ``target`` or ``per_round`` below 1, ``max_rounds`` outside
            1..999, or a negative ``seed``.
        LLMCallFailed: a round's call failed.
    """
    if not domains:
        raise ValueError("propose_scenarios needs at least one domain")
    if target < 1 or per_round < 1:
        raise ValueError(f"target and per_round must be at least 1, got {target} and {per_round}")
    if not 1 <= max_rounds <= MAX_ROUNDS or seed < 0:
        raise ValueError(f"max_rounds must be within 1..{MAX_ROUNDS} and seed >= 0, got {max_rounds} and {seed}")
    prompts = prompts or load_dyc_prompts()
    pool: dict[str, str] = {}
    for round_number in range(max_rounds):
        if len(pool) >= target:
            break
        messages = prompts.messages("scenario", domains=list(domains), count=per_round,
                                    existing=list(pool.values())[-SCENARIOS_SHOWN:])
        answer = llm("scenario", messages, seed=seed * 1000 + round_number,
                     max_tokens=per_round * TOKENS_PER_SCENARIO, grammar=scenario_grammar(per_round))
        asked = f" {normalise_scenario(messages[-1]['content'])} "
        for name in parse_scenarios(answer):
            key = normalise_scenario(name)
            if f" {key} " not in asked:  # an echo of the request (its example, a domain list)
                pool.setdefault(key, name)
    return list(pool.values())[:target]


def generate_contexts(llm: LLM, problem: Problem, scenario: str, param_types: dict[str, str], seed: int, *,
                      prompts: DycPrompts | None = None) -> dict[str, str]:
    """One scenario-tailored context per input variable (Context Generator, §3.2, C.3).

    ``param_types`` is :func:`~raydist.problems.infer_parameter_types` of ``problem``
    (``{"numbers": "list[float]", "threshold": "float"}``); the model sees each name with
    its type and answers ``name: context`` lines (``contexts_grammar`` forces them on servers
    that take a grammar). A problem without parameters gets ``{}`` without a call.

    Returns:
        ``{parameter: context}`` in ``param_types`` order.

    Raises:
        Rejected: stage ``"contexts"``, reason ``"no context for parameter(s) a, b"``.
        LLMCallFailed: the call failed.
    """
    names = list(param_types)
    if not names:
        return {}
    prompts = prompts or load_dyc_prompts()
    messages = prompts.messages("context", prompt=problem.prompt, param_types=dict(param_types), scenario=scenario)
    answer = llm("context", messages, seed=seed, max_tokens=len(names) * TOKENS_PER_CONTEXT,
                 grammar=contexts_grammar(names), problem_id=problem.problem_id)
    contexts = parse_contexts(answer, names)
    missing = [name for name in names if name not in contexts]
    if missing:
        raise Rejected("contexts", f"no context for parameter(s) {', '.join(missing)}")
    return contexts


def rewrite_budget(problem: Problem) -> int:
    """Completion tokens for one rewrite: about 1.5x the seed prompt (3 characters a token)
    plus 64 for the fences, at most ``REWRITE_MAX_TOKENS``."""
    return min(REWRITE_MAX_TOKENS, math.ceil(len(problem.prompt) / 2) + 64)


def rewrite_prompt(llm: LLM, problem: Problem, scenario: str, contexts: dict[str, str], seed: int, *,
                   prompts: DycPrompts | None = None) -> str:
    """The seed prompt tailored to ``scenario`` and ``contexts`` (Prompt Rewriter, §3.2).

    The model is told to keep the complexity, the constraints and the solution approach,
    to tell the problem in 1-3 sentences, and to keep the signature line and every example
    verbatim; for HumanEval-style prompts ``rewrite_grammar`` also forces the text up to the
    signature. The answer is unwrapped (:func:`~raydist.problems._answers.clean_rewrite`)
    and checked without a model (:func:`rewrite_rejection`, which also refuses an echo of
    the request's own lines).

    Returns:
        The variant prompt, ending with a newline.

    Raises:
        Rejected: stage ``"rewrite"`` with the reason of :func:`rewrite_rejection` and the
            rejected text as ``candidate`` (None when empty).
        LLMCallFailed: the call failed.
    """
    prompts = prompts or load_dyc_prompts()
    messages = prompts.messages("rewrite", prompt=problem.prompt, signature=problem.signature,
                                examples=list(problem.examples), scenario=scenario, contexts=dict(contexts))
    answer = llm("rewrite", messages, seed=seed, max_tokens=rewrite_budget(problem),
                 grammar=rewrite_grammar(problem), problem_id=problem.problem_id)
    variant = clean_rewrite(answer)
    reason = rewrite_rejection(problem, variant, request=messages[-1]["content"],
                               grounding=[scenario, *contexts.values()])
    if reason is not None:
        raise Rejected("rewrite", reason, candidate=variant or None)
    return variant


def validate(llm: LLM, problem: Problem, variant_prompt: str, seed: int, *,
             prompts: DycPrompts | None = None) -> Verdicts:
    """The Validator's two checks of ``variant_prompt`` against its seed (§3.2, both asked).

    (a) ``validate_semantic``: is the variant semantically equivalent to the seed prompt
    (same concept, factual accuracy)? (b) ``validate_solution``: is it consistent with the
    seed's canonical solution, shown without the entry point's docstring so that the code,
    not the seed's wording, is compared? Each answer is ``VERDICT_GRAMMAR`` on servers that
    take a grammar and is read by :func:`parse_verdict`.

    Raises:
        LLMCallFailed: a call failed.
    """
    prompts = prompts or load_dyc_prompts()
    answers = {}
    for name, role, variables in (
        ("semantic", "validate_semantic", {"seed_prompt": problem.prompt, "variant_prompt": variant_prompt}),
        ("consistent", "validate_solution", {"variant_prompt": variant_prompt, "solution": solution_code(problem)}),
    ):
        answer = llm(role, prompts.messages(role, **variables), seed=seed, max_tokens=VERDICT_MAX_TOKENS,
                     grammar=VERDICT_GRAMMAR, problem_id=problem.problem_id)
        answers[name] = parse_verdict(answer)
    return Verdicts(semantic=answers["semantic"][0], consistent=answers["consistent"][0],
                    reasons={name: reason for name, (_, reason) in answers.items()})


def solution_code(problem: Problem) -> str:
    """``problem.canonical_solution`` without the entry point's docstring (HumanEval's solution
    repeats the seed prompt); unchanged when there is no docstring on lines of its own."""
    source = problem.canonical_solution
    try:
        node = function_node(source, problem.entry_point)
    except SyntaxError:
        return source
    if node is None or ast.get_docstring(node) is None or len(node.body) < 2:
        return source
    docstring = node.body[0]
    lines = source.splitlines(keepends=True)
    if docstring.lineno == node.lineno or lines[docstring.end_lineno - 1].encode()[docstring.end_col_offset:].strip():
        return source
    return "".join(lines[:docstring.lineno - 1] + lines[docstring.end_lineno:])
