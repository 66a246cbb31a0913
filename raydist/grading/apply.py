"""Applying a patch inside a sandbox the way SWE-bench's harness does.

SWE-bench tries ``git apply --verbose`` and falls back to ``patch --batch --fuzz=5 -p1``
(swebench/harness/run_evaluation.py, GIT_APPLY_CMDS); raydist keeps that order so a patch is
judged applicable exactly when the official harness would apply it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PATCH_DIR = "/tmp"
APPLY_TIMEOUT = 120.0  # seconds; applying never legitimately takes long


@dataclass(frozen=True)
class ApplyResult:
    """``applied``; ``method`` one of ``"git-apply"``, ``"patch"``, ``"empty"`` or ``"none"``
    (nothing worked); ``output`` the tools' text."""

    applied: bool
    method: str
    output: str


def _attempts(path: str) -> list[tuple[str, str]]:
    # The dry run keeps `patch` from leaving half the hunks applied when others fail.
    fuzzy = f"patch --batch --fuzz=5 -p1 -i {path}"
    return [("git-apply", f"git apply --verbose {path}"),
            ("patch", f"{fuzzy} --dry-run && {fuzzy}")]


def apply_patch(sandbox, patch: str, *, label: str) -> ApplyResult:
    """Apply the unified diff ``patch`` to ``/testbed`` in ``sandbox``.

    ``label`` names the patch (``"model"``, ``"test"``) in its file name and in the output.
    An empty or blank patch counts as applied with method ``"empty"``. Never raises for a
    patch that does not apply: that is an outcome, ``applied=False``.
    """
    if not patch.strip():
        return ApplyResult(True, "empty", "")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label) or "patch"
    name = f"raydist-{slug}.patch"
    sandbox.write_files({name: patch if patch.endswith("\n") else patch + "\n"}, root=PATCH_DIR)
    outputs = []
    for method, command in _attempts(f"{PATCH_DIR}/{name}"):
        result = sandbox.exec(command, timeout=APPLY_TIMEOUT)
        if result.returncode == 0:
            return ApplyResult(True, method, result.output)
        outputs.append(f"{method} ({label} patch) failed:\n{result.output.rstrip()}")
    return ApplyResult(False, "none", "\n".join(outputs))
