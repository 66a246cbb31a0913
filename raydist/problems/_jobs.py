"""What the problems launcher (``raydist.launch_problems``) asks of this package around Hydra
jobs: each ``--multirun`` job's own run directory name, and the command-line key check that
runs before Hydra."""

from __future__ import annotations

from raydist._util.run_dirs import job_name
from raydist.problems.config import unknown_key

__all__ = ["job_dir_name", "unknown_override"]

#: Overrides a job's directory name leaves out besides paths and Hydra's own (``job_name``):
#: those already in the run directory's path (the benchmark, the generator) and those that do
#: not change what a job computes (model endpoints, where items run).
_NOT_NAMED = ("benchmark", "benchmark.name", "generation.model", "local_models.*", "cluster", "cluster.*")


def job_dir_name(overrides) -> str:
    """The run directory name of one ``--multirun`` job: ``raydist._util.run_dirs.job_name``
    of its ``overrides`` (Hydra's ``hydra.overrides.task``), ``default`` without any."""
    return job_name(overrides, _NOT_NAMED) or "default"


def unknown_override(args: list[str]) -> str | None:
    """The first ``key=value`` of ``args`` whose key the problems settings do not have (a
    message naming it and the keys allowed there: ``raydist.problems.config.unknown_key``),
    else None. Keys with ``+``/``~``, Hydra's own and those of the shared groups (benchmark,
    sandbox, cluster, local_models) are left to Hydra and their users."""
    for arg in args:
        key = arg.split("=", 1)[0]
        if arg.startswith(("-", "+", "~")) or "=" not in arg or "/" in key or key.split(".")[0] == "hydra":
            continue
        problem = unknown_key(key.split("."))
        if problem:
            return problem
    return None
