"""View preparation: the LLM and test-gate work of L1 and L4, done once per (instance, seed).

L1 (SchrodingerRepo §III-B) needs a verified paraphrase of the problem statement and L4
(§III-E) needs rewrites of the functions around the gold patch that pass a test gate in the
instance container. Both are computed here, before any agent runs, and cached on disk by a
key that hashes the instance, the seed, the view options, the prompt files and the view
model, so every level and agent that shares an (instance, seed) shares one preparation and
a second launch spends nothing. What comes out is a plain JSON record, turned into
``raydist.views.Prepared`` for ``build_view``.

The records are JSON files ``<key>.json`` of one folder (a ``raydist._util.storage.JsonCache``):
a path on the driver's disk (``<cache_dir>/views``) or a ``Storage`` (``<storage>/_cache/views``).
Only the driver reads and writes it: a preparation task returns its record, the driver stores
it (``raydist.cluster.execute.views``) and hands stored records to the units that need them,
so a record made on any node serves every later launch, on any node, without recomputing.

A failure of the model server or of Docker raises ``PreparationError`` (an
``InfrastructureError``): nothing is cached and the units that needed it record an
infrastructure error, so they run again on resume; any other exception of a preparation is
classified by ``raydist.outcomes.classify_exception`` (a raydist ``bug``, usually) and the
units record that.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from raydist._util.hashing import named_files_digest, stable_hash
from raydist._util.protocols import Complete
from raydist.cluster.errors import PreparationError
from raydist.cluster.failures import Failure
from raydist.cluster.rewrites import prepare_rewrites, rewrite_gate, with_passing_tests
from raydist.grading.official import has_eval_script, runner_for
from raydist.models.completion import litellm_complete
from raydist.outcomes import InputError
from raydist.prompts import resolve_prompts_dir
from raydist.sandbox import Limits, connect, ensure_instance_image
from raydist.sandbox.official import DEFAULT_NAMESPACE, ensure_official_image, official_repo_dir
from raydist.tasks.swe_qa import cited_functions, is_qa
from raydist.views import Prepared, RepoFiles, ViewOptions, levels_needing
from raydist.views.l1.statement import load_l1_prompts, paraphrase_budget, reconstruct_statement

#: Part of every cache key, per kind: raise one when a change makes that kind's records wrong.
PREPARATION_VERSION = {"L1": 6, "L4": 4}


@dataclass(frozen=True)
class PrepTask:
    """One preparation: ``kind`` is ``"L1"`` (statement) or ``"L4"`` (rewrites)."""

    instance_id: str
    seed: int
    kind: str


def preparation_tasks(units: Iterable) -> list[PrepTask]:
    """The distinct preparations ``units`` (``RunUnit``s) need, in first-use order."""
    seen: dict[PrepTask, None] = {}
    for unit in units:
        for kind in sorted(levels_needing(unit.level)):
            seen.setdefault(PrepTask(unit.instance_id, unit.seed, kind), None)
    return list(seen)


def _prompt_digest(prompts_dir: str, names: Iterable[str]) -> str:
    folder = resolve_prompts_dir(prompts_dir)  # the folder the loaders read, whatever the working directory
    return named_files_digest(folder, names)


def preparation_knobs(kind: str, options: ViewOptions) -> dict:
    """What of the view options and prompt files decides a record of ``kind`` (``L1``: attempts,
    token cap, the sha256 of its three prompt files; ``L4``: LLM attempts and its two prompt
    files), as ``task_key`` hashes it. Raises ``FileNotFoundError`` naming a missing prompt file."""
    if kind == "L1":
        return {"attempts": options.l1_attempts, "max_tokens": options.l1_max_tokens,
                "prompts": _prompt_digest(options.prompts_dir, ("l1_paraphrase.j2", "l1_refine.j2", "l1_verify.j2"))}
    return {"attempts": options.l4_llm_attempts,
            "prompts": _prompt_digest(options.prompts_dir, ("l4_rewrite.j2", "l4_retry.j2"))}


def task_key(task: PrepTask, instance, options: ViewOptions, model_identity: str,
             knobs: dict[str, dict] | None = None) -> str:
    """24 hex chars naming one preparation's result: instance content, seed, kind, the view
    options it depends on, the prompt files' bytes (``preparation_knobs`` of its kind, kept in
    ``knobs`` by kind on first use, so many tasks read the prompt files once) and the view
    model's identity. Raises ``FileNotFoundError`` naming a missing prompt file."""
    knobs = {} if knobs is None else knobs
    if task.kind not in knobs:
        knobs[task.kind] = preparation_knobs(task.kind, options)
    uses_model = task.kind == "L1" or options.l4_llm_attempts > 0
    return stable_hash({"version": PREPARATION_VERSION[task.kind], "instance": instance.content_hash(),
                        "seed": task.seed, "kind": task.kind, **knobs[task.kind],
                        "model": model_identity if uses_model else None}, 24)


def preparation_keys(tasks: Iterable[PrepTask], instances: Mapping, options: ViewOptions,
                     model_identity: str) -> dict[PrepTask, str]:
    """``tasks`` (in their order) with their cache keys (``task_key`` of each one's instance in
    ``instances``, by id; the prompt files read once per kind). Planned with the units
    (``raydist.cluster.unit_key.plan_units``), so a dry run and the executor name the same
    records."""
    knobs: dict[str, dict] = {}
    return {task: task_key(task, instances[task.instance_id], options, model_identity, knobs) for task in tasks}


class _AnyInstance:
    """Stands for "any instance" in a preparation fingerprint (instance and seed are already
    part of a unit's key: ``raydist.cluster.unit_key.plan_units``)."""

    @staticmethod
    def content_hash() -> str:
        return "*"


ANY_INSTANCE = _AnyInstance()


def prepared_for(level: str, records: Mapping[str, Mapping | None]) -> Prepared:
    """The ``Prepared`` inputs of ``level`` from its records (``{"L1": ..., "L4": ...}``)."""
    needs = levels_needing(level)
    statement = records.get("L1") if "L1" in needs else None
    rewrites = records.get("L4") if "L4" in needs else None
    return Prepared(
        statement=statement["text"] if statement else None,
        statement_source=statement["source"] if statement else None,
        statement_attempts=int(statement["attempts"]) if statement else 0,
        rewrites=dict(rewrites["files"]) if rewrites else None,
        rewrite_meta=dict(rewrites["functions"]) if rewrites else {},
    )


def prepare_statement(instance, seed: int, complete: Complete | None, options: ViewOptions) -> dict:
    """The L1 record of ``instance`` for ``seed``: ``{"text", "source", "attempts", "history"}``
    (``raydist.views.l1.statement.StatementResult`` as JSON), §III-B; ``complete`` None (no
    view model): the seeded rule restatement, unjudged.

    Raises ``PreparationError`` when every paraphrase attempt failed on the LLM call itself (a
    dead server must not be cached as "no paraphrase passed the verifier": the rule restatement
    would stand in for paraphrases the model never got to write).
    """
    prompts = load_l1_prompts(options.prompts_dir)
    budget = paraphrase_budget(instance.problem_statement, cap=options.l1_max_tokens)
    result = reconstruct_statement(instance.problem_statement, complete, attempts=options.l1_attempts,
                                   seed=seed, prompts=prompts, max_tokens=budget)
    record = json.loads(result.to_json())
    calls = [h for h in record.get("history") or [] if h.get("prompt") != "rule"]
    if record["source"] != "paraphrase" and calls and all(h.get("error") for h in calls):
        raise PreparationError(f"L1 for {instance.instance_id!r} seed {seed}: every LLM call failed; "
                               f"last: {calls[-1]['error']}")
    return record


def view_model_complete(endpoint, options: ViewOptions) -> Complete:
    """The view model at ``endpoint`` (a ``ModelEndpoint``) as the ``complete`` of L1 and L4:
    a ``raydist.models.LitellmCompletion`` whose request for ``max_tokens`` may take
    ``options.request_timeout_base_s + max_tokens / options.request_min_tokens_per_s``
    seconds, with litellm_complete's default temperature and retries."""
    return litellm_complete(endpoint, timeout=options.request_timeout_base_s,
                            min_tokens_per_s=options.request_min_tokens_per_s)


def run_preparation(task: PrepTask, instance, options: ViewOptions, *, cache_dir: str, grading_timeout_s: float,
                    endpoint=None, provider: str = "docker", docker_host=None, base_image=None,
                    limits: Limits | None = None, image_namespace: str = DEFAULT_NAMESPACE) -> dict:
    """Compute one preparation record (plain Python; the Ray task in ``scheduler`` calls it).

    ``endpoint`` is the view model's ``ModelEndpoint`` (None: L4 uses only the deterministic
    rewriter, L1 only the rule restatement); ``provider`` and ``docker_host`` name the sandbox
    (``sandbox.provider``, ``sandbox.docker_host``: ``raydist.sandbox.connect``);
    ``grading_timeout_s`` bounds each L4 test-gate run, in seconds.
    L4's gate runs the instance's tests through the test-execution service
    (``raydist.grading.runner_for``): pytest + junit on raydist's image of a recipe row, swebench's
    eval script on an official 5.x row's own image (the row's ``image``, else its name under
    ``image_namespace``). Raises ``PreparationError`` for infrastructure failures (an image that
    cannot be had included), ``InputError`` (cause ``l4_needs_recipe``) for a row with neither a
    recipe nor an eval script, and ``ValueError`` when L1 has no model.
    """
    complete = None if endpoint is None else view_model_complete(endpoint, options)
    if task.kind == "L1":
        return prepare_statement(instance, task.seed, complete, options)
    client, tag, repo = _l4_image(task, instance, cache_dir=cache_dir, sandbox_at=(provider, docker_host),
                                  base_image=base_image, namespace=image_namespace)
    runner = runner_for(client, instance, tag, timeout=grading_timeout_s, limits=limits or Limits())
    targets = None
    if is_qa(instance):  # no gold patch and no PASS_TO_PASS: the cited functions, gated by the passing tests
        instance = with_passing_tests(runner, instance)
        targets = cited_functions(instance, repo)
    return prepare_rewrites(instance, task.seed, repo, options, rewrite_gate(runner, instance, repo), complete,
                            targets=targets)


def _l4_image(task: PrepTask, instance, *, cache_dir: str, sandbox_at: tuple[str, str | None], base_image,
              namespace: str) -> tuple:
    """``(provider, image tag, RepoFiles of its /testbed)`` L4 rewrites and gates on: raydist's
    image of the row's sdist recipe, or an official 5.x row's own image (``raydist.sandbox.official``)
    with its /testbed exported to the host. Raises ``InputError`` (cause ``l4_needs_recipe``) for a
    row with neither, ``PreparationError`` when the image cannot be had."""
    if instance.recipe is None and not has_eval_script(instance):
        raise InputError(f"L4 of {task.instance_id!r} needs a row with an sdist recipe or an official SWE-bench 5.x "
                         "row (image, eval_script): its rewrites are kept only when the instance's tests pass on "
                         "its image", cause="l4_needs_recipe")
    try:
        client = connect(*sandbox_at)
        if instance.recipe is None:
            tag = ensure_official_image(client, instance, namespace)
            return client, tag, RepoFiles(official_repo_dir(client, tag, Path(cache_dir)))
        image = ensure_instance_image(client, instance.recipe, base_tag=base_image, cache_dir=Path(cache_dir))
    except Exception as exc:  # noqa: BLE001
        raise PreparationError(f"L4 of {task.instance_id!r}: instance image: {type(exc).__name__}: {exc}") from exc
    return client, image.tag, RepoFiles(Path(image.repo_dir))


def describe_record(kind: str, record: dict) -> str:
    """One line on a preparation record, for the launch's log."""
    if kind == "L1":
        return f"{record['source']} after {record['attempts']} attempt(s)"
    sources = [f["source"] for f in record["functions"].values()]
    return (f"{len(record['files'])} file(s) rewritten; functions: "
            + (", ".join(f"{sources.count(s)} {s}" for s in ("llm", "deterministic", "unchanged") if s in sources)
               or "none enclose the gold patch"))


def prepared_of(unit, records: Mapping, errors: Mapping) -> tuple[Prepared | None, Failure | None]:
    """``(Prepared, None)`` for ``unit`` from ``records``, or ``(None, failure)`` when a
    preparation it needs failed: ``errors`` (keyed like ``records``, by ``(instance_id, seed,
    kind)``) holds ``raydist.cluster.failures.Failure``s, and the failure returned names the kind."""
    needed = {}
    for kind in sorted(levels_needing(unit.level)):
        where = (unit.instance_id, unit.seed, kind)
        if where in errors:
            return None, errors[where].prefixed(f"{kind} view preparation failed: ")
        needed[kind] = records.get(where)
    return prepared_for(unit.level, needed), None
