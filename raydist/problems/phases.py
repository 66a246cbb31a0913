"""The phases of a DyCodeEval launch that make things, each a function from frozen inputs to a
frozen output (§3.2, §5)::

    seeds(job) -> Seeds
    generate(job, seeds) -> Generated          scenario pool; contexts, rewrite, validator verdicts
    validate(job, generated, image) -> Validated   canonical solution on each accepted variant
    execute(job, seeds, validated, image) -> Executed  n scored completions per prompt and model

Each phase keeps one record per finished item in its own folder of the run directory
(``raydist.problems.records``), reads back only those (a re-run skips finished items) and
returns every record of this launch's configuration. With ``run=False`` a phase only loads its
records (``pipeline=generate`` executes nothing, ``pipeline=evaluate`` generates nothing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from raydist._util.files import atomic_write_json
from raydist._util.hashing import stable_hash
from raydist.cluster.cache_host import host_cache
from raydist.cluster.serving import serve_model
from raydist.grading.environment import GRADING_ENV
from raydist.problems.agents import load_dyc_prompts, propose_scenarios
from raydist.problems.evaluate import Item
from raydist.problems.generate import Variant, variant_id
from raydist.problems.job import ProblemsJob
from raydist.problems.llm import LLMCallFailed
from raydist.problems.records import RecordStore, append_calls, completion_key
from raydist.problems.seeds import MalformedProblem, Problem, load_seeds
from raydist.problems.work import build_llm, canonical_check, evaluate_one, fan_out, generate_one, item_of

if TYPE_CHECKING:  # annotations only: the endpoint module loads litellm
    from raydist.models.endpoint import ModelEndpoint

__all__ = ["Executed", "Generated", "ProblemsError", "Seeds", "Validated", "execute", "generate", "seeds",
           "validate"]


class ProblemsError(Exception):
    """A configuration or input problem; the message names it and what to do."""


@dataclass(frozen=True)
class Seeds:
    """The seed problems of the launch, in benchmark order."""

    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Generated:
    """Variant records of this configuration (seed problems x generation seeds ``0..N-1`` by the
    configured generator; failed attempts included), in id order; ``pool`` is the stored
    scenario pool, None when none was stored (the proposer failed or never ran)."""

    variants: tuple[Variant, ...]
    pool: tuple[str, ...] | None
    not_started: tuple[dict, ...] = ()  # kept from starting by a spent budget (``name``, ``key``)


@dataclass(frozen=True)
class Validated:
    """The variants of :class:`Generated` with ``canonical_passed`` filled for every checked
    accepted variant (None: not checked)."""

    variants: tuple[Variant, ...]


@dataclass(frozen=True)
class Executed:
    """Completion records of the configured models and sampling, in key order: ``model``,
    ``item_id``, ``seed_id``, ``variant_id``, ``n``, ``samples`` (``passed``, ``status``,
    ``seconds``, ``solution``) and ``error`` (a failed model call, else None)."""

    completions: tuple[dict, ...]
    not_started: tuple[dict, ...] = ()  # kept from starting by a spent budget (``name``, ``key``)


def seeds(job: ProblemsJob) -> Seeds:
    """The selected seed problems. Raises ProblemsError for a malformed or empty selection."""
    bench = job.settings.benchmark
    try:
        problems = load_seeds(job.dataset, path=job.source, limit=job.limit, ids=None if job.ids is None
                              else list(job.ids))
    except (MalformedProblem, OSError, ValueError, NotImplementedError, RecursionError) as exc:
        raise ProblemsError(f"benchmark={bench['name']}: {exc}") from exc
    if not problems:
        raise ProblemsError(f"benchmark={bench['name']}: no seed problems selected (benchmark.limit={job.limit}, "
                            f"{job.source or job.dataset} holds none or the selection is empty)")
    return Seeds(tuple(problems))


def generate(job: ProblemsJob, seed_set: Seeds, *, run: bool = True, admission=None) -> Generated:
    """Generate the missing variants (a failed one is generated again) and return them all.
    With ``admission`` (``raydist.models.admission.Admission``) every call is booked under
    ``generation`` and no variant starts once the budget is spent."""
    gen = job.generation
    store = RecordStore(job.run_dir / "variants")
    records = store.load()
    pool_path = job.run_dir / "scenarios.json"
    wanted = [(p, g, variant_id(p.problem_id, g, gen.model)) for p in seed_set.problems
              for g in range(gen.variants_per_seed)]
    not_started: tuple[dict, ...] = ()
    if run:
        done = {k for k, v in records.items() if not v.get("error")}
        todo = [(p, g) for p, g, vid in wanted if vid not in done]
        print(f"generation: {len(seed_set.problems)} seed problems x {gen.variants_per_seed} generation seeds, "
              f"{len(done)} variants finished before, {len(todo)} to generate with {gen.model}", flush=True)
        if todo:
            with _serve(job, gen.model) as served:
                endpoint = served if admission is None else admission.attach(served, "generation")
                pool = _scenario_pool(job, endpoint)

                def store_variant(out: dict) -> None:
                    store.put(out["variant"]["variant_id"], out["variant"])
                    records[out["variant"]["variant_id"]] = out["variant"]
                    append_calls(job.run_dir, out["calls"])

                cache = hosted_answers(job)
                left = fan_out(generate_one, todo,
                               lambda pg: (pg[0], pool, pg[1], endpoint, gen, cache, job.requests),
                               store_variant, limit=job.ray.max_concurrency, cpus=job.ray.cpus_per_unit,
                               label="variants", stop=None if admission is None else admission.spent)
                not_started = tuple({"key": variant_id(p.problem_id, g, gen.model),
                                     "name": f"variant of {p.problem_id}, generation seed {g}"} for p, g in left)
    ids = sorted({vid for _, _, vid in wanted} & records.keys())
    stored = tuple(json.loads(pool_path.read_text())) if pool_path.is_file() else None
    return Generated(tuple(_variant(records[k]) for k in ids), stored, not_started)


def _scenario_pool(job: ProblemsJob, endpoint: ModelEndpoint) -> list[str]:
    """The stored pool, or a new one grown from the seed domains (§3.2; stored unless the
    proposer failed, so the next launch proposes again)."""
    gen, path = job.generation, job.run_dir / "scenarios.json"
    if path.exists():
        return json.loads(path.read_text())
    llm = build_llm(endpoint, model=gen.model, temperature=float(gen.temperature), cache=job.answers(),
                    requests=job.requests)
    try:
        proposed = propose_scenarios(llm, list(gen.domains), gen.scenarios, gen.seed,
                                     prompts=load_dyc_prompts(gen.prompts_dir))
    except LLMCallFailed as exc:  # recorded in llm.calls; the pool keeps the seed domains
        print(f"scenario proposer failed (proposed again next launch): {exc}"[:400], flush=True)
        proposed = None
    # The pool grows from the seed domains (§3.2): they are its first scenarios.
    pool = list(dict.fromkeys([*gen.domains, *(proposed or [])]))
    if proposed is not None:
        atomic_write_json(path, pool)
    append_calls(job.run_dir, llm.calls)
    print(f"scenario pool: {len(pool)} scenarios ({len(proposed or [])} proposed by {gen.model})", flush=True)
    return pool


def validate(job: ProblemsJob, generated: Generated, image: str | None, *, run: bool = True) -> Validated:
    """Run the canonical solution on the tests of every accepted variant not checked before."""
    store = RecordStore(job.run_dir / "checks")
    checks = store.load()
    digest = {v.variant_id: _check_digest(v) for v in generated.variants}
    todo = [v for v in generated.variants if v.accepted and checks.get(v.variant_id, {}).get("digest")
            != digest[v.variant_id]]
    if run and todo:
        limits, workers = job.execution.limits(), job.execution.workers
        for variant, ok in zip(todo, canonical_check(todo, job.sandbox_at, image, limits, workers)):
            checks[variant.variant_id] = {"digest": digest[variant.variant_id], "canonical_passed": ok}
            store.put(variant.variant_id, checks[variant.variant_id])
    passed = {k: c["canonical_passed"] for k, c in checks.items() if c.get("digest") == digest.get(k)}
    return Validated(tuple(replace(v, canonical_passed=passed.get(v.variant_id)) if v.accepted else v
                           for v in generated.variants))


def _check_digest(variant: Variant) -> str:
    """What a canonical check depends on: the variant's prompt, tests and canonical solution,
    and the environment programs run under (``raydist.grading.environment``)."""
    return stable_hash([variant.prompt, variant.entry_point, list(variant.tests), variant.test_setup,
                        variant.canonical_solution, dict(GRADING_ENV)], 16)


def execute(job: ProblemsJob, seed_set: Seeds, validated: Validated, image: str | None, *,
            run: bool = True, admission=None) -> Executed:
    """n completions of every seed problem and every accepted, canonical-checked variant by
    every model under test, each scored in the sandbox (a failed call is run again). With
    ``admission`` every call is booked under ``evaluation`` and no item starts once the
    budget is spent."""
    ev = job.evaluation
    variants = [v for v in validated.variants if v.accepted and v.canonical_passed]
    items = [Item(p.problem_id, None, p.prompt, p.entry_point, tuple(p.tests), p.test_setup)
             for p in seed_set.problems] + [item_of(v) for v in variants]
    store = RecordStore(job.run_dir / "completions")
    records = store.load()
    done = {k for k, v in records.items() if not v.get("error")}
    not_started: list[dict] = []
    for model in ev.models if run else ():
        keys = {i.item_id: completion_key(model, i.item_id, ev.n, float(ev.temperature), ev.max_tokens)
                for i in items}
        todo = [i for i in items if keys[i.item_id] not in done]
        print(f"evaluation of {model}: {len(items)} prompts ({len(seed_set.problems)} seeds, {len(variants)} "
              f"variants) x n={ev.n}, {len(items) - len(todo)} finished before, {len(todo)} to run", flush=True)
        if not todo:
            continue
        with _serve(job, model) as served:
            endpoint = served if admission is None else admission.attach(served, "evaluation")

            def store_completion(out: dict, keys=keys) -> None:
                append_calls(job.run_dir, out.pop("calls", []))
                store.put(keys[out["item_id"]], out)
                records[keys[out["item_id"]]] = out

            args = (ev, job.execution.limits(), hosted_answers(job), job.sandbox_at, image, job.execution.workers,
                    job.requests)
            left = fan_out(evaluate_one, todo,
                           lambda i, endpoint=endpoint, model=model, args=args: (i, endpoint, model, *args),
                           store_completion, limit=job.ray.max_concurrency, cpus=job.ray.cpus_per_unit,
                           label=f"completions of {model}", stop=None if admission is None else admission.spent)
            not_started += [{"key": keys[i.item_id], "name": f"completions of {i.item_id} by {model}"}
                            for i in left]
    current = {k: c for k, c in sorted(records.items()) if c.get("model") in ev.models and k == completion_key(
        c["model"], c["item_id"], ev.n, float(ev.temperature), ev.max_tokens)}
    return Executed(tuple(current.values()), tuple(not_started))


def hosted_answers(job: ProblemsJob):
    """The job's LLM answer cache (``ProblemsJob.answers``) served to Ray tasks on any node by
    an actor on the driver's node (``raydist.cluster.cache_host``)."""
    return host_cache(job.answers().storage)


def _variant(record: dict) -> Variant:
    fields = Variant.__dataclass_fields__
    return Variant(**{**{k: v for k, v in record.items() if k in fields}, "tests": tuple(record["tests"])})


def _serve(job: ProblemsJob, model: str):
    return serve_model(model, job.local_model(model))

