"""SWE-QA (repository question answering) as raydist instances: SchrodingerRepo RQ3.

SWE-QA ships one ``<repo>.jsonl`` of ``{question, answer}`` records per repository and
``repo_commit.txt`` (``https://github.com/<owner>/<name> <commit>``: the commit the answers were
written against). Offline, the repository comes from a PyPI source release instead
(``benchmark.releases``): :func:`release_match` measures how closely a release reproduces the
pinned commit from what the reference answers cite (file paths, ```start:end:path`` code
quotes, backticked names), so the choice of release is a measured one.

A question becomes an :class:`~raydist.tasks.schema.Instance` with ``problem_statement`` the
question, no patch and no tests, and ``extra``: ``task="qa"``, ``reference_answer``, the SWE-QA
file and line. The unit runs the agent on the view and has the answer judged
(``raydist.qa.judge``) instead of graded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from raydist.tasks.schema import Instance, MalformedInstance, Recipe, Sdist
from raydist.views.l4.rewrite import functions_enclosing_patch

QA_TASK = "qa"
"""``Instance.extra["task"]`` of a repository question (an instance without it is a patch task)."""

COMMITS_FILE = "repo_commit.txt"

# ```12:40:src/flask/sessions.py  (Cursor's citation form, used throughout SWE-QA's answers)
_QUOTE = re.compile(r"```(\d+):(\d+):([^\n`]+)\n(.*?)```", re.S)
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py)\b")
_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?`")


def is_qa(instance) -> bool:
    """Whether ``instance`` is a repository question (``extra["task"] == "qa"``)."""
    return (getattr(instance, "extra", None) or {}).get("task") == QA_TASK


@dataclass(frozen=True)
class Citations:
    """What a reference answer cites: ``paths`` (``.py`` paths as written, any ``/workspace/``
    prefix removed), ``quotes`` ((path, first line, last line, text): 1-based, inclusive) and
    ``names`` (backticked identifiers, dotted names split to their last part)."""

    paths: tuple[str, ...]
    quotes: tuple[tuple[str, int, int, str], ...]
    names: tuple[str, ...]


def citations(answer: str) -> Citations:
    """The :class:`Citations` of one reference ``answer`` (markdown text), in order of first use."""
    quotes = tuple((_clean(m.group(3)), int(m.group(1)), int(m.group(2)), m.group(4))
                   for m in _QUOTE.finditer(answer))
    paths = dict.fromkeys([_clean(p) for p in _PATH.findall(_QUOTE.sub("", answer))] + [q[0] for q in quotes])
    names = dict.fromkeys(n.rsplit(".", 1)[-1] for n in _NAME.findall(answer))
    return Citations(tuple(paths), quotes, tuple(names))


def _clean(path: str) -> str:
    path = path.strip()
    for prefix in ("/workspace/", "/testbed/", "./"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    return path.lstrip("/")


@dataclass(frozen=True)
class ReleaseMatch:
    """How closely an unpacked release reproduces what the answers cite: counts found / cited
    of paths (a cited path found as a suffix of a file of the release counts), quotes (the
    quoted lines equal, whitespace-stripped, at the cited line numbers) and names (the name
    occurs in some ``.py`` file of the release)."""

    paths_found: int
    paths_cited: int
    quotes_exact: int
    quotes_cited: int
    names_found: int
    names_cited: int

    def shares(self) -> dict[str, float | None]:
        """``{"paths", "quotes", "names"}`` -> found / cited (None when nothing is cited)."""
        return {k: (f / c if c else None) for k, f, c in (("paths", self.paths_found, self.paths_cited),
                                                            ("quotes", self.quotes_exact, self.quotes_cited),
                                                            ("names", self.names_found, self.names_cited))}


def release_match(answers: Sequence[str], root: Path) -> ReleaseMatch:
    """:class:`ReleaseMatch` of the reference ``answers`` against the release unpacked at ``root``."""
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*.py") if p.is_file()}
    source = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files.values())
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    cited = [citations(a) for a in answers]
    paths = {p for c in cited for p in c.paths}
    quotes = [q for c in cited for q in c.quotes]
    names = {n for c in cited for n in c.names}
    exact = 0
    for path, first, last, text in quotes:
        found = _suffix_match(path, files)
        if found is not None:
            lines = found.read_text(encoding="utf-8", errors="replace").splitlines()[first - 1:last]
            exact += [x.strip() for x in lines] == [x.strip() for x in text.rstrip("\n").splitlines()]
    return ReleaseMatch(sum(_suffix_match(p, files) is not None for p in paths), len(paths), exact, len(quotes),
                        len(names & words), len(names))


def _suffix_match(path: str, files: Mapping[str, Path]) -> Path | None:
    if path in files:
        return files[path]
    hits = [f for rel, f in files.items() if rel.endswith("/" + path) or path.endswith("/" + rel)]
    return hits[0] if len(hits) == 1 else None


def read_commits(directory: Path) -> dict[str, tuple[str, str]]:
    """``repo_commit.txt`` of ``directory``: SWE-QA file stem -> (``owner/name``, commit).

    Raises ``FileNotFoundError`` naming the file and ``benchmark.source``."""
    path = directory / COMMITS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: benchmark.source must be SWE-QA's folder "
                                f"(one <repo>.jsonl per repository and {COMMITS_FILE})")
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            url, commit = line.split()
            slug = "/".join(url.rstrip("/").split("/")[-2:])
            out[slug.split("/")[1]] = (slug, commit)
    return out


def load_swe_qa(directory: str | Path, releases: Mapping[str, Mapping], repositories: str | Sequence[str] | None
                ) -> list[Instance]:
    """The questions of ``repositories`` (SWE-QA file stems, e.g. ``["flask"]``) as instances, in
    file order, repository by repository.

    Args:
        directory: SWE-QA's folder (``<repo>.jsonl`` and ``repo_commit.txt``).
        releases: stem -> ``{name, version, sha256}`` of the PyPI source release that stands in
            for the pinned commit (``benchmark.releases``), optionally with ``test_cmd`` and
            ``install`` (exact pins): the repository's own tests, which gate L4's rewrites.
        repositories: which stems to load (one stem or a list; ``benchmark.repositories``).

    Instance ids are ``swe-qa__<stem>-<line>`` (1-based line of the file).

    Raises:
        FileNotFoundError: the folder, a ``<stem>.jsonl`` or ``repo_commit.txt`` is missing.
        ValueError: no stem given (names ``benchmark.repositories``), a stem has no release (names
            ``benchmark.releases``) or no commit.
        MalformedInstance: a line that is not a ``{question, answer}`` object (file:line).
    """
    if not repositories:
        raise ValueError("benchmark.format=swe_qa needs benchmark.repositories, e.g. [flask]")
    repositories = [repositories] if isinstance(repositories, str) else [str(r) for r in repositories]
    directory = Path(directory)
    commits = read_commits(directory)
    instances = []
    for stem in repositories:
        if stem not in releases:
            raise ValueError(f"SWE-QA repository {stem!r} has no PyPI release in benchmark.releases (it has "
                             f"{', '.join(sorted(releases)) or 'none'}); add one as {{name, version, sha256}}")
        if stem not in commits:
            raise ValueError(f"SWE-QA repository {stem!r} is not in {directory / COMMITS_FILE}")
        path = directory / f"{stem}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; benchmark.repositories names {stem!r}")
        rel = releases[stem]
        sdist = Sdist(str(rel["name"]), str(rel["version"]), str(rel["sha256"]), rel.get("filename"))
        slug, commit = commits[stem]
        test_cmd, install = str(rel.get("test_cmd") or ""), tuple(str(p) for p in rel.get("install") or ())
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                record = _record(line, f"{path}:{number}")
                instances.append(_instance(record, stem, number, slug, commit, sdist, test_cmd, install))
    return instances


def _record(line: str, where: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise MalformedInstance(where, None, f"is not JSON ({exc.msg})") from None
    for field in ("question", "answer"):
        if not isinstance(record, dict) or not isinstance(record.get(field), str) or not record[field].strip():
            raise MalformedInstance(where, field, "must be a non-empty string")
    return record


def _instance(record: dict, stem: str, number: int, slug: str, commit: str, sdist: Sdist, test_cmd: str,
              install: tuple[str, ...]) -> Instance:
    return Instance(
        instance_id=f"swe-qa__{stem}-{number:03d}", repo=slug, base_commit=commit, patch="", test_patch="",
        problem_statement=record["question"], FAIL_TO_PASS=(), PASS_TO_PASS=(), version=sdist.version,
        test_cmd=test_cmd, recipe=Recipe(sdist=sdist, install=install, install_repo=None),
        extra={"task": QA_TASK, "reference_answer": record["answer"], "swe_qa_file": f"{stem}.jsonl",
               "swe_qa_line": number})


MAX_CITED_FUNCTIONS = 6
"""L4 rewrites at most this many functions per question (a gold patch encloses one to a few)."""


def cited_functions(instance: Instance, repo, limit: int = MAX_CITED_FUNCTIONS) -> list[tuple[str, str]]:
    """``(path, qualname)`` of the functions a question's reference answer cites, in order of
    citation, at most ``limit``: those enclosing its quoted line ranges, then those its
    backticked names define in the files it cites. L4 rewrites these (SchrodingerRepo §III-E
    rewrites the functions enclosing the gold patch; a question has none, and the code its
    answer rests on plays that part). ``repo`` is the instance's ``RepoFiles``; a cited path is
    found as a unique suffix of one of its files; files that do not parse contribute nothing."""
    cited = citations(instance.extra.get("reference_answer", ""))
    files = {p: p for p in repo.python_files()}
    found: list[tuple[str, str]] = []
    spans: dict[str, list[tuple[int, int]]] = {}
    for path, first, last, _ in cited.quotes:
        real = _suffix_match(path, files)
        if real is not None:
            spans.setdefault(real, []).append((first, last))
    for path in cited.paths:
        real = _suffix_match(path, files)
        text = repo.read(real) if real is not None else None
        if text is None:
            continue
        for name in cited.names:
            for match in re.finditer(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b", text, re.M):
                line = text.count("\n", 0, match.start()) + 1
                spans.setdefault(real, []).append((line, line))
    for path, ranges in spans.items():
        text = repo.read(path)
        try:
            names = functions_enclosing_patch(text, ranges) if text is not None else []
        except SyntaxError:
            continue
        found.extend((path, name) for name in names if (path, name) not in found)
    return found[:limit]
