"""View preparation: the LLM and test-gate work of L1 and L4, done once per (instance, seed).

L1 (SchrodingerRepo §III-B) needs a verified paraphrase of the problem statement and L4
(§III-E) needs rewrites of the functions around the gold patch that pass a test gate in the
instance container. Both are computed here, before any agent runs, and cached on disk by a
key that hashes the instance, the seed, the view options, the prompt files and the view
model, so every level and agent that shares an (instance, seed) shares one preparation and
a second launch spends nothing. What comes out is a plain JSON record, turned into
``raydist.views.Prepared`` for ``build_view``.

A failure of the model server or of Docker raises ``PreparationError``: nothing is cached and
the units that needed it record an infrastructure error, so they run again on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raydist.cluster.plan import stable_hash
from raydist.views.base import Prepared, RepoFiles, ViewOptions, levels_needing

#: ``(files) -> (passed, feedback)``: runs the instance's tests with ``files`` (path -> text in
#: original coordinates) in place of the originals.
Gate = Callable[[Mapping[str, str]], "GateVerdict"]
#: ``(messages, *, seed, max_tokens, grammar) -> text``: one LLM call (raydist.models.completion).
Complete = Callable[..., str]


#: Part of every cache key: raise it when a change here makes earlier records wrong.
PREPARATION_VERSION = 4


class PreparationError(RuntimeError):
    """The model server or Docker failed while preparing a view (infrastructure: retried)."""


@dataclass(frozen=True)
class PrepTask:
    """One preparation: ``kind`` is ``"L1"`` (statement) or ``"L4"`` (rewrites)."""

    instance_id: str
    seed: int
    kind: str


@dataclass(frozen=True)
class GateVerdict:
    """The L4 test gate's answer: ``passed`` when every PASS_TO_PASS test passed and every
    FAIL_TO_PASS test still failed; ``feedback`` names the tests that broke the rule and ends
    with the tail of the test log (what a retry prompt shows the LLM)."""

    passed: bool
    feedback: str


def preparation_tasks(units: Iterable) -> list[PrepTask]:
    """The distinct preparations ``units`` (``RunUnit``s) need, in first-use order."""
    seen: dict[PrepTask, None] = {}
    for unit in units:
        for kind in sorted(levels_needing(unit.level)):
            seen.setdefault(PrepTask(unit.instance_id, unit.seed, kind), None)
    return list(seen)


def _prompt_digest(prompts_dir: str, names: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(names):
        path = Path(prompts_dir) / name
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
    return stable_hash({"version": PREPARATION_VERSION, "instance": instance.content_hash(), "seed": task.seed,
                        "kind": task.kind, **knobs,
                        "model": model_identity if uses_model else None}, 24)


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


# --- L1 ---------------------------------------------------------------------------------

def prepare_statement(instance, seed: int, complete: Complete, options: ViewOptions) -> dict:
    """The L1 record of ``instance`` for ``seed``: ``{"text", "source", "attempts", "history"}``
    (``raydist.views.l1_statement.StatementResult`` as JSON), §III-B.

    Raises ``PreparationError`` when every attempt failed on the LLM call itself (a dead
    server must not be cached as "no paraphrase passed the verifier").
    """
    from raydist.views.l1_statement import load_l1_prompts, paraphrase_budget, reconstruct_statement

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


# --- L4 ---------------------------------------------------------------------------------

def changed_line_ranges(patch: str, path: str) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of ``path``'s original that ``patch`` removes or inserts
    next to (a pure insertion counts as the line before it), one range per hunk."""
    from unidiff import PatchSet

    ranges = []
    for patched in PatchSet(patch):
        if patched.path != path:
            continue
        for hunk in patched:
            removed = [line.source_line_no for line in hunk if line.is_removed]
            if removed:
                ranges.append((min(removed), max(removed)))
                continue
            last_before = None
            for line in hunk:
                if line.is_added:
                    break
                if line.is_context:
                    last_before = line.source_line_no
            anchor = last_before or hunk.source_start
            ranges.append((anchor, anchor))
    return ranges


def rewrite_targets(instance, repo: RepoFiles) -> list[tuple[str, str]]:
    """``(path, qualname)`` of every function enclosing a hunk of the gold patch, §III-E.
    Files that do not parse contribute nothing."""
    from raydist.views.l4_rewrite import functions_enclosing_patch
    from raydist.views.recover import patched_paths

    targets = []
    for path in patched_paths(instance.patch):
        text = repo.read(path) if path.endswith(".py") else None
        if text is None:
            continue
        try:
            names = functions_enclosing_patch(text, changed_line_ranges(instance.patch, path))
        except SyntaxError:
            continue
        targets.extend((path, name) for name in names)
    return targets


def prepare_rewrites(instance, seed: int, repo: RepoFiles, options: ViewOptions, gate: Gate,
                     complete: Complete | None = None) -> dict:
    """The L4 record of ``instance`` for ``seed``: ``{"files": {path: text}, "functions":
    {"path::qualname": {"source", "attempts", "reason"}}}``, §III-E.

    For each function enclosing a gold hunk, up to ``options.l4_llm_attempts`` LLM rewrites
    (``raydist.views.l4_llm.propose_rewrite``), each through the static gate and then
    ``gate`` with every rewrite accepted so far; the gate's feedback goes into the next
    attempt. When none passes, the deterministic rewriter's output (seeded by ``seed``) goes
    through the same gate. A function neither passes keeps its original text
    (``source="unchanged"``). The last gate run covers the whole accepted set, so the files
    returned passed the gate together. Raises ``PreparationError`` when ``gate`` does.
    """
    from raydist.models.retry import ModelUnreachable
    from raydist.views.l4_rewrite import rewrite_function_source, same_interface

    files: dict[str, str] = {}
    functions: dict[str, dict] = {}
    prompts = None
    if complete is not None and options.l4_llm_attempts > 0:
        from raydist.views.l4_llm import load_l4_prompts

        prompts = load_l4_prompts(options.prompts_dir)
    for number, (path, qualname) in enumerate(rewrite_targets(instance, repo)):
        current = files.get(path) or repo.read(path)
        entry = {"source": "unchanged", "attempts": 0, "reason": None, "feedback": []}
        accepted = None
        feedback = previous = None
        for attempt in range(options.l4_llm_attempts if prompts is not None else 0):
            from raydist.views.l4_llm import propose_rewrite

            entry["attempts"] = attempt + 1
            try:
                proposal = propose_rewrite(current, qualname, complete, seed=seed * 1000 + number * 10 + attempt,
                                           feedback=feedback, previous=previous, prompts=prompts)
            except ModelUnreachable as exc:  # infrastructure: nothing may be cached
                raise PreparationError(f"L4 of {instance.instance_id!r}: {exc}") from exc
            except ValueError as exc:  # e.g. the name is defined twice: no LLM rewrite can be placed
                entry["feedback"].append(f"no LLM rewrite: {exc}"[:500])
                break
            except Exception as exc:  # noqa: BLE001 - any other failed call is a recorded attempt
                entry["feedback"].append(f"LLM call failed: {type(exc).__name__}: {exc}"[:500])
                continue
            previous = proposal.function_source
            if proposal.module_source is None:
                feedback = f"The rewrite was rejected before testing: {proposal.reason}"
                entry["feedback"].append(feedback[:500])
                continue
            verdict = gate({**files, path: proposal.module_source})
            if verdict.passed:
                accepted, entry["source"] = proposal.module_source, "llm"
                break
            feedback = verdict.feedback
            entry["feedback"].append(_clip(feedback))
        if accepted is None:
            candidate = rewrite_function_source(current, qualname, seed * 1000 + number)
            if candidate == current:
                entry["reason"] = "the deterministic rewriter found nothing safe to change"
            elif not same_interface(current, candidate, qualname):
                entry["reason"] = "the deterministic rewrite changed the interface"
            else:
                verdict = gate({**files, path: candidate})
                if verdict.passed:
                    accepted, entry["source"] = candidate, "deterministic"
                else:
                    entry["reason"] = f"the deterministic rewrite failed the test gate: {verdict.feedback[-300:]}"
        if accepted is not None:
            files[path] = accepted
        functions[f"{path}::{qualname}"] = entry
    return {"files": files, "functions": functions}


def _clip(text: str, head: int = 600, tail: int = 400) -> str:
    """``text`` cut to its head (which names the tests) and tail, for the cached record."""
    return text if len(text) <= head + tail else f"{text[:head]}\n[...]\n{text[-tail:]}"


def docker_gate(client, instance, image_tag: str, repo: RepoFiles, *, limits=None, timeout: float = 900) -> Gate:
    """The L4 test gate in ``instance``'s container (§III-E): the rewritten files are applied
    as a patch, the test patch is applied and ``test_cmd`` runs; it passes when every
    PASS_TO_PASS test passes and every FAIL_TO_PASS test still fails (the rewrite must
    neither break behaviour nor fix the bug). Raises ``PreparationError`` when the test run
    itself cannot happen (Docker, a patch that does not apply, a test timeout)."""
    from raydist.grading import grade
    from raydist.views.recover import recover_patch

    def run(files: Mapping[str, str]) -> GateVerdict:
        patch = recover_patch({p: repo.read(p) for p in files}, dict(files))
        try:
            result = grade(client, instance, image_tag, patch, timeout=timeout, limits=limits)
        except Exception as exc:  # noqa: BLE001 - Docker failures are infrastructure
            raise PreparationError(f"L4 test gate of {instance.instance_id!r}: {type(exc).__name__}: {exc}") from exc
        if result.error and not result.applied:
            return GateVerdict(False, f"the rewrite does not apply: {result.error}")
        if result.error:
            raise PreparationError(f"L4 test gate of {instance.instance_id!r}: {result.error}")
        broken = sorted(t for t, s in result.pass_to_pass.items() if s != "PASSED")
        fixed = sorted(t for t, s in result.fail_to_pass.items() if s == "PASSED")
        if not broken and not fixed:
            return GateVerdict(True, "")
        lines = []
        if broken:
            lines.append("These tests passed before the rewrite and fail after it: " + ", ".join(broken[:10]))
        if fixed:
            lines.append("The rewrite changed behaviour (these tests changed outcome): " + ", ".join(fixed[:10]))
        lines.append("Test output (tail):\n" + result.log[-1500:])
        return GateVerdict(False, "\n".join(lines))

    return run


def run_preparation(task: PrepTask, instance, options: ViewOptions, *, endpoint=None, docker_host=None,
                    base_image=None, cache_dir: str, limits: Mapping | None = None,
                    grading_timeout_s: float = 900) -> dict:
    """Compute one preparation record (plain Python; the Ray task in ``runner`` calls it).

    ``endpoint`` is the view model's ``ModelEndpoint`` (None: L4 uses only the deterministic
    rewriter; L1 cannot run). Raises ``PreparationError`` for infrastructure failures and
    ``ValueError`` when L1 has no model.
    """
    complete = None
    if endpoint is not None:
        from raydist.models.completion import litellm_complete

        complete = litellm_complete(endpoint)
    if task.kind == "L1":
        if complete is None:
            raise ValueError(f"L1 of {task.instance_id!r} needs a view model (view.model) and none is served")
        return prepare_statement(instance, task.seed, complete, options)
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
