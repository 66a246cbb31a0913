"""Recall probe: ``python -m raydist.launch_recall [hydra overrides]``.

config (``raydist.recall.config``) -> instances (``benchmark``: ids, filter, slice, limit) ->
the model served (a ``local_models`` entry: a Ray actor runs its server for the probe) ->
rounds per instance (``raydist.recall.probe``) -> recall.parquet, summary.json, summary.md,
transcripts.jsonl in ``<output_root>/recall/<benchmark>/<model>``. Re-running the same command
resumes: finished rounds are read back, model answers come from the cache.

Examples::

    python -m raydist.launch_recall benchmark=swebench benchmark.path=../shared/data/swebench/swebench_lite.jsonl
    python -m raydist.launch_recall benchmark.path=verified model=openai/gpt-4o-mini 'benchmark.filter=django__.*'
    python -m raydist.launch benchmark=swebench benchmark.path=... \\
        benchmark.leakage=runs/recall/swebench/gemma3-270m benchmark.min_leakage=repair_logic

Exit status: 0 done; 1 some model call failed (recorded in transcripts.jsonl; the same command
asks again) or the model server did not start; 2 a bad setting (one line names it); 130 when
interrupted. Under ``--multirun`` a failing job does not stop the next (the skeleton every
entry shares: ``raydist.launcher``).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from omegaconf import MISSING, DictConfig, OmegaConf

from raydist import launcher  # first: the environment defaults, before Ray or litellm is imported
from raydist._util.run_dirs import write_record
from raydist.cluster.scheduler import RayOptions
from raydist.cluster.serving import serve_for_command
from raydist.driver.benchmark import load_benchmark
from raydist.driver.config import (
    ConfigError,
    LaunchConfig,
    check_folder_names,
    check_group,
    describe_config_error,
    make_roots_absolute,
)
from raydist.driver.preflight import check_folders, plan_jobs
from raydist.models.completion import litellm_complete
from raydist.models.endpoint import UnknownModel, check_model_name
from raydist.problems.llm import RecordedLLM
from raydist.recall import config
from raydist.recall.answer import answer_grammar
from raydist.recall.probe import ProbeSettings, load_prompts, run_probe
from raydist.recall.rounds import rounds_from
from raydist.recall.table import summary_markdown, write_tables
from raydist.tasks import MalformedInstance

#: The groups the probe shares with the main job, checked by that job's schema.
SHARED_GROUPS = ("benchmark", "cluster")


def shared_defaults() -> dict:
    """The main job's defaults (``raydist.driver.config.LaunchConfig``) of ``SHARED_GROUPS``,
    without the fields a group option must give (a benchmark's ``name``)."""
    values = OmegaConf.to_container(OmegaConf.structured(LaunchConfig))
    return {key: {name: v for name, v in values[key].items() if v != MISSING} for key in SHARED_GROUPS}


config.register(shared_defaults())
RecallError = launcher.SettingProblem
"""A setting of the probe is wrong (exit status 2); ``str()`` names it."""


def settings_of(cfg: DictConfig):
    """``(RecallConfig, rounds, prompt templates, grammar or None)``, checked: the folders made
    absolute in ``cfg`` (``raydist.driver.config.make_roots_absolute``: relative to the
    current directory; an empty one refused), ``benchmark.name`` and ``model`` safe folder
    names below ``output_root`` (``raydist.driver.config.check_folder_names``) and the model
    a ``local_models`` entry or a known litellm name. Raises RecallError naming the setting."""
    try:
        make_roots_absolute(cfg)
        merged = OmegaConf.merge(OmegaConf.structured(config.RecallConfig), cfg)
        OmegaConf.resolve(merged)
        settings = OmegaConf.to_object(merged)
        for key in SHARED_GROUPS:
            check_group(key, getattr(settings, key))
        rounds = rounds_from(settings.rounds)
        limits = settings.answer
        grammar = answer_grammar(max_items=limits.max_items, max_name_chars=limits.max_name_chars,
                                 max_text_chars=limits.max_text_chars, max_patch_chars=limits.max_patch_chars)
        prompts = load_prompts(settings.prompts_dir)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        raise RecallError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - OmegaConf's errors: a wrong type, an unknown key
        raise RecallError(describe_config_error(exc)) from None
    if settings.max_tokens < 1:
        raise RecallError(f"max_tokens={settings.max_tokens}: give a whole number of at least 1")
    try:
        check_folder_names({"benchmark.name": settings.benchmark.get("name"), "model": settings.model},
                           settings.output_root)
    except ConfigError as exc:
        raise RecallError(str(exc)) from None
    if settings.model not in settings.local_models:
        try:
            check_model_name(settings.model)
        except UnknownModel as exc:
            raise RecallError(f"model={settings.model}: {exc}") from None
    return settings, rounds, prompts, grammar if limits.grammar else None


def instances_of(bench) -> list:
    """The benchmark's instances (``raydist.driver.benchmark.load_benchmark``). Raises RecallError."""
    if bench.get("kind") == "problems":
        raise RecallError(f"benchmark={bench.name} is a set of seed problems; the probe needs repository tasks "
                          "with a gold patch (benchmark=swebench benchmark.path=...)")
    try:
        return load_benchmark(bench)
    except (MalformedInstance, FileNotFoundError, ValueError) as exc:
        raise RecallError(f"benchmark={bench.name}: {exc}") from exc


def plan_recall(argv: list[str]) -> list[Path] | None:
    """The run directory of every job of ``python -m raydist.launch_recall`` ``argv``, each job
    checked whole before any starts, with nothing written (``raydist.driver.preflight.plan_jobs``):
    its settings (:func:`settings_of`), its instances (:func:`instances_of`) and its run
    directory below ``output_root`` and writable (``raydist.driver.preflight.check_folders``).
    None when ``argv`` runs no job (``--help``...). Raises ``ConfigError`` or ``JobError``
    (exit status 2) naming the setting and, in a ``--multirun``, the job."""
    return plan_jobs(argv, "recall", _planned, refusals=(RecallError,))


def _planned(cfg: DictConfig, run_dir: Callable[[], Path], overrides: tuple[str, ...]) -> Path:
    settings = settings_of(cfg)[0]
    instances_of(cfg.benchmark)
    folder = run_dir()
    check_folders(settings.output_root, [("the run directory", folder)], settings.cache_dir)
    return folder


@contextmanager
def endpoint_of(settings):
    """The model's ``ModelEndpoint`` for the probe's duration: a ``local_models`` entry with a
    server command is started under Ray (``raydist.cluster.serving.serve_model``), any other
    model (checked by :func:`settings_of`) is reached as it is."""
    entry = settings.local_models.get(settings.model)
    cluster = check_group("cluster", settings.cluster)
    with serve_for_command(settings.model, entry, RayOptions(**vars(cluster))) as endpoint:
        yield endpoint


def run(cfg: DictConfig, run_dir: str) -> int:
    """Probe, write the tables, print the summary; the exit status (module doc). Raises what
    the skeleton maps (``raydist.launcher.exit_status_of``): ``RecallError`` (2), a model
    server that does not start (1)."""
    import logging

    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    cfg = copy.deepcopy(cfg)  # its folders made absolute in the record too
    settings, rounds, prompts, grammar = settings_of(cfg)
    instances = instances_of(cfg.benchmark)
    write_record(run_dir, launcher.config_record(cfg))
    probe = ProbeSettings(model=settings.model, rounds=rounds, prompts=prompts, seed=settings.seed,
                          max_tokens=settings.max_tokens, grammar=grammar, temperature=settings.temperature)
    print(f"recall probe: {len(instances)} instance(s) x {len(rounds)} round(s) on {settings.model} -> {run_dir}",
          flush=True)
    with endpoint_of(settings) as endpoint:
        complete = litellm_complete(endpoint, temperature=settings.temperature, timeout=settings.timeout_base_s,
                                    min_tokens_per_s=settings.min_tokens_per_s)
        llm = RecordedLLM(complete, model=settings.model, cache_dir=Path(settings.cache_dir) / "recall" / "llm")
        result = run_probe(instances, probe, llm, run_dir, progress=_progress)
    summaries = write_tables(result.rows, run_dir, result.failed)
    print(summary_markdown(summaries, result.failed), flush=True)
    return launcher.EXIT_FAILED if result.failed else 0


def _progress(instance_id: str, rows: list[dict]) -> None:
    levels = ", ".join(f"{r['round']}: {r['level']}" for r in rows)
    print(f"  {instance_id}: {levels}", flush=True)


ENTRY = launcher.Entry(config_name="recall", run=run, plan=plan_recall, sweep_report=None)
"""The recall probe as the launcher skeleton runs it: every job planned first
(:func:`plan_recall`), no sandbox containers, no sweep report (each probe writes its own
summary)."""


def cli(argv: list[str] | None = None) -> int:
    """``python -m raydist.launch_recall``: run Hydra; the highest exit status of its jobs."""
    return launcher.launch(ENTRY, argv)


if __name__ == "__main__":
    sys.exit(cli())
