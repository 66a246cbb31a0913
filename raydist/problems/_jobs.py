"""What the problems launcher (``raydist.launch_problems``) asks of this package around Hydra
jobs: each ``--multirun`` job's own run directory name, and the command-line key check that
runs before Hydra."""

from __future__ import annotations

from raydist._util.run_dirs import job_name
from raydist.problems.config import ProblemsSettings

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
    message naming it and the keys allowed there), else None. Keys with ``+``/``~``, Hydra's
    own and those of the shared groups (benchmark, sandbox, cluster, local_models) are left to
    Hydra and their users."""
    from pydantic import BaseModel

    for arg in args:
        key = arg.split("=", 1)[0]
        if arg.startswith(("-", "+", "~")) or "=" not in arg or "/" in key or key.split(".")[0] == "hydra":
            continue
        path = key.split(".")
        model: type[BaseModel] = ProblemsSettings
        for depth, part in enumerate(path):
            fields = model.model_fields
            if part not in fields:
                where = ".".join(path[:depth]) or "the launch"
                return f"{'.'.join(path)}: unknown setting; {where} takes {', '.join(fields)}"
            annotation = fields[part].annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                break
            model = annotation
    return None
