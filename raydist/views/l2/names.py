"""Level 2 identifier extraction: which names of a repository are its own (SchrodingerRepo §III-C).

``extract_names(repo)`` parses every ``.py`` file with ``ast`` and collects the
repository-internal identifiers L2 may remap: package and module names (from the paths),
classes, functions and methods (at any depth), module- and class-level assignment targets
and aliases of repository imports. It then removes everything that is, or might be,
someone else's name, because renaming it would break the code the agent reasons about:

* keywords, builtins, standard-library module names, shell command names and bash reserved
  words, dunders, names under 3 characters;
* anything imported from outside the repository (and the module path it came from);
* attributes read from external objects (``itertools.groupby``, ``"x".join``), and
  attributes read from objects of unknown origin when the name is an attribute of a
  builtin type or of an imported standard-library module or class (``self._p.func`` with
  ``functools`` imported) or when no repository class defines it;
* keyword arguments of external calls (``sorted(key=...)``); for ``dict(...)`` only the
  keys that are external attribute names (``dict(groupby=...)`` beside ``itertools``);
* names that string literals compose into longer tokens (``'getzero_excepting_KeyError'``
  beside ``def getzero``), since code builds such strings from ``__name__`` at run time;
* methods of classes with third-party bases, and class members named like an attribute
  of a builtin type or a standard-library class, since external code may call them by
  name (``setUp`` of a ``unittest.TestCase``, ``find_spec`` of an import hook, ``keys``).
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from raydist.views.base import RepoFiles
from raydist.views.vocabulary import (
    BUILTINS,
    COMMAND_WORDS,
    GENERIC_WORDS,
    IDENTIFIER,
    KEYWORDS,
    OUTPUT_WORDS,
    STDLIB,
    external_attributes,
    importable_roots,
)

#: Shorter symbols (``foo``, ``idx``) are too often also string data or parts of composed
#: names; module and package names may be one character shorter.
MIN_LENGTH = 4
_PROTOCOL_MODULES = ("collections.abc", "importlib.abc", "io", "contextlib", "numbers")
_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr,
             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BinOp)


def is_reserved(name: str, min_length: int = MIN_LENGTH) -> str | None:
    """Why ``name`` can never be remapped (keyword, builtin, stdlib, shell word, traceback or
    test-report word, generic word, dunder, short), or None."""
    if name.startswith("__") and name.endswith("__"):
        return "dunder"
    if name in KEYWORDS:
        return "keyword"
    if name in BUILTINS:
        return "builtin"
    if name in STDLIB:
        return "stdlib module"
    if name in COMMAND_WORDS:
        return "shell word"
    if name in OUTPUT_WORDS:
        return "word of traceback or test-report framing"
    if name.lower() in GENERIC_WORDS:
        return "generic word (kept so prose stays readable)"
    if len(name) < min_length or not re.search(r"[A-Za-z]{2}", name):
        return "too short"
    return None


@dataclass(frozen=True)
class RepoNames:
    """The outcome of extraction.

    ``internal``: names to remap; ``excluded``: candidate or seen name -> reason it is kept;
    ``tokens``: every identifier-like token of the repository's ``.py`` text (strings and
    comments included), which virtual names must avoid; ``skipped``: path -> parse error.
    """

    internal: frozenset[str]
    excluded: Mapping[str, str]
    tokens: frozenset[str]
    skipped: Mapping[str, str] = field(default_factory=dict)


def path_names(paths: Iterable[str]) -> set[str]:
    """Directory and module names along ``.py`` paths that are identifiers."""
    return {part for p in paths for part in PurePosixPath(p[:-3]).parts if part.isidentifier()}


def _chain_root(node: ast.AST) -> tuple[ast.AST, bool]:
    """(root expression of an attribute/call/subscript chain, whether it is attributes only)."""
    plain = True
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, (ast.Call, ast.Subscript)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("super", "type"):
                return node, False
            node, plain = (node.func if isinstance(node, ast.Call) else node.value), False
        else:
            return node, plain


class _FileScan:
    """Facts one file contributes; see ``extract_names`` for how they combine."""

    def __init__(self, tree: ast.Module, roots: frozenset[str], package: str) -> None:
        self.roots, self.package = roots, package
        self.defined: set[str] = set()
        self.members: set[str] = set()
        self.external: dict[str, str] = {}
        self.ambiguous: set[str] = set()
        self.dict_keys: set[str] = set()
        self.stdlib_used: set[str] = set()
        self.strings: set[str] = set()
        self.ext_bound: set[str] = set()
        self.ext_std: set[str] = set()
        self.int_bound: set[str] = set()
        self._imports(tree)
        self._definitions(tree)
        for node in ast.walk(tree):
            self._use(node)

    def _is_internal_module(self, module: str | None, level: int) -> bool:
        return level > 0 or (module or "").split(".")[0] in self.roots

    def _imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self._bind(alias.name, alias.asname, bound, self._is_internal_module(alias.name, 0))
            elif isinstance(node, ast.ImportFrom):
                internal = self._is_internal_module(node.module, node.level)
                if not internal and node.module:
                    self._exclude(node.module.split("."), f"external module {node.module}")
                for alias in node.names:
                    if alias.name != "*":
                        self._bind(f"{node.module}.{alias.name}" if not internal else alias.name,
                                   alias.asname, alias.asname or alias.name, internal)

    def _bind(self, name: str, asname: str | None, bound: str, internal: bool) -> None:
        if internal:
            self.int_bound.add(bound)
            if asname:
                self.defined.add(asname)
            return
        self.ext_bound.add(bound)
        self._exclude([*name.split("."), bound], f"imported from outside ({name})")
        if name.split(".")[0] in STDLIB:
            self.ext_std.add(bound)
            self.stdlib_used.add(name.rsplit(".", 1)[0] if "." in name else name)

    def _exclude(self, names: Iterable[str], reason: str) -> None:
        for name in names:
            self.external.setdefault(name, reason)

    def _definitions(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            self.defined.update(_targets(stmt))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            if isinstance(node, ast.ClassDef):
                self._class(node)

    def _class(self, node: ast.ClassDef) -> None:
        names = {n for stmt in node.body for n in _targets(stmt)}
        names |= {s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        self.defined |= names
        self.members |= names
        kinds = {self._origin(base) for base in node.bases}
        if kinds & {"third-party", "ambiguous"}:
            self._exclude(names, f"member of {node.name}, whose base is not the repository's")

    def _origin(self, expr: ast.AST) -> str:
        root, plain = _chain_root(expr)
        if isinstance(root, _LITERALS):
            return "stdlib"
        if not isinstance(root, ast.Name):
            return "ambiguous"
        name = root.id
        if name in ("self", "cls") or name in self.int_bound or name in self.defined:
            return "internal" if plain else "ambiguous"
        if name in self.ext_bound:
            return "stdlib" if name in self.ext_std else "third-party"
        if name in BUILTINS:
            return "stdlib"
        return "ambiguous"

    def _use(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.strings.update(IDENTIFIER.findall(node.value))
        elif isinstance(node, ast.Attribute):
            self._attribute(node.value, node.attr)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr", "setattr", "delattr") \
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str):
                self._attribute(node.args[0], node.args[1].value)
            keywords = [k.arg for k in node.keywords if k.arg]
            if isinstance(func, ast.Name) and func.id == "dict" and "dict" not in self.defined:
                self.dict_keys.update(keywords)
            elif self._origin(func) in ("stdlib", "third-party"):
                self._exclude(keywords, "keyword argument of an external call")

    def _attribute(self, base: ast.AST, attr: str) -> None:
        origin = self._origin(base)
        if origin in ("stdlib", "third-party"):
            self._exclude([attr], "attribute of an external object")
        elif origin == "ambiguous":
            self.ambiguous.add(attr)


def _targets(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _snake_parts(token: str) -> set[str]:
    """Every run of consecutive ``_``-separated parts of ``token`` (``a_b_c`` -> ``a``, ``a_b``...)."""
    parts = token.split("_")
    return {"_".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}


#: Files larger than this are data (Unicode tables, fixtures); their tokens are not collected.
MAX_TEXT_BYTES = 2_000_000


def text_tokens(repo: RepoFiles) -> set[str]:
    """Identifier tokens of every non-``.py`` file of ``repo`` up to ``MAX_TEXT_BYTES`` (hidden
    directories skipped), decoded as UTF-8 or, failing that, Latin-1 (never raises for content)."""
    tokens: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(repo.root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            if name.endswith((".py", ".pyc")) or not os.path.isfile(full) or os.path.getsize(full) > MAX_TEXT_BYTES:
                continue
            with open(full, "rb") as handle:
                data = handle.read()
            if b"\0" in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = data.decode("latin-1")
            tokens.update(IDENTIFIER.findall(text))
    return tokens


def extract_names(repo: RepoFiles) -> RepoNames:
    """Repository-internal identifiers of ``repo`` (see the module doc for the rules).

    Files ``ast`` cannot parse still contribute their path names and tokens and are listed
    in ``skipped``, and so are ``.py`` files that are not UTF-8 (their tokens read as Latin-1).
    ``tokens`` also holds the identifier tokens of every other text file (README, docs,
    ``setup.cfg``...), so no virtual word equals a word the agent may read there.
    """
    paths = repo.python_files()
    roots = importable_roots(paths)
    candidates = path_names(paths)
    tokens: set[str] = set()
    scans: list[_FileScan] = []
    skipped: dict[str, str] = {}
    for path in paths:
        try:
            text = repo.read(path) or ""
        except ValueError:  # not UTF-8: the file stays byte for byte, its tokens are still avoided
            skipped[path] = "not UTF-8: kept byte for byte, its names not read"
            tokens.update(IDENTIFIER.findall((repo.root / path).read_bytes().decode("latin-1")))
            continue
        tokens.update(IDENTIFIER.findall(text))
        try:
            with warnings.catch_warnings():  # the repository's own warnings (bad escapes) are not ours
                warnings.simplefilter("ignore")
                tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError) as err:
            skipped[path] = f"{type(err).__name__}: {err}"
            continue
        scans.append(_FileScan(tree, roots, str(PurePosixPath(path).parent)))
    tokens |= candidates | text_tokens(repo)
    excluded: dict[str, str] = {}
    for scan in scans:
        candidates |= scan.defined
        for name, reason in scan.external.items():
            excluded.setdefault(name, reason)
    ext_attrs = external_attributes({m for s in scans for m in s.stdlib_used} | set(_PROTOCOL_MODULES))
    members = {m for s in scans for m in s.members}
    for name in members & ext_attrs:
        excluded.setdefault(name, "class member named like an external attribute")
    for scan in scans:
        for name in scan.ambiguous:
            if name in ext_attrs or name not in members:
                excluded.setdefault(name, "attribute of an object that may be external")
        for name in scan.dict_keys & ext_attrs:
            excluded.setdefault(name, "name of an external attribute")
    for token in {t for s in scans for t in s.strings} - candidates:
        for name in _snake_parts(token) & candidates:
            excluded.setdefault(name, f"composed into the string token {token}")
    modules = path_names(paths)
    for name in candidates:
        reserved = is_reserved(name, MIN_LENGTH - 1 if name in modules else MIN_LENGTH)
        if reserved:
            excluded.setdefault(name, reserved)
    internal = frozenset(n for n in candidates if n not in excluded and n.isascii())
    return RepoNames(internal=internal, excluded=excluded, tokens=frozenset(tokens), skipped=skipped)
