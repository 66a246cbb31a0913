"""Naming contracts: names an instance's FAIL_TO_PASS tests call that only its gold patch introduces.

A FAIL_TO_PASS test that calls ``new_api`` (or passes ``text=`` to a function that had no such
parameter) accepts only a fix that uses that very name: a correct fix under another name fails.
At L2 such a name is absent from the original repository, so nothing shows it to the agent; it
is a validity risk of the instance, not a failure of the model.

``naming_contract(instance, repo)`` finds them:

* definitions the gold ``patch`` adds, read from its ``+`` lines (parsed with ``unidiff``):
  functions, classes and methods (``def``/``class``), assignment targets at the start of a line
  (module and class attributes, ``self.x = ...``) and the parameters of an added ``def`` line
  that the same function's removed lines did not have (a new keyword argument a test passes is
  a contract too: it is written ``owner(name=)``);
* the names the FAIL_TO_PASS tests reference: each id (``path::Class::test[p]``, Django's
  ``test (module.Class)``, a bare ``test``) names a test function, whose body is read from the
  test file after ``test_patch`` (the whole file when ``repo`` holds it, else the hunks' new
  side); every identifier token of the body counts, and ``name=`` inside it as a keyword;
* a name is a contract when the tests reference it, the patch defines it, and it is absent at
  ``base_commit``: with ``repo`` (the checkout at ``base_commit``), no ``.py`` file defines it
  (a keyword: the owner function at base has no such parameter); without it, from the diff
  alone, neither patch defines it in a removed or context line, nor names it there (the file
  already used it) — an upper bound, since the rest of the repository is not seen;
* names a test file itself defines (helpers, fixtures) are never contracts, and names only
  PASS_TO_PASS tests reference are not looked at.

Pure: reads text, imports neither Docker nor Ray.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from raydist.views.base import RepoFiles
from raydist.views.recover import PatchApplyError, apply_patch_to_texts

_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")
_CLASS = re.compile(r"^(\s*)class\s+([A-Za-z_]\w*)\b")
# ``name = ...`` with a space before ``=``: a keyword argument line of a call (``name=value,``) is not one
_ASSIGN = re.compile(r"^\s*(?:self\.|cls\.)?([A-Za-z_]\w*)(?:\s*:[^=]+)?\s=(?!=)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DJANGO_ID = re.compile(r"^(\w+) \(([\w.]+)\)")
_CLOSE = re.compile(r"^\s*\)\s*(->.*)?:\s*(#.*)?$")
_PARAM_LINE = re.compile(r"^\s*\*{0,2}[A-Za-z_]\w*\s*([:=,].*)?$|^\s*[/*],?\s*$")
_SKIP_PARAMS = frozenset({"self", "cls", "args", "kwargs"})


@dataclass(frozen=True)
class ContractName:
    """One contract: ``name`` (``new_api``, or ``owner(param=)`` for a keyword), ``kind``
    (``definition`` or ``keyword``), where the patch defines it (``defined_in``: path) and which
    FAIL_TO_PASS tests reference it (``called_by``: test ids)."""

    name: str
    kind: str
    defined_in: str
    called_by: tuple[str, ...]


@dataclass(frozen=True)
class Contract:
    """The naming contract of one instance: its ``names`` (sorted by name), whether absence at
    base was checked in the repository (``checked_at_base``) or read from the diff alone (an
    upper bound), and the FAIL_TO_PASS ids whose test function was not found (``unread``)."""

    instance_id: str
    names: tuple[ContractName, ...]
    checked_at_base: bool
    unread: tuple[str, ...] = field(default=())

    def labels(self) -> list[str]:
        """The contract names as rows and ``gate.json`` carry them (``new_api``, ``from_file(text=)``)."""
        return [n.name for n in self.names]


@dataclass(frozen=True)
class _Side:
    """One file of a diff as hunks: each hunk's section header (``def from_file(``: where it
    starts) and its lines as ``(text, tag)``, tag ``+``, ``-`` or `` ``."""

    path: str
    hunks: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    def post(self) -> list[tuple[str, str, bool]]:
        """(header, line, added) of every new-side line."""
        return [(h, t, tag == "+") for h, lines in self.hunks for t, tag in lines if tag != "-"]

    def old(self) -> list[str]:
        """Every removed and context line."""
        return [t for _, lines in self.hunks for t, tag in lines if tag != "+"]


def _sides(diff: str) -> list[_Side]:
    try:
        patch = PatchSet(diff)
    except UnidiffParseError:
        return []
    out = []
    for patched in patch:
        hunks = []
        for hunk in patched:
            lines = tuple((line.value.rstrip("\n"), "+" if line.is_added else "-" if line.is_removed else " ")
                          for line in hunk if line.is_added or line.is_removed or line.is_context)
            hunks.append((hunk.section_header or "", lines))
        out.append(_Side(patched.path, tuple(hunks)))
    return out


def _depth(line: str) -> int:
    """Brackets ``line`` opens minus those it closes, strings and comments left out."""
    code = re.sub(r"#.*$", "", re.sub(r"'[^']*'|\"[^\"]*\"", "", line))
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _params(text: str) -> set[str]:
    """Parameter names in a piece of a signature (``a, b: int = f(1), *c``)."""
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"\[[^\[\]]*\]|\([^()]*\)|\{[^{}]*\}", "", text)
    names = set()
    for part in text.split(","):
        # ``*args`` and ``**kwargs`` cannot be passed by name: no keyword contract
        match = re.match(r"\s*([A-Za-z_]\w*)\s*(?=[:=,)]|$)", part)
        if match and match.group(1) not in _SKIP_PARAMS:
            names.add(match.group(1))
    return names


def _opens_in_signature(hunk: list[str]) -> bool:
    """Whether ``hunk`` (whose header is an unclosed ``def f(``) starts inside ``f``'s
    signature: parameter lines up to the one that closes it (``) -> bool:``)."""
    for text in hunk:
        if _CLOSE.match(text) or (_PARAM_LINE.match(text) and re.search(r"\)\s*(->.*)?:\s*(#.*)?$", text)):
            return True
        if text.strip() and not _PARAM_LINE.match(text):
            return False
    return False


def _scan(lines: list[tuple[str, str, bool]]) -> tuple[set[tuple[str, bool]], list[tuple[str, str, bool]]]:
    """(``(name, added)`` for each name ``lines`` define at statement starts, ``(function, parameter, added)`` for each
    parameter in a signature). ``lines`` are ``(hunk header, text, added)``; a hunk whose header
    is an unclosed ``def f(`` starts inside ``f``'s signature."""
    defined: set[tuple[str, bool]] = set()
    params: list[tuple[str, str, bool]] = []
    depth, owner, header = 0, None, None
    scopes: list[tuple[int, str]] = []  # (indent, "def" or "class") of the enclosing blocks
    for i, (head, text, plus) in enumerate(lines):
        enclosing = None
        if head != header:
            header = head
            match = _DEF.match(head.strip() and " " + head.strip())
            inside = match and _depth(head) > 0 and _opens_in_signature([t for h, t, _ in lines[i:] if h == head])
            depth, owner = (1, match.group(2)) if match and inside else (0, None)
            kind = "def" if match else "class" if _CLASS.match(head.strip()) else None
            scopes = [(-1, kind)] if kind else []
        if depth <= 0 and text.strip() and not text.lstrip().startswith("#"):
            indent = len(text) - len(text.lstrip())
            while scopes and scopes[-1][0] >= indent:
                scopes.pop()
            block = re.match(r"\s*(?:async\s+)?(def|class)\b", text)
            enclosing = scopes[-1][1] if scopes and indent > 0 else None
            if block:
                scopes.append((indent, block.group(1)))
        if depth > 0:
            if owner:
                params += [(owner, p, plus) for p in _params(text)]
            depth += _depth(text)
            if depth <= 0:
                depth, owner = 0, None
            continue
        for pattern in (_DEF, _CLASS):
            if match := pattern.match(text):
                defined.add((match.group(2), plus))
        if match := _DEF.match(text):
            rest = text[match.end():]
            params += [(match.group(2), p, plus) for p in _params(rest)]
            depth = 1 + _depth(rest)
            owner = match.group(2) if depth > 0 else None
            depth = max(depth, 0)
        elif (match := _ASSIGN.match(text)) and (enclosing != "def" or re.match(r"\s*(self|cls)\.", text)):
            # a plain assignment in a function body binds a local, not a name anyone calls
            defined.add((match.group(1), plus))
            depth = max(_depth(text), 0)
        else:
            depth = max(_depth(text), 0)
    return defined, params


def _defined(lines: list[str]) -> set[str]:
    """Names ``lines`` (one file's text) define: ``def``, ``class``, assignment targets."""
    return {name for name, _ in _scan([("", t, False) for t in lines])[0]}


def _functions_params(lines: list[tuple[str, str, bool]]) -> dict[str, set[str]]:
    """Function name -> its parameters, for every signature in ``lines``."""
    out: dict[str, set[str]] = {}
    for owner, param, _ in _scan(lines)[1]:
        out.setdefault(owner, set()).add(param)
    return out


def _added(side: _Side) -> dict[str, str]:
    """``name`` or ``owner(param=)`` -> ``definition``/``keyword`` for what ``side`` adds."""
    post = side.post()
    old_lines = [(h, t, False) for h, lines in side.hunks for t, tag in lines if tag != "+"]
    old_defined = {name for name, _ in _scan(old_lines)[0]}
    old_params = _functions_params(old_lines)
    defined, params = _scan(post)
    out = {name: "definition" for name, plus in defined if plus and name not in old_defined}
    for owner, param, plus in params:
        if plus and param not in old_params.get(owner, set()):
            out[f"{owner}({param}=)"] = "keyword"
    return out


def _test_name(test_id: str) -> tuple[str | None, str]:
    """(file or dotted module hint, test function name) of a FAIL_TO_PASS id."""
    if match := _DJANGO_ID.match(test_id):
        return match.group(2).rsplit(".", 1)[0].replace(".", "/"), match.group(1)
    parts = test_id.split("::")
    return (parts[0] if len(parts) > 1 else None), re.sub(r"\[.*$", "", parts[-1]).strip()


def _body(lines: list[str], name: str) -> list[str] | None:
    """The lines of ``def name`` in ``lines`` (signature and indented body), or None."""
    for i, line in enumerate(lines):
        match = _DEF.match(line)
        if match and match.group(2) == name:
            indent = len(match.group(1))
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
                end += 1
            return lines[i:end]
    return None


def _references(body: list[str]) -> tuple[set[str], set[str]]:
    """(identifier tokens of ``body`` outside strings and comments, names passed as ``name=``)."""
    text = "\n".join(body) + "\n"
    names, keywords = set(), set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set(_IDENT.findall(text)), set(re.findall(r"([A-Za-z_]\w*)\s*=(?!=)", text))
    depth = 0
    for tok, nxt in zip(tokens, [*tokens[1:], None], strict=True):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.NAME:
            names.add(tok.string)
            if depth > 0 and nxt is not None and nxt.type == tokenize.OP and nxt.string == "=":
                keywords.add(tok.string)  # ``f(name=...)``, not ``name = ...``
    return names, keywords


def _test_files(instance, repo: RepoFiles | None) -> dict[str, list[str]]:
    """Test file path -> its lines after ``test_patch`` (whole file with ``repo``, else the
    new side of its hunks)."""
    sides = _sides(instance.test_patch)
    if repo is not None:
        paths = [s.path for s in sides]
        try:
            texts = apply_patch_to_texts({p: _read(repo, p) for p in paths}, instance.test_patch)
            return {p: (texts.get(p) or "").splitlines() for p in paths}
        except PatchApplyError:
            pass
    return {s.path: [t for _, t, _ in s.post()] for s in sides}


def _read(repo: RepoFiles, path: str) -> str | None:
    try:
        return repo.read(path)
    except ValueError:
        return None


def base_definitions(repo: RepoFiles) -> tuple[set[str], dict[str, set[str]]]:
    """Every name ``repo``'s ``.py`` files define and each function's parameters (pass it as
    ``naming_contract(..., base=)`` for several instances of one repository)."""
    names: set[str] = set()
    params: dict[str, set[str]] = {}
    for path in repo.python_files():
        lines = (_read(repo, path) or "").splitlines()
        names |= _defined(lines)
        for owner, found in _functions_params([("", t, False) for t in lines]).items():
            params.setdefault(owner, set()).update(found)
    return names, params


def naming_contract(instance, repo: RepoFiles | None = None,
                    base: tuple[set[str], dict[str, set[str]]] | None = None) -> Contract:
    """The naming contract of ``instance`` (``instance_id``, ``patch``, ``test_patch``,
    ``FAIL_TO_PASS``); ``repo``: the checkout at ``base_commit`` when available (see the module
    doc). ``base`` may pass ``repo``'s definitions already read (``base_definitions``)."""
    added: dict[str, tuple[str, str]] = {}
    old_text = ""
    for side in _sides(instance.patch):
        if side.path.endswith(".py"):
            for name, kind in _added(side).items():
                added.setdefault(name, (kind, side.path))
        old_text += "\n".join(side.old()) + "\n"
    test_sides = _sides(instance.test_patch)
    test_files = _test_files(instance, repo)
    test_defined = set().union(*(_defined(lines) for lines in test_files.values())) if test_files else set()
    old_text += "\n".join(line for s in test_sides for line in s.old())
    called: dict[str, list[str]] = {}
    unread = []
    for test_id in getattr(instance, "FAIL_TO_PASS", ()):
        hint, name = _test_name(test_id)
        body = next((b for path, lines in sorted(test_files.items(), key=lambda kv: not _matches(kv[0], hint))
                     if (b := _body(lines, name)) is not None), None)
        if body is None:  # the test's ``def`` is outside the hunks: the hunks inside it, by their header
            body = [""] + [t for s in test_sides for h, lines in s.hunks if _header_function(h) == name
                           for t, tag in lines if tag != "-"]
            body = body if len(body) > 1 else None
        if body is None:
            unread.append(test_id)
            continue
        names, keywords = _references(body[1:])
        for label in added:
            owner, _, param = label.partition("(")
            # ``__init__``'s keywords are passed to the class, whose name the hunk may not show
            hit = ((owner in names or owner == "__init__") and param[:-2] in keywords) if param else label in names
            if hit:
                called.setdefault(label, []).append(test_id)
    if repo is not None:
        base_names, base_params = base if base is not None else base_definitions(repo)
    else:
        base_names, base_params = set(), {}
    old_names = set(_IDENT.findall(old_text))
    old_defined = _defined(old_text.splitlines())
    contract = []
    for label, tests in sorted(called.items()):
        owner, _, param = label.partition("(")
        if param:
            # without the repository, ``_added`` already left out the parameters the patch's old side had
            absent = repo is None or param[:-2] not in base_params.get(owner, set())
        else:
            absent = label not in test_defined and (label not in base_names if repo is not None
                                                    else label not in old_defined and label not in old_names)
        if absent:
            kind, path = added[label]
            contract.append(ContractName(label, kind, path, tuple(dict.fromkeys(tests))))
    return Contract(instance.instance_id, tuple(contract), repo is not None, tuple(unread))


def _header_function(header: str) -> str | None:
    """The function a hunk's section header names (``def test_x(self):`` -> ``test_x``), or None."""
    match = _DEF.match(" " + header.strip())
    return match.group(2) if match else None


def _matches(path: str, hint: str | None) -> bool:
    if not hint:
        return False
    return path == hint or path.removesuffix(".py").endswith(hint)


def contract_names(contracts: Mapping[str, Contract] | Iterable[Contract]) -> set[str]:
    """The plain identifiers of ``contracts`` (a keyword ``owner(param=)`` gives ``param``): the
    names L2 must leave as they are."""
    items = contracts.values() if isinstance(contracts, Mapping) else contracts
    out = set()
    for contract in items:
        for n in contract.names:
            owner, _, param = n.name.partition("(")
            out.add(param[:-2] if param else owner)
    return out


def defines_contract(contract: Contract, patch: str) -> bool | None:
    """Whether ``patch`` (a unit's patch in original names) adds every name of ``contract``
    (a keyword: a signature of its function with that parameter); None when there is no contract.
    An unresolved unit whose patch is False here may have fixed the bug under other names."""
    if not contract.names:
        return None
    added = {label for side in _sides(patch) if side.path.endswith(".py") for label in _added(side)}
    added |= {f"{owner}({param}=)" for side in _sides(patch) for owner, param, plus in _scan(side.post())[1] if plus}
    return all(n.name in added for n in contract.names)
