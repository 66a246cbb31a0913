"""Exposure audit: which names of the original repository the agent was shown (SchrodingerRepo §III-F).

The audit is independent of the L2 translator: it never reads a translator's tables. It
builds, from the original repository and the instance, the repository's *identity*
(``identity_tokens``) and searches any text for it (``find_exposures``); an L2 view that
leaves a name unmapped shows it, and the audit finds it whatever the translator believes.

Identity tokens and their kinds (``IdentitySet.origins``):

* ``distribution``: the distribution name (the instance's sdist, ``PKG-INFO``, ``setup.cfg``,
  ``pyproject.toml``), split at ``-``/``.`` into its identifier parts (``python-dateutil``
  -> ``dateutil``);
* ``package``: the top-level import names (``*.egg-info/top_level.txt``, else the outermost
  packages and modules that are neither tests, docs nor build scripts);
* ``project_url``: the owner and name in the project URLs (``https://github.com/jquast/wcwidth``
  -> ``jquast``, ``wcwidth``) and in the instance's ``repo``;
* ``readme_title``: the words of the README's title (``Inflection``);
* ``module``, ``class``, ``function``, ``method``: public names (no leading ``_``) of the
  package source (test files excluded): module paths, and ``def``/``class`` at module and
  class level.

The false-positive rule: the first four kinds always count (a project called ``six`` is
named by "six"); the code kinds count only when *distinctive*: at least 4 characters and not
``is_generic`` (a common English or programming word such as ``core``, ``utils``, ``first``,
``docs``, a keyword, builtin, standard-library module or shell word). L2 applies the same
rule the other way: it does not remap generic words, so prose stays readable.

Matching (``find_exposures``) is word-boundary, case-insensitive and subword-aware: a text's
identifier runs are split into subwords (snake and camel case) and any contiguous run of
subwords whose concatenation equals a token's does count, so ``WCWIDTH``, ``Inflection``,
``test_ensure_text_errors`` and ``EnsureText`` all expose their token, ``cytoolz`` does not
expose ``toolz``.
"""

from __future__ import annotations

import ast
import configparser
import functools
import re
import tomllib
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import TypedDict
from urllib.parse import urlsplit

from raydist.views.base import RepoFiles, View
from raydist.views.vocabulary import (
    BUILTINS,
    COMMAND_WORDS,
    GENERIC_WORDS,
    KEYWORDS,
    OUTPUT_WORDS,
    STDLIB,
    external_attributes,
    importable_roots,
    split_subwords,
)

STRONG_KINDS = ("distribution", "package", "project_url", "readme_title")
_RUN = re.compile(r"[A-Za-z0-9_]+")
_ESCAPES = frozenset("abfnrtv")
_NOT_PACKAGES = frozenset({"setup", "conftest", "versioneer", "conf", "docs", "doc", "tests", "test", "testing",
                           "bin", "scripts", "examples", "benchmarks", "bench", "tools", "tasks", "noxfile",
                           "fabfile", "runtests", "build", "dist", "_version"})
_PROTOCOL_MODULES = ("importlib.abc", "importlib.machinery", "unittest", "collections.abc", "io", "contextlib",
                     "numbers", "abc")
_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "codeberg.org", "sr.ht")



def is_generic(word: str) -> bool:
    """Whether ``word`` is too common to identify a repository (see the module doc): a
    ``GENERIC_WORDS`` word, keyword, builtin, standard-library module, shell word or word of
    traceback framing, compared case-insensitively."""
    low = word.lower()
    return (low in GENERIC_WORDS or word in KEYWORDS or word in BUILTINS or low in STDLIB or word in COMMAND_WORDS
            or word in OUTPUT_WORDS)


def identity_key(token: str) -> str:
    """The case- and separator-free form ``find_exposures`` compares (``Ensure_Text`` -> ``ensuretext``)."""
    return "".join(split_subwords(token)).lower()


@dataclass(frozen=True)
class IdentitySet:
    """The identity tokens of one repository: ``origins`` maps each token, as the repository
    spells it, to its kind (see the module doc); ``unreadable`` lists files that are not UTF-8
    (their text was not searched for names)."""

    origins: Mapping[str, str]
    unreadable: tuple[str, ...] = ()
    _keys: Mapping[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    max_subwords: int = field(default=1, init=False, repr=False, compare=False)
    """The most subwords one token has: the longest span ``find_exposures`` needs to try."""

    def __post_init__(self) -> None:
        keys: dict[str, str] = {}
        for token in sorted(self.origins):
            keys.setdefault(identity_key(token), token)
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "max_subwords", max((len(split_subwords(t)) for t in self.origins), default=1))

    def __len__(self) -> int:
        return len(self.origins)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.origins))

    def __contains__(self, token: object) -> bool:
        return token in self.origins

    def strong(self) -> frozenset[str]:
        """Tokens of the kinds that always count (distribution, package, project URL, README title)."""
        return frozenset(t for t, k in self.origins.items() if k in STRONG_KINDS)

    def lookup(self, key: str) -> str | None:
        """The token whose ``identity_key`` is ``key``, or None."""
        return self._keys.get(key)


def find_exposures(text: str, identity: IdentitySet) -> set[str]:
    """The identity tokens ``text`` names (as ``identity`` spells them); see the module doc
    for the matching rule. A run right after a backslash that starts with a C escape letter
    (``'\\nwcwidth'`` in a ``repr``) is also searched without that letter."""
    found: set[str] = set()
    if not identity.origins or not text:
        return found
    span = identity.max_subwords
    for match in _RUN.finditer(text):
        run = match.group()
        runs = [run]
        if len(run) > 1 and run[0] in _ESCAPES and match.start() and text[match.start() - 1] == "\\":
            runs.append(run[1:])
        for piece in runs:
            subs = [s.lower() for s in split_subwords(piece)]
            for i in range(len(subs)):
                key = ""
                for j in range(i, min(len(subs), i + span)):
                    key += subs[j]
                    token = identity.lookup(key)
                    if token is not None:
                        found.add(token)
    return found


def identity_tokens(repo: RepoFiles, instance: object = None) -> IdentitySet:
    """The identity tokens of ``repo`` (the original checkout) and ``instance`` (optional;
    its ``repo`` and ``recipe.sdist.name`` are read when present). See the module doc.

    Files that are not UTF-8 are skipped (listed in ``unreadable``); never raises for the
    repository's content.
    """
    origins: dict[str, str] = {}
    keys: set[str] = set()
    unreadable: list[str] = []
    protocol = _protocol_attributes()

    def read(path: str) -> str | None:
        try:
            return repo.read(path)
        except ValueError:
            unreadable.append(path)
            return None

    def add(tokens: Iterable[str], kind: str) -> None:
        for token in tokens:
            if kind in STRONG_KINDS:
                keep = len(token) >= 3 and not (kind == "readme_title" and is_generic(token))
            else:
                keep = len(token) >= 4 and not is_generic(token) and not token.startswith("_") and token not in protocol
            key = identity_key(token)
            if keep and key not in keys and re.search(r"[A-Za-z]{2}", token) and not token.startswith("__"):
                keys.add(key)
                origins[token] = kind

    metadata = _metadata(repo, read, instance)
    add(metadata["distribution"], "distribution")
    packages = _top_level(repo, read)
    add(packages, "package")
    add(metadata["project_url"], "project_url")
    add(_readme_title(repo, read), "readme_title")
    for path in _source_files(repo.python_files(), packages):
        add((p for p in PurePosixPath(path[:-3]).parts if p.isidentifier() and p != "__init__"), "module")
        text = read(path)
        if text is not None:
            for name, kind in _public_definitions(text, path):
                add([name], kind)
    return IdentitySet(origins=MappingProxyType(origins), unreadable=tuple(sorted(set(unreadable))))


@functools.cache
def _protocol_attributes() -> frozenset[str]:
    # Methods a repository defines because the standard library calls them (``find_spec`` of an
    # import hook, ``assertRegex`` of a TestCase) are the library's names, not the project's.
    return external_attributes(_PROTOCOL_MODULES)


def _identifier_parts(name: str) -> list[str]:
    return [p for p in re.split(r"[-.\s]+", name) if p.isidentifier() and not is_generic(p)]


def _metadata(repo: RepoFiles, read, instance: object) -> dict[str, list[str]]:
    names: list[str] = []
    urls: list[str] = []
    sdist = getattr(getattr(instance, "recipe", None), "sdist", None)
    sdist_name = getattr(sdist, "name", None)
    if isinstance(sdist_name, str) and sdist_name:
        names.append(sdist_name)
    slug = getattr(instance, "repo", None)
    if isinstance(slug, str) and "/" in slug:
        urls.append("https://github.com/" + slug)
    pkg_info = read("PKG-INFO")
    if pkg_info:
        headers = HeaderParser().parsestr(pkg_info)
        names += [headers.get("Name") or ""]
        urls += [headers.get("Home-page") or ""] + [v.split(",", 1)[-1] for v in headers.get_all("Project-URL") or []]
    cfg_text = read("setup.cfg")
    if cfg_text:
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            cfg.read_string(cfg_text)
            names.append(cfg.get("metadata", "name", fallback=""))
            urls += [cfg.get("metadata", "url", fallback="")] + cfg.get("metadata", "project_urls", fallback="").split()
        except configparser.Error:
            pass
    toml_text = read("pyproject.toml")
    if toml_text:
        try:
            project = tomllib.loads(toml_text).get("project", {})
        except tomllib.TOMLDecodeError:
            project = {}
        names.append(str(project.get("name", "")))
        urls += [str(u) for u in (project.get("urls") or {}).values()]
    parts: list[str] = []
    for url in urls:
        split = urlsplit(url.strip())
        if split.hostname and split.hostname.removeprefix("www.") in _HOSTS:
            parts += [p for p in split.path.strip("/").removesuffix(".git").split("/")[:2] if p]
    return {"distribution": [p for n in names for p in _identifier_parts(n)],
            "project_url": [p for u in parts for p in _identifier_parts(u)]}


def _top_level(repo: RepoFiles, read) -> list[str]:
    listed: list[str] = []
    for path in sorted(repo.root.glob("*.egg-info/top_level.txt")):
        text = read(path.relative_to(repo.root).as_posix()) or ""
        listed += [line.strip() for line in text.splitlines() if line.strip().isidentifier()]
    if listed:
        return listed
    roots = importable_roots(repo.python_files())
    return sorted(r for r in roots if r not in _NOT_PACKAGES and not r.startswith("test"))


def _source_files(paths: list[str], packages: Iterable[str]) -> list[str]:
    packages = set(packages)
    out = []
    for path in paths:
        parts = PurePosixPath(path).parts
        top = parts[0][:-3] if len(parts) == 1 else parts[0]
        if top not in packages:
            continue
        if any(p in ("tests", "test", "testing") or p.startswith("test_") or p == "conftest.py" for p in parts):
            continue
        out.append(path)
    return out


def _public_definitions(text: str, path: str) -> list[tuple[str, str]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return []
    out: list[tuple[str, str]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, "function"))
        elif isinstance(node, ast.ClassDef):
            out.append((node.name, "class"))
            out += [(s.name, "method") for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [(n, k) for n, k in out if not n.startswith("_")]


_UNDERLINE = re.compile(r"^([=\-~^*#+`'\"])\1{2,}\s*$")


def _readme_title(repo: RepoFiles, read) -> list[str]:
    for name in ("README.rst", "README.md", "README.txt", "README"):
        text = read(name)
        if not text:
            continue
        lines = text.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("# "):
                return _RUN.findall(stripped[2:])
            if stripped and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and not _UNDERLINE.match(line):
                return _RUN.findall(stripped)
        return []
    return []


def hidden_names(view: View, identity: IdentitySet) -> frozenset[str]:
    """The identity tokens ``view`` hides: those its translator shows under another name
    (``find_exposures`` no longer finds them in ``view.translator.to_view(token)``). Empty at L0."""
    to_view = view.translator.to_view
    return frozenset(t for t in identity if t not in find_exposures(to_view(t), identity))


class ViewManifest(TypedDict):
    """``view_manifest``'s answer: the identity tokens a view hides, and those it shows with why."""

    remapped: list[str]
    unmapped: dict[str, str]


def view_manifest(view: View, identity: IdentitySet) -> ViewManifest:
    """What ``view`` does with the repository's identity, found by the audit itself:
    ``remapped`` (sorted identity tokens it hides) and ``unmapped`` (token -> reason it stays
    visible: the reason the level wrote in ``meta["l2_unmapped"]``, else that the view's
    levels keep repository names, or that no level lists it)."""
    hidden = hidden_names(view, identity)
    listed = view.meta.get("l2_unmapped", {}) if isinstance(view.meta, Mapping) else {}
    renames = "l2_unmapped" in (view.meta or {})
    unmapped: dict[str, str] = {}
    for token in identity:
        if token not in hidden:
            unmapped[token] = listed.get(token) or (
                "left unmapped by L2 without a recorded reason" if renames
                else f"level {view.level} keeps repository names")
    return {"remapped": sorted(hidden), "unmapped": unmapped}


class ExposureLog:
    """The audit of one agent run, step by step (SchrodingerRepo §III-F).

    Built with the problem statement as shown; then for each step ``memorised(command)``
    before the observation is shown and ``shown(observation)`` after. ``seen`` holds every
    identity token shown so far; ``hidden`` the tokens the view hides (``hidden_names``).
    A *memorised* name is a hidden token the agent typed (as written, in view coordinates)
    that it had not been shown before that step: the statement and earlier observations
    did not name it. It still works, since the translator leaves an original name as it is.
    """

    def __init__(self, identity: IdentitySet, hidden: Iterable[str], statement: str) -> None:
        self.identity = identity
        self.hidden = frozenset(hidden)
        self.statement = sorted(find_exposures(statement, identity))
        self.seen: set[str] = set(self.statement)
        self.memorised_all: set[str] = set()

    def memorised(self, command: str) -> list[str]:
        """Sorted hidden tokens in ``command`` not shown before this step."""
        names = sorted((find_exposures(command, self.identity) & self.hidden) - self.seen)
        self.memorised_all.update(names)
        return names

    def shown(self, observation: str) -> list[str]:
        """Sorted identity tokens ``observation`` names; they count as seen from now on."""
        names = sorted(find_exposures(observation, self.identity))
        self.seen.update(names)
        return names
