"""The work of one item, as plain functions the phases hand to Ray tasks: one variant, one
canonical check, n scored completions of one prompt. They take their inputs as arguments and
return a record; nothing here reads or writes the run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from raydist.cluster.scheduler import run_bounded
from raydist.models.completion import litellm_complete
from raydist.problems.agents import load_dyc_prompts
from raydist.problems.config import Evaluation, Generation, Requests
from raydist.problems.evaluate import Item, extract_solution, program_for, sample
from raydist.problems.execute import ExecLimits, ProgramRunner
from raydist.problems.generate import generate_variant
from raydist.problems.llm import LLMCallFailed, RecordedLLM
from raydist.sandbox import connect

if TYPE_CHECKING:  # annotations only: the endpoint module loads litellm
    from raydist.models.endpoint import ModelEndpoint

__all__ = ["build_llm", "canonical_check", "evaluate_one", "fan_out", "generate_one", "item_of"]


def build_llm(endpoint: ModelEndpoint, *, model: str, temperature: float, cache, log: list | None = None,
              requests: Requests | None = None):
    """A ``RecordedLLM`` on ``endpoint`` (``raydist.models.ModelEndpoint``): litellm with
    retries, answers cached in ``cache`` by request (``RecordedLLM``'s ``cache``: the job's
    ``ProblemsJob.answers()`` on the driver, its ``HostedCache`` in a task). A request for ``max_tokens`` may
    take ``timeout_base_s + max_tokens / min_tokens_per_s`` seconds (``requests``), so a
    1024-token rewrite from a slow CPU server is waited for."""
    requests = requests or Requests()
    complete = litellm_complete(endpoint, temperature=temperature, timeout=float(requests.timeout_base_s),
                                min_tokens_per_s=float(requests.min_tokens_per_s))
    return RecordedLLM(complete, model=model, cache=cache, log=log)


def generate_one(problem, scenario_pool: list[str], seed: int, endpoint: ModelEndpoint, gen: Generation, cache,
                 requests: Requests | None = None) -> dict:
    """One variant record (``Variant`` as a dict plus its LLM ``calls``) for ``problem`` and
    generation seed ``seed``: contexts, rewrite and the validator's verdicts (§3.2). ``cache``
    holds the answers (``raydist.cluster.cache_host.HostedCache`` in a Ray task)."""
    llm = build_llm(endpoint, model=gen.model, temperature=float(gen.temperature), cache=cache, requests=requests)
    variant = generate_variant(llm, problem, scenario_pool, seed, load_dyc_prompts(gen.prompts_dir))
    data = asdict(variant)
    data["tests"] = list(data["tests"])
    return {"variant": data, "calls": llm.calls}


def item_of(variant):
    """The evaluation ``Item`` of a ``Variant`` (its prompt, the seed's tests)."""
    return Item(variant.seed_id, variant.variant_id, variant.prompt or "", variant.entry_point, tuple(variant.tests),
                variant.test_setup)


def canonical_check(variants: list, sandbox_at: tuple[str, str | None], image: str, limits: dict,
                    workers: int = 1) -> list[bool]:
    """Whether each ``Variant``'s canonical solution passes the variant's tests in the sandbox
    (a variant keeps the seed's tests and canonical solution, so this must hold, §3.2);
    ``sandbox_at`` is ``(provider, address)`` (``raydist.sandbox.connect``)."""
    programs = [program_for(item_of(v), v.canonical_solution) for v in variants]
    if not programs:
        return []
    with ProgramRunner(connect(*sandbox_at), image, limits=ExecLimits(**limits), workers=workers) as runner:
        return [r.passed for r in runner.run_many(programs)]


def evaluate_one(item, endpoint: ModelEndpoint, model: str, ev: Evaluation, limits: dict, cache,
                 sandbox_at: tuple[str, str | None], image: str, workers: int = 1,
                 requests: Requests | None = None) -> dict:
    """n completions of ``item`` by ``model``, each scored in the sandbox: a record with one
    entry per sample (``passed``, ``status``, ``seconds``, ``solution``) and the LLM calls; a
    failed model call is recorded as the record's ``error`` (never dropped)."""
    llm = build_llm(endpoint, model=model, temperature=float(ev.temperature), cache=cache, requests=requests)

    def complete(messages, *, seed, max_tokens, grammar=None):
        return llm("solve", messages, seed=seed, max_tokens=max_tokens, grammar=grammar, problem_id=item.item_id)

    record: dict[str, Any] = {"model": model, "item_id": item.item_id, "seed_id": item.seed_id,
                              "variant_id": item.variant_id, "n": int(ev.n), "samples": [], "error": None}
    try:
        answers = sample(complete, item, n=int(ev.n), max_tokens=int(ev.max_tokens), seed=0)
    except LLMCallFailed as exc:
        record["error"] = str(exc)
        record["calls"] = llm.calls
        return record
    solutions = [extract_solution(a, item.prompt, item.entry_point) for a in answers]
    with ProgramRunner(connect(*sandbox_at), image, limits=ExecLimits(**limits), workers=workers) as runner:
        results = runner.run_many([program_for(item, s) for s in solutions])
    record["samples"] = [{"passed": r.passed, "status": r.status, "seconds": round(r.seconds, 3), "solution": s}
                         for r, s in zip(results, solutions)]
    record["calls"] = llm.calls
    return record


def fan_out(function: Callable, items: list, args_of: Callable[[Any], tuple], on_result: Callable[[dict], Any],
            *, limit: int, cpus: float, label: str, stop: Callable[[], Any] | None = None) -> list:
    """Run ``function(*args_of(item))`` as a Ray task for each item, at most ``limit`` in
    flight (``raydist.cluster.scheduler.run_bounded``), under a progress bar; ``on_result`` gets
    each result the moment it arrives; a task that fails is reported and skipped (its item
    runs again on the next launch). ``stop()`` true (a spent budget) keeps the remaining items
    from starting; returns those (they run on the next launch)."""
    import ray
    from tqdm import tqdm

    task = ray.remote(max_retries=0)(function).options(num_cpus=cpus)
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

        left = run_bounded(task, items, args_of, limit, finished, stop=stop)
    if left:
        print(f"  {label}: {len(left)} not started: budget spent", flush=True)
    return left
