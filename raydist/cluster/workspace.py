"""The agent's work tree in its sandbox: the view written into ``/testbed`` as the repository's
only history (``install_view``), and the agent's changes read back from it (``read_changes``)
through Docker's archive API, never through the agent's tools or git. A task kind whose
submission is the work tree (``raydist.cluster.kinds.PatchKind``) reads it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raydist.agents.scripted import write_file_commands
from raydist.views.recover import FinalTree, changed_files, tree_entries

if TYPE_CHECKING:
    from raydist.sandbox import Sandbox
    from raydist.views import View

# Files an agent's tools leave behind that are never part of a submission.
IGNORED = ("__pycache__/", "*.pyc", ".pytest_cache/", "*.egg-info/", ".mypy_cache/")


def install_view(box: Sandbox, view: View) -> dict[str, tuple]:
    """Write the view's files and make the view the repository's only history; return the
    initial tree's entries (``raydist.views.recover.tree_entries``), kept on the host where
    nothing the agent does can reach them: the patch is the diff from this tree."""
    # Written by commands, not put_archive, so the files keep belonging to the image's user
    # (an agent that runs unprivileged must be able to edit them).
    for path, text in sorted(view.files.items()):
        for command in write_file_commands(path, text):
            res = box.exec(command, timeout=300)
            if res.returncode != 0:
                raise RuntimeError(f"could not write view file {path} in the sandbox: {res.output[-2000:]}")
    excludes = "\\n".join(IGNORED)
    script = (
        "rm -rf .git && git init -q && "
        f"printf '{excludes}\\n' > .git/info/exclude && git add -A && "
        "git -c user.name=raydist -c user.email=raydist@localhost commit -qm 'initial commit' --no-verify"
    )
    res = box.exec(script, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"could not install the view in the sandbox: {res.output[-2000:]}")
    entries, _ = _tree(box)
    return entries


def _tree(box: Sandbox, baseline=None):
    """``tree_entries`` of the sandbox's /testbed, read through the provider's archive API
    (``Sandbox.read_tree``, not the agent's tools or git); a /testbed the agent removed reads as
    an empty tree."""
    tree = box.read_tree("/testbed")
    if tree is None:
        return {}, {}
    with tree:
        return tree_entries(tree, baseline=baseline)


def read_changes(box: Sandbox, initial: dict[str, tuple], repo):
    """The agent's submission: the final work tree against the view's initial tree
    (``raydist.views.recover.changed_files``), whatever the agent did to ``.git`` (commit,
    stash, branches, removal). New files the repository's own ignore rules ignore (build
    output, virtualenvs) are not part of it."""
    final_entries, contents = _tree(box, baseline=initial)
    added = [p for p in final_entries if p not in initial]
    ignored = set(_ignored(added, Path(repo.root)))
    final_entries = {p: e for p, e in final_entries.items() if p not in ignored}
    tree = changed_files(initial, final_entries, contents, repo.read)
    return FinalTree(tree.final, tree.dropped)


def _ignored(paths: list[str], root: Path) -> list[str]:
    """Those of ``paths`` the original repository's ``.gitignore`` files (and ``IGNORED``)
    ignore, decided by git on the host in a scratch repository holding only those rules."""
    import shutil
    import subprocess
    import tempfile

    if not paths:
        return []
    with tempfile.TemporaryDirectory(prefix="raydist-ignore-") as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True, capture_output=True)
        for rule in root.rglob(".gitignore"):
            target = Path(scratch) / rule.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rule, target)
        (Path(scratch) / ".git" / "info" / "exclude").write_text("\n".join(IGNORED) + "\n")
        done = subprocess.run(["git", "-C", scratch, "check-ignore", "--no-index", "-z", "--stdin"],
                              input=b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths) + b"\0",
                              capture_output=True, check=False)
    return [p.decode("utf-8", "surrogateescape") for p in done.stdout.split(b"\0") if p]
