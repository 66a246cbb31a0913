"""DyCodeEval's dynamic problems: seed problems, input type inference, pass@k and DyPass@k.

Public API::

    load_seeds(dataset, *, path=None, limit=None, ids=None) -> list[Problem]
    load_humaneval(limit=None, ids=None) -> list[Problem]
    load_mbpp(path, limit=None, ids=None) -> list[Problem]
    assemble_program(problem, solution=None) -> str
    infer_parameter_types(problem) -> dict[str, str]
    infer_types(problem) -> InferredTypes
    abstract_type(value) -> str
    pass_at_k(n, c, k) -> float
    mean_pass_at_k(results, k) -> float
    dypass_at_k(results, k, *, draw="completions") -> float

Running programs needs Docker and lives in :mod:`raydist.problems.execute` (not imported here,
so that the pure modules stay free of it)::

    ProgramRunner(client, image, *, limits=ExecLimits(), workers=1)
        .run(program) -> ProgramResult      .run_many(programs) -> list[ProgramResult]
"""

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
    "InferredTypes",
    "MalformedProblem",
    "Problem",
    "SkippedArgument",
    "abstract_type",
    "assemble_program",
    "dypass_at_k",
    "infer_parameter_types",
    "infer_types",
    "load_humaneval",
    "load_mbpp",
    "load_seeds",
    "mean_pass_at_k",
    "pass_at_k",
]
