"""The DyCodeEval pipeline of one launch (one benchmark), on Ray, resumable.

seeds -> scenario pool (§3.2) -> one variant per (seed problem, generation seed): context
generator, prompt rewriter, validator -> the canonical solution run on each accepted
variant's tests in the sandbox -> every model under test: n completions per seed problem and
per accepted variant, each run in the sandbox -> pass@k, DyPass@k (§5), acceptance rates,
diversity (§4.4) -> tables and a printed summary.

Every stage's output is one JSON file per item under the run directory (``variants/``,
``completions/``), written when the item finishes, so a killed launch loses only what was in
flight and the same command resumes. Every LLM call is cached on disk by request
(``raydist.problems.llm``), so regenerating a finished item costs nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from raydist._util.hashing import stable_hash


@dataclass
class ProblemsJob:
    """Everything one launch needs, resolved from the config (``from_config``)."""

    dataset: str
    source: str | None
    ids: list | None
    limit: int | None
    pipeline: str
    generation: dict
    evaluation: dict
    execution: dict
    analysis: dict
    local_models: dict
    run_dir: Path
    cache_dir: Path
    docker_host: str | None = None
    base_image: str | None = None
    ray: dict = field(default_factory=dict)
    requests: dict = field(default_factory=dict)
    """``timeout_base_s`` and ``min_tokens_per_s`` of every model request
    (``raydist.models.completion.request_timeout``); defaults 120 s and 4 tokens/s."""


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (rename), creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


def read_json_dir(folder: Path) -> dict[str, dict]:
    """``{file stem: record}`` of every readable ``*.json`` in ``folder`` (an unreadable file
    is skipped: its item runs again)."""
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out[path.stem] = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
    return out


#: Version of how an answer becomes a scored program (``raydist.problems.evaluate``); a change
#: that can move a score bumps it, so a resumed run scores its items again (the model's
#: answers come back from the request cache).
SCORING_VERSION = 3


def completion_key(model: str, item_id: str, n: int, temperature: float, max_tokens: int) -> str:
    """24 hex chars naming one (model, item, sampling, ``SCORING_VERSION``) evaluation."""
    return stable_hash({"model": model, "item": item_id, "n": n, "t": temperature, "max": max_tokens,
                        "scoring": SCORING_VERSION}, 24)


class RunDirMismatch(ValueError):
    """The run directory holds variants made under other generation settings."""


#: Generation settings a variant depends on beyond its id (seed problem, generation seed,
#: generator): a run directory keeps one set of them.
RUN_SETTINGS = ("domains", "scenarios", "temperature", "seed")


def run_settings(job: "ProblemsJob") -> dict:
    """What the variants of ``job``'s run directory depend on besides their ids: the
    generation settings of ``RUN_SETTINGS``, the agents' prompt templates (a digest) and the
    seed source."""
    from raydist.problems.agents import load_dyc_prompts

    prompts = load_dyc_prompts(job.generation["prompts_dir"])
    return {**{k: job.generation[k] for k in RUN_SETTINGS}, "dataset": job.dataset,
            "source": None if job.source is None else str(job.source),
            "prompts": stable_hash(asdict(prompts), 16)}


def check_run_dir(job: "ProblemsJob") -> None:
    """Record ``run_settings`` in ``<run_dir>/settings.json`` on the first launch; on a later
    one, refuse to mix: finished variants made under other settings would be reused as if
    they were this launch's.

    Raises RunDirMismatch naming the settings that differ and what to do.
    """
    path = job.run_dir / "settings.json"
    settings = run_settings(job)
    if path.is_file():
        try:
            before = json.loads(path.read_text())
        except json.JSONDecodeError:
            before = None
        if isinstance(before, dict) and before != settings:
            changed = sorted(k for k in settings.keys() | before.keys() if settings.get(k) != before.get(k))
            raise RunDirMismatch(
                f"{job.run_dir} holds variants made with other settings ({', '.join(changed)} differ); choose "
                "another output_root for these settings, or remove that run directory to start over")
        if isinstance(before, dict):
            return
    write_json(path, settings)


def current_records(job: "ProblemsJob", problems: list) -> tuple[list[dict], list[dict]]:
    """The variant and completion records of the run directory that belong to this launch's
    configuration: variants of these seed problems with generation seeds
    ``0..variants_per_seed-1`` by the configured generator, completions of the configured
    models whose key matches the configured sampling and ``SCORING_VERSION``. Records left by
    an earlier configuration stay on disk (a later launch may use them again) but are not
    reported."""
    gen, ev = job.generation, job.evaluation
    wanted = {_vid(p, g, gen["model"]) for p in problems for g in range(int(gen["variants_per_seed"]))}
    variants = [v for k, v in read_json_dir(job.run_dir / "variants").items() if k in wanted]
    models = set(ev["models"])
    completions = [c for k, c in read_json_dir(job.run_dir / "completions").items()
                   if c.get("model") in models and k == completion_key(c["model"], c["item_id"], int(ev["n"]),
                                                                       float(ev["temperature"]), int(ev["max_tokens"]))]
    return variants, completions


# --- stages (plain Python; the Ray tasks below only call these) ---------------------------

def build_llm(endpoint, *, model: str, temperature: float, cache_dir: Path, log: list | None = None,
              requests: dict | None = None):
    """A ``RecordedLLM`` on ``endpoint`` (``raydist.models.ModelEndpoint``): litellm with
    retries, answers cached under ``cache_dir`` by request. A request for ``max_tokens`` may
    take ``timeout_base_s + max_tokens / min_tokens_per_s`` seconds (``requests``; defaults
    120 s and 4 tokens/s), so a 1024-token rewrite from a slow CPU server is waited for."""
    from raydist.models.completion import litellm_complete
    from raydist.problems.llm import RecordedLLM

    requests = requests or {}
    complete = litellm_complete(endpoint, temperature=temperature, timeout=float(requests.get("timeout_base_s", 120)),
                                min_tokens_per_s=float(requests.get("min_tokens_per_s", 4)))
    return RecordedLLM(complete, model=model, cache_dir=cache_dir, log=log)


def generate_one(problem, scenario_pool: list[str], seed: int, endpoint, gen: dict, cache_dir: str,
                 requests: dict | None = None) -> dict:
    """One variant record (``Variant`` as a dict plus its LLM ``calls``) for ``problem`` and
    generation seed ``seed``."""
    from raydist.problems.agents import load_dyc_prompts
    from raydist.problems.generate import generate_variant

    llm = build_llm(endpoint, model=gen["model"], temperature=float(gen["temperature"]),
                    cache_dir=Path(cache_dir) / "llm", requests=requests)
    variant = generate_variant(llm, problem, scenario_pool, seed, load_dyc_prompts(gen["prompts_dir"]))
    return {"variant": _variant_dict(variant), "calls": llm.calls}


def evaluate_one(item, endpoint, model: str, ev: dict, limits: dict, cache_dir: str, docker_host, image: str,
                 workers: int = 1, requests: dict | None = None) -> dict:
    """n completions of ``item`` by ``model``, each scored in the sandbox: a record with one
    entry per sample (``passed``, ``status``, ``seconds``, ``solution``) and the LLM calls; a
    failed model call is recorded as the record's ``error`` (never dropped)."""
    from raydist.problems.evaluate import extract_solution, program_for, sample
    from raydist.problems.execute import ExecLimits, ProgramRunner
    from raydist.problems.llm import LLMCallFailed
    from raydist.sandbox import connect

    llm = build_llm(endpoint, model=model, temperature=float(ev["temperature"]), cache_dir=Path(cache_dir) / "llm",
                    requests=requests)

    def complete(messages, *, seed, max_tokens, grammar=None):
        return llm("solve", messages, seed=seed, max_tokens=max_tokens, grammar=grammar, problem_id=item.item_id)

    record = {"model": model, "item_id": item.item_id, "seed_id": item.seed_id, "variant_id": item.variant_id,
              "n": int(ev["n"]), "samples": [], "error": None}
    try:
        answers = sample(complete, item, n=int(ev["n"]), max_tokens=int(ev["max_tokens"]), seed=0)
    except LLMCallFailed as exc:
        record["error"] = str(exc)
        record["calls"] = llm.calls
        return record
    solutions = [extract_solution(a, item.prompt, item.entry_point) for a in answers]
    with ProgramRunner(connect(docker_host), image, limits=ExecLimits(**limits), workers=workers) as runner:
        results = runner.run_many([program_for(item, s) for s in solutions])
    record["samples"] = [{"passed": r.passed, "status": r.status, "seconds": round(r.seconds, 3), "solution": s}
                         for r, s in zip(results, solutions)]
    record["calls"] = llm.calls
    return record


def canonical_check(variants: list[dict], docker_host, image: str, limits: dict, workers: int = 1) -> list[bool]:
    """Whether each variant's canonical solution passes the variant's tests in the sandbox
    (a variant keeps the seed's tests and canonical solution, so this must hold, §3.2)."""
    from raydist.problems.evaluate import Item, program_for
    from raydist.problems.execute import ExecLimits, ProgramRunner
    from raydist.sandbox import connect

    programs = [program_for(Item(v["seed_id"], v["variant_id"], v["prompt"] or "", v["entry_point"],
                                 tuple(v["tests"]), v["test_setup"]), v["canonical_solution"]) for v in variants]
    if not programs:
        return []
    with ProgramRunner(connect(docker_host), image, limits=ExecLimits(**limits), workers=workers) as runner:
        return [r.passed for r in runner.run_many(programs)]


def _variant_dict(variant) -> dict:
    data = asdict(variant)
    data["tests"] = list(data["tests"])
    return data


# --- the launch -----------------------------------------------------------------------------

def run_problems(job: ProblemsJob, problems: list) -> dict:
    """Run ``job`` on ``problems`` (seed ``Problem``s): every stage the pipeline setting
    asks for, resuming from the run directory. Returns the summary numbers it printed."""
    from raydist.cluster.runner import RayOptions, init_ray, interrupt_on_signals
    from raydist.sandbox import connect, ensure_base_image

    run_dir, cache = job.run_dir, str(job.cache_dir / "problems")
    check_run_dir(job)
    client = connect(job.docker_host)
    image = ensure_base_image(client, job.base_image)
    init_ray(RayOptions(**job.ray))
    interrupt_on_signals()  # the launcher keeps every finished item and says how to resume
    limits = {k: job.execution[k] for k in ("cpu_seconds", "wall_seconds", "memory_mb", "max_processes")}
    workers = int(job.execution.get("workers", 1))
    if job.pipeline in ("full", "generate"):
        _generate(job, problems, cache)
        todo = [v for v in current_records(job, problems)[0] if v["accepted"] and v.get("canonical_passed") is None]
        for variant, ok in zip(todo, canonical_check(todo, job.docker_host, image, limits, workers)):
            variant["canonical_passed"] = ok
            write_json(run_dir / "variants" / f"{variant['variant_id']}.json", variant)
    if job.pipeline == "evaluate" and not current_records(job, problems)[0]:
        print(f"note: {run_dir / 'variants'} holds no variants of these settings: run pipeline=generate (or full) "
              "first; evaluating the seed problems only", flush=True)
    if job.pipeline in ("full", "evaluate"):
        _evaluate(job, problems, cache, image, limits)
    from raydist.problems.report import report

    return report(job, problems)


def _serve(job: ProblemsJob, model: str):
    from raydist.cluster.serving import serve_model

    return serve_model(model, job.local_models.get(model))


def _generate(job: ProblemsJob, problems: list, cache: str) -> None:
    import ray

    from raydist.problems.agents import load_dyc_prompts, propose_scenarios

    gen = job.generation
    folder = job.run_dir / "variants"
    # A variant whose LLM call failed stays recorded, and is generated again on resume.
    done = {k: v for k, v in read_json_dir(folder).items() if not v.get("error")}
    seeds = range(int(gen["variants_per_seed"]))
    todo = [(p, g) for p in problems for g in seeds if _vid(p, g, gen["model"]) not in done]
    print(f"generation: {len(problems)} seed problems x {len(seeds)} generation seeds, {len(done)} variants "
          f"finished before, {len(todo)} to generate with {gen['model']}", flush=True)
    if not todo:
        return
    with _serve(job, gen["model"]) as endpoint:
        pool_path = job.run_dir / "scenarios.json"
        if pool_path.exists():
            pool = json.loads(pool_path.read_text())
        else:
            llm = build_llm(endpoint, model=gen["model"], temperature=float(gen["temperature"]),
                            cache_dir=Path(cache) / "llm", requests=job.requests)
            from raydist.problems.llm import LLMCallFailed

            try:
                proposed = propose_scenarios(llm, list(gen["domains"]), int(gen["scenarios"]), int(gen["seed"]),
                                             prompts=load_dyc_prompts(gen["prompts_dir"]))
            except LLMCallFailed as exc:  # recorded in llm.calls; the pool keeps the seed domains
                print(f"scenario proposer failed (proposed again next launch): {exc}"[:400], flush=True)
                proposed = None
            # The pool grows from the seed domains (§3.2): they are its first scenarios.
            pool = list(dict.fromkeys([*gen["domains"], *(proposed or [])]))
            if proposed is not None:
                write_json(pool_path, pool)
            _append_calls(job.run_dir, llm.calls)
            print(f"scenario pool: {len(pool)} scenarios ({len(proposed or [])} proposed by {gen['model']})",
                  flush=True)
        task = ray.remote(max_retries=0)(generate_one).options(num_cpus=job.ray.get("cpus_per_unit", 0.5))
        _fan_out(task, todo, lambda pg: (pg[0], pool, pg[1], endpoint, gen, cache, job.requests),
                 lambda out: (write_json(folder / f"{out['variant']['variant_id']}.json", out["variant"]),
                              _append_calls(job.run_dir, out["calls"])),
                 int(job.ray.get("max_concurrency", 2)), "variants")


def _evaluate(job: ProblemsJob, problems: list, cache: str, image: str, limits: dict) -> None:
    import ray

    from raydist.problems.evaluate import Item

    ev = job.evaluation
    variants = [v for v in current_records(job, problems)[0] if v["accepted"] and v.get("canonical_passed")]
    items = [Item(p.problem_id, None, p.prompt, p.entry_point, tuple(p.tests), p.test_setup) for p in problems]
    items += [Item(v["seed_id"], v["variant_id"], v["prompt"], v["entry_point"], tuple(v["tests"]), v["test_setup"])
              for v in variants]
    folder = job.run_dir / "completions"
    done = {k: v for k, v in read_json_dir(folder).items() if not v.get("error")}
    for model in ev["models"]:
        keys = {i.item_id: completion_key(model, i.item_id, int(ev["n"]), float(ev["temperature"]),
                                          int(ev["max_tokens"])) for i in items}
        todo = [i for i in items if keys[i.item_id] not in done]
        print(f"evaluation of {model}: {len(items)} prompts ({len(problems)} seeds, {len(variants)} variants) x "
              f"n={ev['n']}, {len(items) - len(todo)} finished before, {len(todo)} to run", flush=True)
        if not todo:
            continue
        with _serve(job, model) as endpoint:
            task = ray.remote(max_retries=0)(evaluate_one).options(num_cpus=job.ray.get("cpus_per_unit", 0.5))

            def store(out: dict) -> None:
                _append_calls(job.run_dir, out.pop("calls", []))
                write_json(folder / f"{keys[out['item_id']]}.json", out)

            _fan_out(task, todo, lambda i: (i, endpoint, model, ev, limits, cache, job.docker_host, image,
                                              int(job.execution.get("workers", 1)), job.requests), store,
                     int(job.ray.get("max_concurrency", 2)), f"completions of {model}")


def _vid(problem, seed: int, model: str) -> str:
    from raydist.problems.generate import variant_id

    return variant_id(problem.problem_id, seed, model)


def _fan_out(task, items: list, args_of: Callable[[Any], tuple], on_result: Callable[[dict], Any], limit: int,
             label: str) -> None:
    """Run ``task.remote(*args_of(item))`` for each item with at most ``limit`` in flight
    (``raydist.cluster.runner.run_bounded``) under a progress bar; ``on_result`` gets each
    result the moment it arrives; a task that fails is reported and skipped (its item runs
    again on the next launch)."""
    from tqdm import tqdm

    from raydist.cluster.runner import run_bounded

    with tqdm(total=len(items), desc=label, unit="item", mininterval=1.0) as bar:
        def finished(_item, result, error):
            if error is None:
                try:
                    on_result(result)
                except Exception as exc:  # noqa: BLE001 - reported; the item runs again on resume
                    error = f"{type(exc).__name__}: {exc}"
            if error is not None:
                print(f"  {label}: a task failed: {error}"[:500], flush=True)
            bar.update(1)

        run_bounded(task, items, args_of, limit, finished)


def _append_calls(run_dir: Path, calls: Iterable[dict]) -> None:
    """Append LLM call records to ``llm_calls.jsonl`` (every call, failed ones included)."""
    calls = list(calls)
    if calls:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / "llm_calls.jsonl", "a") as handle:
            handle.writelines(json.dumps(c, sort_keys=True, default=str) + "\n" for c in calls)
