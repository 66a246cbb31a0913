"""L4's preparation (SchrodingerRepo §III-E): which functions to rewrite, and the rewrite loop
(LLM proposals, then the deterministic rewriter) whose every accepted rewrite passes a test gate.

Plain Python: the gate (``raydist.cluster.rewrites.rewrite_gate`` runs the instance's tests in
its container) and the LLM (``complete``) are handed in, so the loop is tested with any gate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from unidiff import PatchSet

from raydist._util.protocols import Complete
from raydist.views.base import RepoFiles, ViewOptions
from raydist.views.instance import ViewInstance
from raydist.views.l4.llm import load_l4_prompts, propose_rewrite
from raydist.views.l4.rewrite import functions_enclosing_patch, rewrite_function_source, same_interface
from raydist.views.recover import patched_paths

#: ``(files) -> (passed, feedback)``: runs the instance's tests with ``files`` (path -> text in
#: original coordinates) in place of the originals.
Gate = Callable[[Mapping[str, str]], "GateVerdict"]


@dataclass(frozen=True)
class GateVerdict:
    """The L4 test gate's answer: ``passed`` when every PASS_TO_PASS test passed and every
    FAIL_TO_PASS test still failed; ``feedback`` names the tests that broke the rule and ends
    with the tail of the test log (what a retry prompt shows the LLM)."""

    passed: bool
    feedback: str


def changed_line_ranges(patch: str, path: str) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of ``path``'s original that ``patch`` removes or inserts
    next to (a pure insertion counts as the line before it), one range per hunk."""
    ranges: list[tuple[int, int]] = []
    for patched in PatchSet(patch):
        if patched.path != path:
            continue
        for hunk in patched:
            removed = [number for line in hunk if line.is_removed and (number := line.source_line_no) is not None]
            if removed:
                ranges.append((min(removed), max(removed)))
                continue
            last_before: int | None = None
            for line in hunk:
                if line.is_added:
                    break
                if line.is_context:
                    last_before = line.source_line_no
            anchor = last_before or hunk.source_start
            ranges.append((anchor, anchor))
    return ranges


def rewrite_targets(instance: ViewInstance, repo: RepoFiles) -> list[tuple[str, str]]:
    """``(path, qualname)`` of every function enclosing a hunk of the gold patch, §III-E.
    Files that do not parse contribute nothing."""
    targets: list[tuple[str, str]] = []
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


def rewrite_loop(instance: ViewInstance, seed: int, repo: RepoFiles, options: ViewOptions, gate: Gate,
                 complete: Complete | None = None, fatal: tuple[type[BaseException], ...] = (),
                 targets: list[tuple[str, str]] | None = None) -> dict:
    """The L4 record of ``instance`` for ``seed``: ``{"files": {path: text}, "functions":
    {"path::qualname": {"source", "attempts", "reason"}}}``, §III-E.

    For each function enclosing a gold hunk, up to ``options.l4_llm_attempts`` LLM rewrites
    (``raydist.views.l4.llm.propose_rewrite``), each through the static gate and then
    ``gate`` with every rewrite accepted so far; the gate's feedback goes into the next
    attempt. When none passes, the deterministic rewriter's output (seeded by ``seed``) goes
    through the same gate. A function neither passes keeps its original text
    (``source="unchanged"``). The last gate run covers the whole accepted set, so the files
    returned passed the gate together. Raises what ``gate`` raises, and the errors of
    ``complete`` that are instances of ``fatal`` (an unreachable model): neither may end as a
    recorded attempt; any other failed call is one. ``targets`` (``(path, qualname)``) replaces
    the functions enclosing the gold patch (``rewrite_targets``) for an instance without one, e.g.
    the functions a repository question's reference answer cites.
    """
    files: dict[str, str] = {}
    functions: dict[str, dict] = {}
    prompts = None
    if complete is not None and options.l4_llm_attempts > 0:
        prompts = load_l4_prompts(options.prompts_dir)
    for number, (path, qualname) in enumerate(rewrite_targets(instance, repo) if targets is None else targets):
        current = files.get(path) or repo.read(path)
        if current is None:
            raise ValueError(f"L4 target {path}::{qualname}: {path} is not in the repository")
        feedback_log: list[str] = []
        entry: dict[str, Any] = {"source": "unchanged", "attempts": 0, "reason": None, "feedback": feedback_log}
        accepted = None
        feedback: str | None = None
        previous: str | None = None
        for attempt in range(options.l4_llm_attempts if prompts is not None else 0):
            if complete is None or prompts is None:  # no LLM: the loop runs no attempt
                break
            entry["attempts"] = attempt + 1
            try:
                proposal = propose_rewrite(current, qualname, complete, seed=seed * 1000 + number * 10 + attempt,
                                           feedback=feedback, previous=previous, prompts=prompts)
            except fatal:  # e.g. the model server is down: nothing may be recorded or cached
                raise
            except ValueError as exc:  # e.g. the name is defined twice: no LLM rewrite can be placed
                feedback_log.append(f"no LLM rewrite: {exc}"[:500])
                break
            except Exception as exc:  # noqa: BLE001 - any other failed call is a recorded attempt
                feedback_log.append(f"LLM call failed: {type(exc).__name__}: {exc}"[:500])
                continue
            previous = proposal.function_source
            if proposal.module_source is None:
                feedback = f"The rewrite was rejected before testing: {proposal.reason}"
                feedback_log.append(feedback[:500])
                continue
            verdict = gate({**files, path: proposal.module_source})
            if verdict.passed:
                accepted, entry["source"] = proposal.module_source, "llm"
                break
            feedback = verdict.feedback
            feedback_log.append(_clip(feedback))
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
