"""Dynamic problems (DyCodeEval): ``python -m raydist.problems.launch [hydra overrides]``.

config -> seed problems -> scenario pool -> variants (generated, validated, canonical-checked)
-> models under test in the sandbox -> variants.parquet, completions.parquet, llm_calls.jsonl,
human_check.csv, summary.md (acceptance rates, pass@k, DyPass@k, diversity). Re-running the
same command resumes.

Examples::

    python -m raydist.problems.launch --multirun benchmark=humaneval,mbpp    # 10 seeds each
    python -m raydist.problems.launch benchmark=mbpp benchmark.limit=50 generation.variants_per_seed=5
    python -m raydist.problems.launch generation.model=openai/gpt-4o-mini evaluation.models=[gemma3-270m]
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

PIPELINES = ("full", "generate", "evaluate")


class ProblemsError(Exception):
    """A configuration or input problem; the message names it and what to do."""


def job_from_config(cfg: DictConfig, run_dir: str):
    """Resolve and check ``cfg``; returns ``(ProblemsJob, problems)``. Raises ProblemsError."""
    from pathlib import Path

    from raydist.problems.pipeline import ProblemsJob
    from raydist.problems.seeds import MalformedProblem, load_seeds

    bench = cfg.benchmark
    if bench.get("kind") != "problems":
        raise ProblemsError(f"benchmark={bench.name} is a set of repository tasks: run `python -m raydist.launch "
                            f"benchmark={bench.name}`; here use benchmark=humaneval or benchmark=mbpp")
    if cfg.pipeline not in PIPELINES:
        raise ProblemsError(f"pipeline={cfg.pipeline!r}: choose one of {', '.join(PIPELINES)}")
    local = OmegaConf.to_container(cfg.local_models, resolve=True)
    models = [cfg.generation.model, *cfg.evaluation.models]
    for model in models:
        if model not in local:
            from raydist.models.endpoint import UnknownModel, check_model_name

            try:
                check_model_name(str(model))
            except UnknownModel as exc:
                raise ProblemsError(str(exc)) from exc
    for key in ("n", "max_tokens", "variants_per_seed", "scenarios"):
        section = cfg.evaluation if key in cfg.evaluation else cfg.generation
        if not isinstance(section[key], int) or section[key] < 1:
            raise ProblemsError(f"{key}={section[key]!r}: give a whole number of at least 1")
    for key, value in (cfg.get("requests") or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ProblemsError(f"requests.{key}={value!r}: give a number of seconds or tokens per second above 0")
    if any(int(k) > int(cfg.evaluation.n) for k in cfg.evaluation.k):
        raise ProblemsError(f"evaluation.k={list(cfg.evaluation.k)} asks for more samples than evaluation.n="
                            f"{cfg.evaluation.n}; raise n or lower k")
    ids = [bench.ids] if isinstance(bench.ids, str) else (list(bench.ids) if bench.ids else None)
    try:
        problems = load_seeds(str(bench.dataset), path=bench.source, limit=bench.limit, ids=ids)
    except (MalformedProblem, FileNotFoundError, ValueError, NotImplementedError) as exc:
        raise ProblemsError(f"benchmark={bench.name}: {exc}") from exc
    if not problems:
        raise ProblemsError(f"benchmark={bench.name}: no seed problems selected (check benchmark.ids/limit)")
    job = ProblemsJob(
        dataset=str(bench.dataset), source=bench.source, ids=ids, limit=bench.limit, pipeline=str(cfg.pipeline),
        generation=OmegaConf.to_container(cfg.generation, resolve=True),
        evaluation=OmegaConf.to_container(cfg.evaluation, resolve=True),
        execution=OmegaConf.to_container(cfg.execution, resolve=True),
        analysis=OmegaConf.to_container(cfg.analysis, resolve=True), local_models=local,
        run_dir=Path(run_dir), cache_dir=Path(cfg.cache_dir).expanduser(),
        docker_host=cfg.sandbox.docker_host, base_image=cfg.sandbox.base_image,
        ray=OmegaConf.to_container(cfg.cluster, resolve=True),
        requests=OmegaConf.to_container(cfg.requests, resolve=True) if "requests" in cfg else {},
    )
    return job, problems


@hydra.main(config_path="../../conf", config_name="problems", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Build the job and run it; user errors exit 2 with one clear line."""
    import logging

    from raydist.problems.pipeline import run_problems

    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # one INFO line per request otherwise
    from raydist.sandbox import BaseImageMissing, SandboxUnavailable

    job = None
    try:
        job, problems = job_from_config(cfg, HydraConfig.get().runtime.output_dir)
        run_problems(job, problems)
    except (ProblemsError, SandboxUnavailable, BaseImageMissing) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("\ninterrupted: finished variants and completions are kept; run the same command again to resume",
              file=sys.stderr, flush=True)
        sys.exit(130)
    except OSError as exc:  # a full disk, an unwritable output_root
        print(f"raydist: error: {exc}; free space or choose another output_root (finished items are kept)",
              file=sys.stderr)
        sys.exit(1)
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if job is not None:
            _sweep(job.docker_host)


def _sweep(docker_host) -> None:
    """Remove sandbox containers whose owner (a Ray worker of this launch) is gone."""
    from raydist.sandbox import SandboxUnavailable, connect, sweep_orphans

    try:
        sweep_orphans(connect(docker_host))
    except SandboxUnavailable:
        pass


if __name__ == "__main__":
    main()
