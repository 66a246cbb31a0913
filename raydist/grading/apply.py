"""Applying a patch inside a sandbox the way SWE-bench's harness does.

SWE-bench tries each of ``swebench.harness.run_evaluation.GIT_APPLY_CMDS`` in order
(``git apply --verbose``, ``--3way``, ``--reject``, then ``patch --batch --forward --fuzz=5
-p1 -i``) and restores a pristine tree between attempts (``git checkout -- . ; git clean
-fd``), because a failed ``--reject`` leaves half the hunks behind. raydist runs that very
list, for gold and agent patches alike, so a patch is judged applicable exactly when the
official harness would apply it, and the method that worked is recorded.

On the host (a scratch tree of an sdist, ``raydist.grading.host``; fresh tasks' release tree),
``apply_on_host`` runs plain ``git apply``, the command the instance image's build uses.
"""
from __future__ import annotations

import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from swebench.harness.run_evaluation import GIT_APPLY_CMDS

from raydist.views.recover import terminated

PATCH_DIR = "/tmp"
APPLY_TIMEOUT = 120.0  # seconds; applying never legitimately takes long
RESET_COMMAND = "git checkout -- . ; git clean -fd"  # swebench's reset between attempts
# The names the row's ``apply_method`` records, one per entry of GIT_APPLY_CMDS.
METHOD_NAMES = {
    "git apply --verbose": "git-apply",
    "git apply --verbose --3way": "git-apply-3way",
    "git apply --verbose --reject": "git-apply-reject",
    "patch --batch --forward --fuzz=5 -p1 -i": "patch-fuzz",
}


@dataclass(frozen=True)
class ApplyResult:
    """``applied``; ``method`` the name of the command that applied it (``METHOD_NAMES``:
    ``git-apply``, ``git-apply-3way``, ``git-apply-reject``, ``patch-fuzz``), ``"empty"`` for
    an empty patch or ``"none"`` when nothing worked; ``output`` the tools' text."""

    applied: bool
    method: str
    output: str


def method_name(command: str) -> str:
    """The short name of one of ``GIT_APPLY_CMDS`` (the command itself when unknown)."""
    return METHOD_NAMES.get(command, command)


def is_empty_patch(patch: str) -> bool:
    """True for a patch with nothing to apply (empty or blank): applied as ``"empty"`` here,
    and an agent's is not graded at all (``raydist.cluster.unit``)."""
    return not patch.strip()


def apply_patch(sandbox, patch: str, *, label: str, cwd: str = "/testbed", fallbacks: bool = True) -> ApplyResult:
    """Apply the unified diff ``patch`` to the git work tree ``cwd`` in ``sandbox`` with
    SWE-bench's ``GIT_APPLY_CMDS``, resetting the tree to HEAD between attempts.

    ``fallbacks=False`` runs ``git apply --verbose`` alone and never resets the tree: that is
    how SWE-bench's eval script applies the test patch on top of the model patch.

    ``label`` names the patch (``"model"``, ``"test"``, ``"gold"``) in its file name and in
    the output. An empty or blank patch counts as applied with method ``"empty"``; one that
    lacks its final newline is applied as with it (``raydist.views.recover.terminated``). Never
    raises for a patch that does not apply: that is an outcome, ``applied=False``, and (with
    fallbacks) the tree is left at HEAD. ``cwd`` must be a git work tree whose HEAD is the state to patch.
    """
    if is_empty_patch(patch):
        return ApplyResult(True, "empty", "")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label) or "patch"
    name = f"raydist-{slug}-{secrets.token_hex(6)}.patch"
    sandbox.write_files({name: terminated(patch)}, root=PATCH_DIR)
    path = f"{PATCH_DIR}/{name}"
    outputs = []
    commands = GIT_APPLY_CMDS if fallbacks else GIT_APPLY_CMDS[:1]
    for attempt, command in enumerate(commands):
        if attempt:
            sandbox.exec(RESET_COMMAND, timeout=APPLY_TIMEOUT, cwd=cwd)
        result = sandbox.exec(f"{command} {path}", timeout=APPLY_TIMEOUT, cwd=cwd)
        if result.returncode == 0:
            return ApplyResult(True, method_name(command), result.output)
        outputs.append(f"{method_name(command)} ({label} patch) failed:\n{result.output.rstrip()}")
    if fallbacks:
        sandbox.exec(RESET_COMMAND, timeout=APPLY_TIMEOUT, cwd=cwd)
    return ApplyResult(False, "none", "\n".join(outputs))


class PatchError(RuntimeError):
    """A patch does not apply (or revert) on the host with ``git apply``."""


def apply_on_host(root: Path, diff: str, *, label: str = "the patch", reverse: bool = False) -> None:
    """``git apply`` (``-R`` with ``reverse``) the git-style ``diff`` at the host directory
    ``root`` (a git work tree or not); nothing for an empty ``diff``; one that lacks its final
    newline applies as with it (``raydist.views.recover.terminated``). Raises
    :class:`PatchError` (a ``RuntimeError``) ``"<label> does not apply at <root>: <git's
    message>"`` (``revert`` with ``reverse``) when git refuses it."""
    if not diff:
        return
    argv = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
    done = subprocess.run(argv, cwd=root, input=terminated(diff), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PatchError(f"{label} does not {'revert' if reverse else 'apply'} at {root}: {done.stderr.strip()}")
