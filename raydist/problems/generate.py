"""One DyCodeEval variant of a seed problem per (seed problem, generation seed), as a row
(§3.1-§3.2): scenario -> contexts -> rewritten prompt -> two validator verdicts.

A variant keeps its seed's signature, tests and canonical solution (the metamorphic relation
of §3.1: only the complexity-unrelated context changes), so ``canonical_passed`` (filled by
the executor) checks that the seed's canonical solution passes the variant's tests. Every
attempt becomes a :class:`Variant`, accepted or not: a rejected answer says why in
``rejection``, a failed model call in ``error``. :func:`export_for_human_check` samples
accepted pairs for the manual check of Appendix D.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from raydist._util.files import atomic_write_text
from raydist._util.hashing import stable_hash
from raydist.problems.agents import DycPrompts, Rejected, generate_contexts, rewrite_prompt, validate
from raydist.problems.llm import LLM, LLMCallFailed
from raydist.problems.seeds import Problem
from raydist.problems.types import infer_parameter_types
from raydist.results.schema import table_from_rows

__all__ = ["HUMAN_CHECK_COLUMNS", "VARIANTS_SCHEMA", "Variant", "export_for_human_check", "generate_variant",
           "variant_id", "variants_from_table", "variants_table"]


@dataclass(frozen=True)
class Variant:
    """One generated variant of a seed problem, or the record of a failed attempt.

    Attributes:
        variant_id: :func:`variant_id` of (seed_id, generation_seed, generator_model).
        seed_id: the seed's ``problem_id``.
        dataset: the seed's dataset (``"humaneval"`` or ``"mbpp"``).
        generation_seed: the seed that chose the scenario and the request seeds (>= 0).
        generator_model: the name of the model that answered.
        scenario: the scenario drawn from the pool.
        contexts: parameter -> context; ``{}`` when the Context Generator gave none.
        prompt: the variant prompt; also the rejected rewrite when the checks refused it;
            None when no rewrite was produced.
        semantic_verdict: the Validator's "is it equivalent to the seed" answer, "YES" / "NO",
            None when not asked or unparsable.
        consistency_verdict: the same for "is it consistent with the canonical solution".
        accepted: the deterministic checks passed and both verdicts are YES.
        rejection: why a variant with an answer to every call was not accepted
            (``"contexts: ..."``, ``"rewrite: ..."``, ``"validator: ..."``), else None.
        error: a failed model call as ``"role: Type: message"``, else None.
        seed_prompt, entry_point, tests, test_setup, canonical_solution: copied from the seed.
        canonical_passed: whether the canonical solution passes the variant's tests; None
            until the executor fills it.
    """

    variant_id: str
    seed_id: str
    dataset: str
    generation_seed: int
    generator_model: str
    scenario: str
    contexts: dict[str, str] = field(default_factory=dict)
    prompt: str | None = None
    semantic_verdict: str | None = None
    consistency_verdict: str | None = None
    accepted: bool = False
    rejection: str | None = None
    error: str | None = None
    seed_prompt: str = ""
    entry_point: str = ""
    tests: tuple[str, ...] = ()
    test_setup: str = ""
    canonical_solution: str = ""
    canonical_passed: bool | None = None


def variant_id(seed_id: str, generation_seed: int, generator_model: str) -> str:
    """16 hex digits naming a variant: equal inputs, equal id, across runs and machines."""
    return stable_hash({"seed_id": seed_id, "generation_seed": generation_seed, "generator_model": generator_model})


def generate_variant(llm: LLM, problem: Problem, scenario_pool: Sequence[str], seed: int,
                     prompts: DycPrompts) -> Variant:
    """One variant of ``problem`` for generation seed ``seed`` (DyCodeEval §3.2).

    The scenario is ``random.Random(f"{problem_id}:{seed}").choice(scenario_pool)``; the
    contexts (for :func:`~raydist.problems.infer_parameter_types`' types), the rewrite and
    both validator checks are asked with request seed ``seed``. The model's name is
    ``llm.model``.

    Returns:
        A :class:`Variant`: accepted, or rejected with ``rejection`` set, or failed with
        ``error`` set (an ``LLMCallFailed``, already in the LLM's call records).

    Raises:
        ValueError: an empty ``scenario_pool`` or a negative ``seed``; or the seed's
            signature does not parse (from the type inference).
    """
    if not scenario_pool:
        raise ValueError("the scenario pool is empty; propose scenarios first")
    if seed < 0:
        raise ValueError(f"the generation seed must be >= 0, got {seed}")
    scenario = random.Random(f"{problem.problem_id}:{seed}").choice(list(scenario_pool))
    base = _from_seed(problem, seed, llm.model, scenario)
    contexts: dict[str, str] = {}
    variant_prompt = None
    try:
        contexts = generate_contexts(llm, problem, scenario, infer_parameter_types(problem), seed, prompts=prompts)
        variant_prompt = rewrite_prompt(llm, problem, scenario, contexts, seed, prompts=prompts)
        verdicts = validate(llm, problem, variant_prompt, seed, prompts=prompts)
    except Rejected as exc:
        return Variant(**base, contexts=contexts, prompt=exc.candidate, rejection=str(exc))
    except LLMCallFailed as exc:
        return Variant(**base, contexts=contexts, prompt=variant_prompt, error=str(exc))
    return Variant(**base, contexts=contexts, prompt=variant_prompt, semantic_verdict=verdicts.semantic,
                   consistency_verdict=verdicts.consistent, accepted=verdicts.accepted,
                   rejection=verdicts.rejection())


def _from_seed(problem: Problem, seed: int, model: str, scenario: str) -> dict:
    return {"variant_id": variant_id(problem.problem_id, seed, model), "seed_id": problem.problem_id,
            "dataset": problem.dataset, "generation_seed": seed, "generator_model": model, "scenario": scenario,
            "seed_prompt": problem.prompt, "entry_point": problem.entry_point, "tests": problem.tests,
            "test_setup": problem.test_setup, "canonical_solution": problem.canonical_solution}


VARIANTS_SCHEMA = pa.schema([
    pa.field("variant_id", pa.string(), nullable=False),
    pa.field("seed_id", pa.string(), nullable=False),
    pa.field("dataset", pa.string(), nullable=False),
    pa.field("generation_seed", pa.int64(), nullable=False),
    pa.field("generator_model", pa.string(), nullable=False),
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("contexts", pa.map_(pa.string(), pa.string()), nullable=False),
    pa.field("prompt", pa.string()),
    pa.field("semantic_verdict", pa.string()),
    pa.field("consistency_verdict", pa.string()),
    pa.field("accepted", pa.bool_(), nullable=False),
    pa.field("rejection", pa.string()),
    pa.field("error", pa.string()),
    pa.field("seed_prompt", pa.string(), nullable=False),
    pa.field("entry_point", pa.string(), nullable=False),
    pa.field("tests", pa.list_(pa.string()), nullable=False),
    pa.field("test_setup", pa.string(), nullable=False),
    pa.field("canonical_solution", pa.string(), nullable=False),
    pa.field("canonical_passed", pa.bool_()),
])
"""One row per :class:`Variant`, the fields in declaration order; ``contexts`` is a map in
parameter order, ``tests`` a list."""


def variants_table(variants: Sequence[Variant]) -> pa.Table:
    """``variants`` as a table of ``VARIANTS_SCHEMA``, in the given order.

    Raises ``ValueError`` (``table_from_rows``) when ``Variant`` has a field the schema lacks."""
    rows = [asdict(variant) | {"contexts": list(variant.contexts.items()), "tests": list(variant.tests)}
            for variant in variants]
    return table_from_rows(rows, VARIANTS_SCHEMA, "variants.parquet")


def variants_from_table(table: pa.Table) -> list[Variant]:
    """The :class:`Variant` rows of a ``VARIANTS_SCHEMA`` table (as :func:`variants_table` wrote).

    Raises:
        ValueError: the table's columns are not those of ``VARIANTS_SCHEMA``.
    """
    if table.schema.names != VARIANTS_SCHEMA.names:
        raise ValueError(f"not a variants table: columns {table.schema.names}, expected {VARIANTS_SCHEMA.names}")
    return [Variant(**row | {"contexts": dict(row["contexts"]), "tests": tuple(row["tests"])})
            for row in table.to_pylist()]


HUMAN_CHECK_COLUMNS = ("variant_id", "seed_id", "seed_prompt", "variant_prompt", "scenario", "contexts",
                       "semantic", "consistent", "human_verdict", "human_note")
"""Columns of the human-check CSV; the reviewer fills the last two."""


def export_for_human_check(variants: Sequence[Variant], n: int, seed: int, path: str | Path) -> Path:
    """Write ``n`` randomly chosen accepted seed/variant pairs to the CSV ``path`` (Appendix D:
    two reviewers judge whether each pair keeps the core algorithm and complexity).

    The sample is ``random.Random(seed).sample`` of the accepted variants sorted by
    ``variant_id``, so it does not depend on the input order. Columns are
    ``HUMAN_CHECK_COLUMNS``: ``contexts`` as a JSON object, ``semantic`` / ``consistent`` the
    validator's verdicts, ``human_verdict`` and ``human_note`` empty. The file is replaced at
    once (``atomic_write_text``).

    Returns:
        ``path``.

    Raises:
        ValueError: ``n`` < 1 or fewer than ``n`` accepted variants.
    """
    accepted = sorted((v for v in variants if v.accepted), key=lambda v: v.variant_id)
    if n < 1 or n > len(accepted):
        raise ValueError(f"cannot sample {n} pairs for the human check from {len(accepted)} accepted variant(s)")
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(HUMAN_CHECK_COLUMNS)
    for v in random.Random(seed).sample(accepted, n):
        writer.writerow([v.variant_id, v.seed_id, v.seed_prompt, v.prompt, v.scenario,
                         json.dumps(v.contexts, ensure_ascii=False), v.semantic_verdict,
                         v.consistency_verdict, "", ""])
    path = Path(path)
    atomic_write_text(path, out.getvalue())
    return path
