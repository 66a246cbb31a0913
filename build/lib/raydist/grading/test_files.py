"""The files a test patch touches, and the shell command that resets them to HEAD.

SWE-bench resets these files to the base commit before applying the test patch
(swebench/harness/test_spec: ``git checkout <base_commit> <test_files>``), so a model patch
that edited tests cannot change what they check. Files the test patch creates do not exist
at HEAD and are deleted instead.
"""
from __future__ import annotations

import shlex

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError


def _strip_prefix(path: str) -> str | None:
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def touched_files(diff: str) -> list[str]:
    """Repository-relative paths a unified diff reads or writes, in order, without repeats.

    Raises ``ValueError`` naming the problem when ``diff`` is not a unified diff.
    """
    if not diff.strip():
        return []
    try:
        patch = PatchSet(diff)
    except UnidiffParseError as exc:
        raise ValueError(f"test_patch is not a unified diff ({exc}); fix the instance's "
                         "test_patch") from exc
    paths: list[str] = []
    for pf in patch:
        for raw in (pf.source_file, pf.target_file):
            path = _strip_prefix(raw)
            if path and path not in paths:
                paths.append(path)
    return paths


def restore_command(paths: list[str]) -> str:
    """A shell command that checks each path out of HEAD, or deletes it when HEAD lacks it."""
    parts = []
    for path in paths:
        q = shlex.quote(path)
        parts.append(f"if git cat-file -e HEAD:{q} 2>/dev/null; then git checkout HEAD -- {q}; "
                     f"else rm -rf -- {q}; fi")
    return " && ".join(parts) if parts else "true"
