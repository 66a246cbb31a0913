"""A view written out as the agent sees it (``raydist view``): the repository tree, the problem
statement and ``view.json``, and its difference from L0.

What the agent sees of a file (SchrodingerRepo §III): the view's content of it (L3's reordering
and L4's rewrites, in original names: ``View.files``), or the repository's own when the view left
it alone, shown through the translator (L2: ``translator.to_view`` of the text and of the path,
§III-C). A file that is not UTF-8 text is shown as its bytes, only its path translated: that is
what the agent's ``cat`` would print after the environment translates its output, and the view
never rewrites such a file. ``.git`` is not part of a view: the sandbox replaces the history
with one commit of the view (``raydist.cluster.workspace.install_view``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raydist.views.base import RepoFiles, View

VIEW_JSON = "view.json"
STATEMENT = "problem_statement.md"
REPO = "repo"
VIEW_JSON_VERSION = 1


def visible_files(view: View, repo: RepoFiles) -> Iterator[tuple[str, str, bytes]]:
    """``(original path, path as shown, bytes as shown)`` for every file of ``repo`` (relative
    POSIX paths, sorted; ``.git`` left out), as the module docstring defines what is shown.
    Raises nothing for binary files (their bytes are kept)."""
    for path in _repo_paths(repo.root):
        data = (repo.root / path).read_bytes()
        text = view.files.get(path)
        if text is None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                yield path, view.translator.to_view(path), data
                continue
        yield path, view.translator.to_view(path), view.translator.to_view(text).encode("utf-8")


def _repo_paths(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        rel = Path(dirpath).relative_to(root)
        found += [(rel / name).as_posix() for name in filenames if not (Path(dirpath) / name).is_symlink()]
    return sorted(found)


def view_record(view: View, *, benchmark: str, with_mapping: bool = False) -> dict[str, Any]:
    """``view.json``'s content: ``version``, ``instance_id``, ``benchmark``, ``level``, ``seed``,
    ``statement_source`` (``paraphrase``, ``rule`` or ``canonical``: §III-B), ``files_changed``
    (paths whose content the view changed, original coordinates), ``l3_reordered``, ``l4_rewrites``
    (per function ``path::qualname``: how it was rewritten, §III-E), ``l2_names`` (names
    remapped) and, with ``with_mapping``, ``mapping`` (original identifier -> view identifier,
    sorted: what a reviewer needs to read the view; it gives the hidden names away, so it is
    never shown to an agent)."""
    meta = view.meta
    record: dict[str, Any] = {
        "version": VIEW_JSON_VERSION, "instance_id": view.instance_id, "benchmark": benchmark, "level": view.level,
        "seed": view.seed, "statement_source": meta.get("l1_source", "canonical"),
        "statement_attempts": int(meta.get("l1_attempts", 0)), "files_changed": sorted(view.files),
        "l3_reordered": list(meta.get("l3_reordered", [])), "l4_rewrites": dict(meta.get("l4_functions", {})),
        "l2_names": int(meta.get("l2_names", 0)),
    }
    if with_mapping:
        forward = getattr(getattr(view.translator, "mapping", None), "forward", {})
        record["mapping"] = dict(sorted(forward.items()))
    return record


def write_view(view: View, repo: RepoFiles, out: Path, *, benchmark: str, with_mapping: bool = False) -> dict:
    """Write ``out/repo/`` (``visible_files``), ``out/problem_statement.md`` (the statement as
    shown) and ``out/view.json`` (``view_record``); returns the record. ``out`` must not exist
    or be an empty folder. Raises ``FileExistsError`` naming ``out`` otherwise, and
    ``ValueError`` when two files would be shown at one path (a translator that is no
    bijection on paths: a raydist bug)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder; give a new --out folder")
    shown: dict[str, str] = {}
    for original, path, data in visible_files(view, repo):
        if shown.setdefault(path, original) != original:
            raise ValueError(f"{shown[path]} and {original} are both shown at {path} in {view.instance_id} "
                             f"{view.level} seed {view.seed}")
        target = out / REPO / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        shutil.copymode(repo.root / original, target)
    (out / STATEMENT).write_text(view.problem_statement, encoding="utf-8")
    record = view_record(view, benchmark=benchmark, with_mapping=with_mapping)
    (out / VIEW_JSON).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def view_diff(original: Path, shown: Path, *, statement: tuple[str, str] | None = None) -> str:
    """The difference from the L0 tree ``original`` to the view tree ``shown`` as ``git diff``
    prints it with rename detection (a file L2 renamed shows as ``rename from``/``rename to``
    with its changed lines), and first, with ``statement`` (L0 text, view text), the problem
    statement's difference as ``problem_statement.md``. Raises ``RuntimeError`` when git fails."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        parts = []
        if statement is not None:
            (work / "a.md").write_text(statement[0], encoding="utf-8")
            (work / "b.md").write_text(statement[1], encoding="utf-8")
            parts.append(_git_diff(work, "a.md", "b.md").replace("a/a.md", f"a/{STATEMENT}")
                         .replace("b/b.md", f"b/{STATEMENT}"))
        git = work / "tree"
        shutil.copytree(original, git, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        _git(git, "init", "-q")
        _git(git, "add", "-A")
        _git(git, "-c", "user.name=raydist", "-c", "user.email=raydist@localhost", "commit", "-qm", "L0",
             "--no-verify")
        for child in git.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        shutil.copytree(shown, git, symlinks=True, dirs_exist_ok=True)
        _git(git, "add", "-A")
        parts.append(_git(git, "diff", "--cached", "-M", "--binary"))
        return "".join(parts)


def _git_diff(cwd: Path, a: str, b: str) -> str:
    res = subprocess.run(["git", "diff", "--no-index", "--", a, b], cwd=cwd, capture_output=True, text=True,
                         check=False)
    if res.returncode not in (0, 1):
        raise RuntimeError(f"git diff failed: {res.stderr.strip()}")
    return res.stdout


def _git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=cwd, capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {res.stderr.strip()}")
    return res.stdout
