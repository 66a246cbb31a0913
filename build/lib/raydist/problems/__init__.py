"""DyCodeEval's dynamic problems: seed problems, input type inference, the four agents that
make variants, pass@k and DyPass@k.

Public API::

    load_seeds(dataset, *, path=None, limit=None, ids=None) -> list[Problem]
    load_humaneval(limit=None, ids=None) -> list[Problem]
    load_mbpp(path, limit=None, ids=None) -> list[Problem]
    assemble_program(problem, solution=None) -> str
    infer_parameter_types(problem) -> dict[str, str]
    infer_types(problem) -> InferredTypes
    abstract_type(value) -> str
    RecordedLLM(complete, *, model, cache_dir, log=None)      # cached, recorded model calls
    load_dyc_prompts(prompts_dir=DEFAULT_PROMPTS_DIR) -> DycPrompts
    propose_scenarios(llm, domains, target, seed, *, prompts=None, per_round=10, max_rounds=10) -> list[str]
    generate_contexts(llm, problem, scenario, param_types, seed, *, prompts=None) -> dict[str, str]
    rewrite_prompt(llm, problem, scenario, contexts, seed, *, prompts=None) -> str
    validate(llm, problem, variant_prompt, seed, *, prompts=None) -> Verdicts
    generate_variant(llm, problem, scenario_pool, seed, prompts) -> Variant
    variants_table(variants) -> pyarrow.Table; variants_from_table(table) -> list[Variant]
    export_for_human_check(variants, n, seed, path) -> Path
    pass_at_k(n, c, k) -> float
    mean_pass_at_k(results, k) -> float
    dypass_at_k(results, k, *, draw="completions") -> float

Running programs needs Docker and lives in :mod:`raydist.problems.execute` (not imported here,
so that the pure modules stay free of it)::

    ProgramRunner(client, image, *, limits=ExecLimits(), workers=1)
        .run(program) -> ProgramResult      .run_many(programs) -> list[ProgramResult]
"""

from raydist.problems.agents import (
    DycPrompts,
    Rejected,
    Verdicts,
    generate_contexts,
    load_dyc_prompts,
    propose_scenarios,
    rewrite_prompt,
    validate,
)
from raydist.problems.generate import (
    VARIANTS_SCHEMA,
    Variant,
    export_for_human_check,
    generate_variant,
    variants_from_table,
    variants_table,
)
from raydist.problems.llm import LLMCallFailed, RecordedLLM
from raydist.problems.metrics import dypass_at_k, mean_pass_at_k, pass_at_k
from raydist.problems.seeds import (
    MalformedProblem,
    Problem,
    assemble_program,
    load_humaneval,
    load_mbpp,
    load_seeds,
)
from raydist.problems.types import InferredTypes, SkippedArgument, abstract_type, infer_parameter_types, infer_types

__all__ = [
    "VARIANTS_SCHEMA",
    "DycPrompts",
    "InferredTypes",
    "LLMCallFailed",
    "MalformedProblem",
    "Problem",
    "RecordedLLM",
    "Rejected",
    "SkippedArgument",
    "Variant",
    "Verdicts",
    "abstract_type",
    "assemble_program",
    "dypass_at_k",
    "export_for_human_check",
    "generate_contexts",
    "generate_variant",
    "infer_parameter_types",
    "infer_types",
    "load_dyc_prompts",
    "load_humaneval",
    "load_mbpp",
    "load_seeds",
    "mean_pass_at_k",
    "pass_at_k",
    "propose_scenarios",
    "rewrite_prompt",
    "validate",
    "variants_from_table",
    "variants_table",
]
