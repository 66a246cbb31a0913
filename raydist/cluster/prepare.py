"""View preparation: the LLM and test-gate work of L1 and L4, done once per (instance, seed).

L1 (SchrodingerRepo §III-B) needs a verified paraphrase of the problem statement and L4
(§III-E) needs rewrites of the functions around the gold patch that pass a test gate in the
instance container. Both are computed here, before any agent runs, and cached on disk by a
key that hashes the instance, the seed, the view options, the prompt files and the view
model, so every level and agent that shares an (instance, seed) shares one preparation and
a second launch spends nothing. What comes out is a plain JSON record, turned into
``raydist.views.Prepared`` for ``build_view``.

A failure of the model server or of Docker raises ``PreparationError`` (an
``InfrastructureError``): nothing is cached and the units that needed it record an
infrastructure error, so they run again on resume; any other exception of a preparation is
classified by ``raydist.outcomes.classify_exception`` (a raydist ``bug``, usually) and the
units record that.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raydist._util.hashing import stable_hash
from raydist._util.protocols import Complete
from raydist.outcomes import InfrastructureError
from raydist.prompts import resolve_prompts_dir
from raydist.views import Prepared, RepoFiles, ViewOptions, levels_needing


#: Part of every cache key, per kind: raise one when a change makes that kind's records wrong.
PREPARATION_VERSION = {"L1": 5, "L4": 4}


class PreparationError(InfrastructureError):
    """The model server or Docker failed while preparing a view (infrastructure: retried)."""

    default_cause = "view_preparation"


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
    digest = hashlib.sha256()
    for name in sorted(names):
        path = folder / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<absent>") + b"\0")
    return digest.hexdigest()[:16]


def task_key(task: PrepTask, instance, options: ViewOptions, model_identity: str) -> str:
    """24 hex chars naming one preparation's result: instance content, seed, kind, the view
    options it depends on, the prompt files' bytes and the view model's identity."""
    if task.kind == "L1":
        knobs = {"attempts": options.l1_attempts, "max_tokens": options.l1_max_tokens,
                 "prompts": _prompt_digest(options.prompts_dir, ("l1_paraphrase.j2", "l1_refine.j2", "l1_verify.j2"))}
    else:
        knobs = {"attempts": options.l4_llm_attempts,
                 "prompts": _prompt_digest(options.prompts_dir, ("l4_rewrite.j2", "l4_retry.j2"))}
    uses_model = task.kind == "L1" or options.l4_llm_attempts > 0
    return stable_hash({"version": PREPARATION_VERSION[task.kind], "instance": instance.content_hash(), "seed": task.seed,
                        "kind": task.kind, **knobs,
                        "model": model_identity if uses_model else None}, 24)


def with_preparation(units: Iterable, options: ViewOptions, model_identity: str) -> list:
    """``units`` (``RunUnit``s) whose level needs preparation get a ``config_hash`` that also
    covers what decides the prepared record (version, prompt files, attempts, view model), so
    a changed L1 prompt or a new preparation version runs those units again instead of
    reusing rows built on the old statements or rewrites. Other units are unchanged."""
    from dataclasses import replace

    from raydist.views import levels_needing

    out = []
    for unit in units:
        kinds = sorted(levels_needing(unit.level))
        if kinds:
            marks = [task_key(PrepTask("*", 0, kind), _NoInstance, options, model_identity) for kind in kinds]
            unit = replace(unit, config_hash=stable_hash([unit.config_hash, *marks]))
        out.append(unit)
    return out


class _NoInstance:
    """Stands for "any instance" in a preparation fingerprint (instance and seed are already
    part of a unit's key)."""

    @staticmethod
    def content_hash() -> str:
        return "*"


class PrepCache:
    """Preparation records as JSON files ``<root>/<key>.json``, written atomically."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def get(self, key: str) -> dict | None:
        """The record stored under ``key``, or None (also for an unreadable file, which is redone)."""
        path = self.root / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` under ``key`` (atomic rename; raises OSError on a full disk)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
        os.replace(tmp, self.root / f"{key}.json")


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


def prepare_statement(instance, seed: int, complete: Complete, options: ViewOptions) -> dict:
    """The L1 record of ``instance`` for ``seed``: ``{"text", "source", "attempts", "history"}``
    (``raydist.views.l1_statement.StatementResult`` as JSON), §III-B.

    Raises ``PreparationError`` when every attempt failed on the LLM call itself (a dead
    server must not be cached as "no paraphrase passed the verifier").
    """
    from raydist.views.l1.statement import load_l1_prompts, paraphrase_budget, reconstruct_statement

    prompts = load_l1_prompts(options.prompts_dir)
    budget = paraphrase_budget(instance.problem_statement, cap=options.l1_max_tokens)
    result = reconstruct_statement(instance.problem_statement, complete, attempts=options.l1_attempts,
                                   seed=seed, prompts=prompts, max_tokens=budget)
    record = json.loads(result.to_json())
    history = record.get("history") or []
    if record["source"] == "canonical" and history and all(h.get("error") for h in history):
        raise PreparationError(f"L1 for {instance.instance_id!r} seed {seed}: every LLM call failed; "
                               f"last: {history[-1]['error']}")
    return record


def view_model_complete(endpoint, options: ViewOptions) -> Complete:
    """The view model at ``endpoint`` (a ``ModelEndpoint``) as the ``complete`` of L1 and L4:
    a ``raydist.models.LitellmCompletion`` whose request for ``max_tokens`` may take
    ``options.request_timeout_base_s + max_tokens / options.request_min_tokens_per_s``
    seconds, with litellm_complete's default temperature and retries."""
    from raydist.models.completion import litellm_complete

    return litellm_complete(endpoint, timeout=options.request_timeout_base_s,
                            min_tokens_per_s=options.request_min_tokens_per_s)


def run_preparation(task: PrepTask, instance, options: ViewOptions, *, endpoint=None, docker_host=None,
                    base_image=None, cache_dir: str, limits: Mapping | None = None,
                    grading_timeout_s: float = 900) -> dict:
    """Compute one preparation record (plain Python; the Ray task in ``runner`` calls it).

    ``endpoint`` is the view model's ``ModelEndpoint`` (None: L4 uses only the deterministic
    rewriter; L1 cannot run). Raises ``PreparationError`` for infrastructure failures and
    ``ValueError`` when L1 has no model.
    """
    complete = None if endpoint is None else view_model_complete(endpoint, options)
    if task.kind == "L1":
        if complete is None:
            raise ValueError(f"L1 of {task.instance_id!r} needs a view model (view.model) and none is served")
        return prepare_statement(instance, task.seed, complete, options)
    from raydist.cluster.rewrites import docker_gate, prepare_rewrites
    from raydist.sandbox import Limits, connect, ensure_instance_image

    try:
        client = connect(docker_host)
        image = ensure_instance_image(client, instance.recipe, base_tag=base_image, cache_dir=Path(cache_dir))
    except Exception as exc:  # noqa: BLE001
        raise PreparationError(f"L4 of {task.instance_id!r}: instance image: {type(exc).__name__}: {exc}") from exc
    repo = RepoFiles(Path(image.repo_dir))
    gate = docker_gate(client, instance, image.tag, repo, limits=Limits(**(limits or {})),
                       timeout=grading_timeout_s)
    return prepare_rewrites(instance, task.seed, repo, options, gate, complete)


# --- driver side: what a launch prepares, and what each unit gets -----------------------

def prepare_views(job, units: list, view_endpoint) -> tuple[dict, dict]:
    """Compute (or read from the cache) every L1/L4 preparation ``units`` need, on Ray.

    ``job`` is a ``raydist.job.Job``; ``view_endpoint()`` starts (once) and returns the view
    model's endpoint.
    Returns ``(records, errors)`` keyed by ``(instance_id, seed, kind)``. The view model is
    served only when some preparation that needs it is not cached yet."""
    from raydist.cluster.runner import run_preparations
    from raydist.views import ViewOptions

    options = ViewOptions(**job.settings.view_options)
    cache = PrepCache(Path(job.settings.cache_dir) / "views")
    records: dict = {}
    errors: dict = {}
    pending = []
    keys = {}
    for task in preparation_tasks(units):
        key = task_key(task, job.instances[task.instance_id], options, job.view_model_identity)
        keys[task] = key
        record = cache.get(key)
        if record is None:
            pending.append(task)
        else:
            records[(task.instance_id, task.seed, task.kind)] = record
    if not pending:
        return records, errors
    needs_model = any(t.kind == "L1" for t in pending) or options.l4_llm_attempts > 0
    print(f"preparing {len(pending)} views (L1 paraphrases, L4 rewrites with their test gate)"
          + (f" with view model {options.model}" if needs_model else ""), flush=True)
    endpoint = view_endpoint() if needs_model else None

    def on_record(task, record, failure):
        where = (task.instance_id, task.seed, task.kind)
        if failure is not None:
            errors[where] = failure
            print(f"  {task.kind} {task.instance_id} seed {task.seed}: FAILED ({failure['outcome']}): "
                  f"{failure['error'].splitlines()[0][:200]}", flush=True)
            return
        cache.put(keys[task], record)
        records[where] = record
        print(f"  {task.kind} {task.instance_id} seed {task.seed}: {describe_record(task.kind, record)}", flush=True)

    run_preparations(pending, job.instances, options, endpoint, job.settings, job.ray, on_record)
    return records, errors


def describe_record(kind: str, record: dict) -> str:
    if kind == "L1":
        return f"{record['source']} after {record['attempts']} attempt(s)"
    sources = [f["source"] for f in record["functions"].values()]
    return (f"{len(record['files'])} file(s) rewritten; functions: "
            + (", ".join(f"{sources.count(s)} {s}" for s in ("llm", "deterministic", "unchanged") if s in sources)
               or "none enclose the gold patch"))


def prepared_of(unit, records: dict, errors: dict) -> tuple[Prepared | None, dict | None]:
    """``(Prepared, None)`` for ``unit`` from ``records``, or ``(None, failure)`` when a
    preparation it needs failed: ``errors`` (keyed like ``records``) holds
    ``{"outcome", "error_cause", "error"}``, and the failure returned names the kind in its
    ``error``."""
    needed = {}
    for kind in sorted(levels_needing(unit.level)):
        where = (unit.instance_id, unit.seed, kind)
        if where in errors:
            failure = errors[where]
            return None, {**failure, "error": f"{kind} view preparation failed: {failure['error']}"}
        needed[kind] = records.get(where)
    return prepared_for(unit.level, needed), None


def failure_row(unit, failure: dict) -> dict:
    """The result row of ``unit`` ended by a preparation ``failure`` (see ``prepared_of``)."""
    from raydist.cluster.runner import error_row

    return error_row(unit, failure["error"], outcome=failure["outcome"], cause=failure["error_cause"])


def attach_prepared(job, units: list, records: dict, errors: dict, store, written: list):
    """``({key: Prepared}, runnable units)``; a unit whose preparation failed gets that
    failure's error row (written to ``store`` and appended to ``written``) instead."""
    prepared, runnable = {}, []
    for unit in units:
        value, failure = prepared_of(unit, records, errors)
        if failure is not None:
            row = failure_row(unit, failure)
            store.write_row(row)
            written.append(row)
            continue
        prepared[unit.key] = value
        runnable.append(unit)
    return prepared, runnable
