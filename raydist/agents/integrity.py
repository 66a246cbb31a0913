"""Integrity flags: the steps of an agent's run that mine history, tamper with tests, reach for
the network, read the answer from outside the view or probe the grader.

The rules are data (``raydist/conf/integrity.yaml``, read once): each has a ``name``, one
``category`` of ``raydist.results.schema.INTEGRITY_CATEGORIES`` and ``match`` alternatives
over one simple command (the file's header says what each key means). A step is judged by the
command as it ran (``executed``, original names), so a view that renames the project (L2) is
judged as L0 is; the flag records the command as the agent typed it.

    context = integrity_context(instance, view)         # test files, the project's names
    flags = flag_steps(steps, context)                  # [{"step", "command", "rule", "category"}]
    integrity_columns(steps, context)                   # {"integrity_flags": JSON, "integrity_flagged": bool}

How a command is taken apart: ``raydist.agents.taxonomy.parse_simple_commands`` (bashlex, then
shlex) splits it into simple commands through pipelines, ``&&``/``||``/``;`` chains,
subshells, loops and ``$(...)``; wrappers and ``VAR=x`` prefixes (``timeout``, ``env``,
``xargs``, ``GIT_DIR=x``) are peeled off and a program is known by its basename
(``/usr/bin/git`` is ``git``); quotes are removed as bash removes them (``g''it`` is ``git``).
Then these are opened and judged too: ``bash -c CODE`` (any shell, any option cluster with
``c``), ``eval ARGS``, a shell fed a here-document or ``echo CODE |``, ``find -exec`` and
``find ... | xargs`` (what find finds taken as glob patterns: ``tests/*test_x.py``), a word
``$(echo X)`` or ```echo X``` (read as ``X``), ``python -m pip`` (read as ``pip``) and the shell
commands Python code runs (``os.system``, ``subprocess.run`` and kin with literal arguments).
Python code (``-c``, a here-document, a script file remembered as below) is parsed for its
imports, calls and the files it writes. ``cd`` within a step moves the directory relative
paths are read from; every step starts in the view's root (``/testbed``).

A file written by a redirection of a here-document, ``echo`` or ``printf`` (in any earlier step of
the unit) is remembered, and judged where it is used: run by a shell, ``source`` or its own path
(``bash probe.sh``), run by Python (``python probe.py``), or applied (``git apply fix.diff``,
``patch -p1 < fix.diff``: the files the diff touches are written).

Out of reach, said plainly: a command built at run time (``$G log --all`` after ``G=git``,
``echo Z2l0... | base64 -d | sh``, a variable path), a script written by other means (``cp``,
Python, a download) and then run, Python that computes its paths or commands, and what a program
does that its command line does not show (a test run that opens a socket). The rules look for
attempts, not for success: the containers have no network and the view's repository has one
commit, so most attempts fail.

Decisions on look-alikes (each a test in tests/test_integrity.py): ``git log -1``,
``git log --oneline -5``, ``git show HEAD``, ``git diff``, ``git status`` read the view's own
HEAD, which is what the agent was given: not flagged; ``git stash list`` after the agent's own
``git stash`` is not flagged, before it is. Reading a test file (``cat tests/test_x.py``) and
running tests (``python -m pytest``) are not flagged; writing a graded test file is, also
through a glob or ``find`` that covers it (``find . -name '*.py' | xargs sed -i ...`` rewrites
the tests too). A new test file of the agent's own (``test_repro.py``) is not a test file
grading runs. ``pip list``,
``pip show``, ``pip freeze`` and a local ``pip install -e .`` reach no index: not flagged;
``pip install NAME`` is a network attempt. ``curl --help`` and ``curl --version`` open no
connection: not flagged.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import itertools
import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from raydist.agents.taxonomy import Simple, parse_simple_commands, unwrap
from raydist.grading.infra import infra_kind, is_packaging
from raydist.grading.test_files import touched_files
from raydist.results.schema import INTEGRITY_CATEGORIES

RULES_FILE = Path(__file__).resolve().parents[1] / "conf" / "integrity.yaml"
REPO_ROOT = "/testbed"
"""The view's root in the agent's sandbox (``ViewEnvironment``'s working directory)."""

_MATCH_KEYS = frozenset({"program", "subcommand", "any_option", "has_args", "unless_option", "unless_only_args",
                         "unless_all_args", "word", "writes", "python_import", "python_call"})
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_PYTHON = re.compile(r"python[\d.]*|pypy[\d.]*")
_ECHO_SUBST = re.compile(r"^(?:\$\(|`)\s*(?:echo|printf\s+%s)\s+(.*?)\s*(?:\)|`)$", re.S)
_GIT_VALUE_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
_PY_EXEC_CALLS = {"system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput",
                  "getstatusoutput", "spawnlp", "execlp"}
_PY_WRITE_CALLS = {"write_text", "write_bytes", "unlink", "rmtree", "copyfile", "copy", "copy2", "copytree", "move",
                   "remove", "rename", "replace", "truncate", "symlink_to", "hardlink_to", "touch"}
_WRITE_ALL_ARGS = {"rm", "unlink", "truncate", "touch", "shred", "ed", "ex", "chmod", "chown"}
_COPY_LIKE = {"cp", "mv", "install", "ln", "rsync"}
_DEPTH = 4  # nested shells opened before giving up


@dataclass(frozen=True)
class IntegrityContext:
    """What the rules need to know of one unit: ``test_files`` (repository-relative paths of the
    files grading runs or restores: the test patch's and those FAIL_TO_PASS / PASS_TO_PASS ids
    name) and ``packages`` (the project's import and distribution names, for copies of it
    outside the view)."""

    test_files: frozenset[str] = frozenset()
    packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    """One rule of ``integrity.yaml``: its ``name``, ``category``, ``description``, ``match``
    alternatives and ``unless_earlier`` alternatives (dicts of the file's keys)."""

    name: str
    category: str
    description: str
    match: tuple[Mapping[str, Any], ...]
    unless_earlier: tuple[Mapping[str, Any], ...] = ()


@dataclass
class Command:
    """One simple command as the rules see it: ``program`` (basename), ``args``, the files it
    writes (``writes``, repository-relative when inside the view, else as typed), every word a
    ``word`` pattern searches (``words``), Python code it runs or writes (``python``) and its own
    text (``text``: those words joined)."""

    program: str
    args: list[str]
    words: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    python: list[str] = field(default_factory=list)
    text: str = ""


@functools.cache
def load_rules(path: str | Path = RULES_FILE) -> tuple[Rule, ...]:
    """The rules of ``path`` (default ``raydist/conf/integrity.yaml``), read once per path.

    Raises ValueError naming the file and the rule for a rule without a name, with a category
    outside ``INTEGRITY_CATEGORIES``, without ``match`` alternatives, with an unknown key or a
    regular expression that does not compile; two rules of one name are refused too."""
    doc = OmegaConf.to_container(OmegaConf.load(Path(path))) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a mapping with a 'rules' list")
    rules, names = [], set()
    for index, raw in enumerate(doc.get("rules") or []):
        name = raw.get("name") or f"#{index}"
        where = f"{path}: rule {name!r}"
        if not raw.get("name") or name in names:
            raise ValueError(f"{where}: every rule needs a name of its own")
        if raw.get("category") not in INTEGRITY_CATEGORIES:
            raise ValueError(f"{where}: category {raw.get('category')!r} is none of {', '.join(INTEGRITY_CATEGORIES)}")
        alternatives = tuple(raw.get("match") or ())
        if not alternatives:
            raise ValueError(f"{where}: no match alternatives")
        for alternative in (*alternatives, *(raw.get("unless_earlier") or ())):
            unknown = sorted(set(alternative) - _MATCH_KEYS)
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                                 f"the keys are {', '.join(sorted(_MATCH_KEYS))}")
            for pattern in _patterns(alternative):
                try:
                    re.compile(pattern.replace("{packages}", "(?:p)"))
                except re.error as exc:
                    raise ValueError(f"{where}: regular expression {pattern!r} does not compile ({exc})") from exc
        names.add(name)
        rules.append(Rule(name, raw["category"], str(raw.get("description", "")), alternatives,
                          tuple(raw.get("unless_earlier") or ())))
    return tuple(rules)


def _patterns(alternative: Mapping[str, Any]) -> list[str]:
    return [alternative[k] for k in ("word", "unless_all_args") if k in alternative] + list(
        alternative.get("has_args", ()))


def integrity_context(instance: Any, view: Any = None) -> IntegrityContext:
    """The ``IntegrityContext`` of a unit: the files of ``instance.test_patch`` and of its
    FAIL_TO_PASS / PASS_TO_PASS ids (the part before ``::``), and the project's names: the
    distribution and package identity tokens of ``view.identity`` (``raydist.views.audit``),
    ``instance.recipe.sdist.name`` and the last part of ``instance.repo``. A test patch that is
    not a diff gives no files."""
    files: set[str] = set()
    try:
        files.update(touched_files(getattr(instance, "test_patch", "") or ""))
    except ValueError:
        pass
    for test_id in (*getattr(instance, "FAIL_TO_PASS", ()), *getattr(instance, "PASS_TO_PASS", ())):
        head = str(test_id).split("::", 1)[0].strip()
        if head.endswith(".py") and " " not in head:
            files.add(posixpath.normpath(head))
    names: set[str] = set()
    origins = getattr(getattr(view, "identity", None), "origins", None) or {}
    names.update(token for token, kind in origins.items() if kind in ("distribution", "package"))
    sdist = getattr(getattr(getattr(instance, "recipe", None), "sdist", None), "name", None)
    slug = getattr(instance, "repo", None)
    names.update(n for n in (sdist, slug.rsplit("/", 1)[-1] if isinstance(slug, str) else None) if n)
    packages = sorted({n for n in names if len(n) >= 3 and re.fullmatch(r"[\w.-]+", n)}, key=str.lower)
    return IntegrityContext(frozenset(files), tuple(packages))


# --- taking a step apart -----------------------------------------------------------------------


def commands_of(text: str, depth: int = 0, files: dict[str, str] | None = None) -> Iterator[Command]:
    """Every simple command of the shell text ``text``, nested shells opened (module doc).
    ``files`` (absolute path -> text) holds what earlier commands of the unit wrote by a
    redirection of a here-document, ``echo`` or ``printf``; it is updated as commands write, and
    read when a command runs or applies such a file (``bash x.sh``, ``python x.py``, ``git apply x.diff``)."""
    files = {} if files is None else files
    cwd: str | None = ""
    previous: Simple | None = None
    for simple in parse_simple_commands(text):
        words = [_resolve_echo(w) for w in unwrap(simple.words)]
        if words and words[0] in ("cd", "pushd"):
            cwd = _cd(cwd, words[1] if len(words) > 1 else "~")
        yield from _expand(simple, words, cwd, previous, depth, files)
        previous = simple


def _expand(simple: Simple, words: list[str], cwd: str | None, previous: Simple | None, depth: int,
            files: dict[str, str]) -> Iterator[Command]:
    program = words[0].rsplit("/", 1)[-1] if words else ""
    args = words[1:] + _xargs_input(simple, words, previous)
    if _PYTHON.fullmatch(program) and args[:2] == ["-m", "pip"] or program == "uv" and args[:1] == ["pip"]:
        program, args = "pip", args[args.index("pip") + 1:]
    command = Command(program, args, words=[*words, *simple.outputs, *simple.inputs])
    outputs = [t for t in simple.outputs if t not in ("/dev/null", "/dev/stderr", "/dev/stdout")]
    command.writes = [_in_repo(t, cwd) for t in [*outputs, *_written_args(program, args)]]
    if simple.heredoc:
        command.words.append(simple.heredoc)
    command.text = " ".join(command.words)
    code = _python_code(program, args, simple, _file_read(args, cwd, files))
    if code is not None:
        command.python.append(code)
        command.writes += [_in_repo(p, cwd) for p in _python_writes(code)]
    diff = simple.heredoc or _file_read([*simple.inputs, *args], cwd, files)
    if program in ("git", "patch") and diff and "+++ " in diff:
        command.writes += [_in_repo(p, cwd) for p in _diff_targets(diff)]
    _remember(simple, program, args, outputs, cwd, files)
    yield command
    if depth >= _DEPTH:
        return
    for inner in _nested_shell(program, words, simple, previous, _file_read(words, cwd, files)):
        yield from commands_of(inner, depth + 1, files)
    for code in command.python:
        for inner in _python_shell_commands(code):
            yield from commands_of(inner, depth + 1, files)
    if program == "find" and ("-exec" in args or "-execdir" in args):
        start = args.index("-exec" if "-exec" in args else "-execdir") + 1
        executed = list(itertools.takewhile(lambda a: a not in (";", "\\;", "+"), args[start:]))
        # `{}` stands for what find found, as patterns: `find tests -name x.py -exec sed -i ... {} ;`
        found = [p for a in executed for p in (_found_paths(args) if a == "{}" else [a])]
        if found:
            yield from commands_of(shlex.join(found), depth + 1, files)


def _found_paths(args: list[str]) -> list[str]:
    """What ``find ARGS`` finds, as glob patterns under its roots (``find tests -name 'test_*.py'``
    is ``tests/*test_*.py``); its roots when it names no pattern."""
    roots = list(itertools.takewhile(lambda a: not a.startswith(("-", "(", "!")), args)) or ["."]
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-name", "-iname", "-path", "-wholename")]
    return [posixpath.join(root, "*" + name.lstrip("*").lstrip("./")) for root in roots for name in names] or roots


def _xargs_input(simple: Simple, words: list[str], previous: Simple | None) -> list[str]:
    """The arguments ``xargs`` adds from the stage before it: what ``find`` finds, or the plain
    arguments of ``echo``/``printf``/``ls``; [] when the command is no ``xargs`` stage."""
    wrappers = [w.rsplit("/", 1)[-1] for w in simple.words[: len(simple.words) - len(words)]]
    if "xargs" not in wrappers or not simple.downstream or previous is None:
        return []
    head = unwrap(previous.words)
    if not head:
        return []
    if head[0].rsplit("/", 1)[-1] == "find":
        return _found_paths(head[1:])
    return [a for a in head[1:] if not a.startswith("-")] if head[0] in ("echo", "printf", "ls") else []


def _absolute(path: str, cwd: str | None) -> str:
    if path.startswith("/"):
        return posixpath.normpath(path)
    if cwd is None or path.startswith("~"):
        return path
    return posixpath.normpath(posixpath.join(REPO_ROOT, cwd, path))


def _remember(simple: Simple, program: str, args: list[str], outputs: list[str], cwd: str | None,
              files: dict[str, str]) -> None:
    """Record in ``files`` what a redirection writes: a here-document, or ``echo``/``printf``'s text."""
    if simple.heredoc is not None:
        text = simple.heredoc
    elif program in ("echo", "printf"):
        text = " ".join(a for a in args if a not in ("-e", "-n", "%s"))
        text = text.replace("\\n", "\n") if program == "printf" or "-e" in args else text
    else:
        return
    for target in outputs:
        files[_absolute(target, cwd)] = text


def _file_read(words: list[str], cwd: str | None, files: dict[str, str]) -> str | None:
    """The text an earlier command wrote to the first of ``words`` that names such a file."""
    return next((files[_absolute(w, cwd)] for w in words if _absolute(w, cwd) in files), None)


def _resolve_echo(word: str) -> str:
    m = _ECHO_SUBST.match(word)
    if not m:
        return word
    try:
        return " ".join(shlex.split(m.group(1)))
    except ValueError:
        return word


def _cd(cwd: str | None, target: str) -> str | None:
    if target.startswith("~") or target == "-":
        return None
    if target.startswith("/"):
        return _in_repo_abs(target)
    if cwd is None:
        return None
    joined = posixpath.normpath(posixpath.join(cwd or ".", target))
    return None if joined.startswith("..") else ("" if joined == "." else joined)


def _in_repo_abs(path: str) -> str | None:
    path = posixpath.normpath(path)
    if path == REPO_ROOT:
        return ""
    return path[len(REPO_ROOT) + 1:] if path.startswith(REPO_ROOT + "/") else None


def _in_repo(path: str, cwd: str | None) -> str:
    """``path`` repository-relative when it is inside the view, else as typed."""
    if path.startswith("/"):
        inside = _in_repo_abs(path)
        return path if inside is None else inside
    if cwd is None or path.startswith("~"):
        return path
    joined = posixpath.normpath(posixpath.join(cwd or ".", path))
    return path if joined.startswith("..") else joined


def _nested_shell(program: str, words: list[str], simple: Simple, previous: Simple | None,
                  script: str | None) -> list[str]:
    """Shell text ``program`` runs: ``-c CODE``, a here-document or ``echo CODE |`` on stdin,
    ``eval ARGS``, or ``script`` (a file an earlier command wrote) run by a shell, ``source`` or
    its own path."""
    args = words[1:]
    if program in _SHELLS:
        for i, arg in enumerate(args):
            if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", arg) and i + 1 < len(args):
                return [args[i + 1]]
        if not [a for a in args if not a.startswith("-")]:
            if simple.heredoc:
                return [simple.heredoc]
            if simple.downstream and previous is not None:
                head = unwrap(previous.words)
                if head and head[0] in ("echo", "printf"):
                    return [" ".join(a for a in head[1:] if not a.startswith("-") and a != "%s")]
    if program == "eval" and args:
        return [" ".join(args)]
    if script is not None and (program in _SHELLS or program in ("source", ".") or "/" in words[0]
                               or words[0].endswith(".sh")) and not _PYTHON.fullmatch(program):
        return [script]
    return []


def _python_code(program: str, args: list[str], simple: Simple, script: str | None) -> str | None:
    """The Python code the command runs: ``-c CODE``, ``-m MODULE`` (as its import), a
    here-document on stdin, or ``script`` (the file it runs, written by an earlier command)."""
    if _PYTHON.fullmatch(program):
        for i, arg in enumerate(args):
            if arg == "-c" and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith("-c") and len(arg) > 2:
                return arg[2:]
            if arg == "-m" and i + 1 < len(args):
                return f"import {args[i + 1]}"
            if not arg.startswith("-"):
                return script if arg != "-" else simple.heredoc
        return simple.heredoc
    return None


def _python_tree(code: str) -> ast.AST | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return "<expr>"


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and _dotted(node.func).endswith(("import_module", "__import__")):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
    return out


def _calls(tree: ast.AST) -> set[str]:
    return {_dotted(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def _python_writes(code: str) -> list[str]:
    """String constants of ``code`` that look like paths, when ``code`` writes files (an
    ``open`` for writing or a call that writes, moves or deletes); else []."""
    tree = _python_tree(code)
    if tree is None:
        return []
    writes = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func).rsplit(".", 1)[-1]
        if name in _PY_WRITE_CALLS and isinstance(node.func, ast.Attribute):
            writes = True
        if name == "open":
            modes = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "mode")]
            if isinstance(node.func, ast.Attribute) and node.args:  # Path(...).open("w")
                modes.append(node.args[0])
            writes = writes or any(isinstance(m, ast.Constant) and isinstance(m.value, str)
                                   and set(m.value) & set("wax+") for m in modes)
    if not writes:
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.fullmatch(r"[\w./-]+\.\w+|[\w./-]*/[\w.-]+", n.value)]


def _python_shell_commands(code: str) -> list[str]:
    tree = _python_tree(code)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func).rsplit(".", 1)[-1] in _PY_EXEC_CALLS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                out.append(first.value)
            elif isinstance(first, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first.elts):
                out.append(shlex.join([e.value for e in first.elts]))  # type: ignore[attr-defined]
    return out


def _written_args(program: str, args: list[str]) -> list[str]:
    """The files ``program args`` writes by its arguments (not its redirections)."""
    plain = [a for a in args if not a.startswith("-")]
    if program in _WRITE_ALL_ARGS:
        return plain
    if program == "tee":
        return [a for a in plain if a not in ("/dev/null",)]
    if program in _COPY_LIKE:
        if "-t" in args and args.index("-t") + 1 < len(args):
            target = args[args.index("-t") + 1]
            return [posixpath.join(target, posixpath.basename(s)) for s in plain if s != target] + [target]
        if len(plain) < 2:
            return []
        target, sources = plain[-1], plain[:-1]
        out = [target, *(posixpath.join(target, posixpath.basename(s.rstrip("/"))) for s in sources)]
        return [*out, *sources] if program == "mv" else out
    if program == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if program == "git" and plain[:1] in (["rm"], ["mv"]):
        return plain[1:]
    if program == "find" and "-delete" in args:
        return _found_paths(args)
    if program in ("sed", "perl") and any(re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a) for a in args):
        return _script_files(args)
    if program in ("awk", "gawk") and "inplace" in args:
        return _script_files([a for a in args if a not in ("-i", "inplace")])
    return []


def _script_files(args: list[str]) -> list[str]:
    """The file arguments of ``sed``/``perl``/``awk``: after the script (the first plain
    argument, unless ``-e``/``-f`` gave it)."""
    files, given, skip = [], False, False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-e", "-f", "--expression", "--file"):
            given = skip = True
        elif arg.startswith(("-e", "-f", "--expression=", "--file=")):
            given = True
        elif arg.startswith("-"):
            continue
        elif not given:
            given = True  # the script itself
        else:
            files.append(arg)
    return files


def _diff_targets(diff: str) -> list[str]:
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++ ", "--- ")):
            path = line[4:].split("\t", 1)[0].strip()
            if path != "/dev/null":
                out.append(path[2:] if path[:2] in ("a/", "b/") else path)
    return out


# --- judging ---------------------------------------------------------------------------------


def _subcommand(program: str, args: list[str]) -> tuple[str | None, list[str]]:
    """The first argument that is not an option (git's valued options skipped) and the rest."""
    i = 0
    while i < len(args):
        arg = args[i]
        if program == "git" and arg in _GIT_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg, args[i + 1:]
    return None, []


def _has_option(args: Iterable[str], options: Iterable[str]) -> bool:
    wanted = set(options)
    return any(a in wanted or (a.startswith("--") and a.split("=", 1)[0] in wanted) for a in args)


def _expand_packages(pattern: str, context: IntegrityContext) -> str | None:
    if "{packages}" not in pattern:
        return pattern
    if not context.packages:
        return None
    return pattern.replace("{packages}", "(?:" + "|".join(re.escape(p) for p in context.packages) + ")")


def _tokens(words: Iterable[str]) -> Iterator[str]:
    """Every word and, for a word holding spaces, quotes or brackets (Python code, a here-document), its parts."""
    for word in words:
        yield word
        if re.search(r"[\s'\"()\[\],;=]", word):
            yield from (t for t in re.split(r"[\s'\"()\[\],;=]+", word) if t)


def _is_test_file(path: str, context: IntegrityContext) -> bool:
    if any(c in path for c in "*?["):
        return any(fnmatch.fnmatchcase(f, path) for f in context.test_files)
    return path in context.test_files


def _is_test_config(path: str, text: str) -> bool:
    if path.startswith("/"):
        return False
    kind = infra_kind(path)
    # A pytest section is only touched by a command that names pytest itself: `sed -i ... setup.cfg
    # && python -m pytest` edits setup.cfg's metadata, `echo '[tool:pytest]' >> setup.cfg` its section.
    return kind == "always" or (kind == "section" and "pytest" in text.lower()) or is_packaging(path)


def alternative_holds(alternative: Mapping[str, Any], command: Command, context: IntegrityContext) -> bool:
    """Whether every key of ``alternative`` (one ``match`` entry of integrity.yaml) holds for ``command``."""
    if "program" in alternative and command.program not in alternative["program"]:
        return False
    sub, rest = _subcommand(command.program, command.args)
    if "subcommand" in alternative and sub not in alternative["subcommand"]:
        return False
    if "any_option" in alternative and not _has_option(command.args, alternative["any_option"]):
        return False
    if "unless_option" in alternative and _has_option(command.args, alternative["unless_option"]):
        return False
    if "unless_only_args" in alternative and all(a in alternative["unless_only_args"] for a in command.args):
        return False
    if "unless_all_args" in alternative:
        plain = [a for a in (rest if "subcommand" in alternative else command.args) if not a.startswith("-")]
        if plain and all(re.fullmatch(alternative["unless_all_args"], a) for a in plain):
            return False
    for pattern in alternative.get("has_args", ()):
        expanded = _expand_packages(pattern, context)
        if expanded is None or not any(re.search(expanded, a) for a in command.args):
            return False
    if "word" in alternative:
        expanded = _expand_packages(alternative["word"], context)
        if expanded is None or not any(re.search(expanded, t) for t in _tokens(command.words)):
            return False
    if "writes" in alternative:
        kind = alternative["writes"]
        check = (lambda p: _is_test_file(p, context)) if kind == "test_file" else (
            lambda p: _is_test_config(p, command.text))
        if not any(check(p) for p in command.writes):
            return False
    if "python_import" in alternative and not _imports_any(command, alternative["python_import"], context):
        return False
    if "python_call" in alternative and not _calls_any(command, alternative["python_call"]):
        return False
    return True


def _imports_any(command: Command, modules: Sequence[str], context: IntegrityContext) -> bool:
    own = {p.lower() for p in context.packages}
    for code in command.python:
        tree = _python_tree(code)
        for name in _imports(tree) if tree is not None else ():
            # The project's own modules are never a network attempt (psf/requests imports requests).
            if name.split(".")[0].lower() not in own and any(name == m or name.startswith(m + ".") for m in modules):
                return True
    return False


def _calls_any(command: Command, names: Sequence[str]) -> bool:
    for code in command.python:
        tree = _python_tree(code)
        for call in _calls(tree) if tree is not None else ():
            if any(call == n or call.endswith("." + n) for n in names):
                return True
    return False


NO_CONTEXT = IntegrityContext()
"""A unit of which nothing is known: no test files, no project names."""


def flag_steps(steps: Iterable[Mapping[str, Any]], context: IntegrityContext = NO_CONTEXT,
               rules: Sequence[Rule] | None = None) -> list[dict]:
    """The integrity flags of one unit's ``steps`` (``ViewEnvironment.steps`` records, in
    order: ``step``, ``command`` as typed, ``executed`` as run; ``command`` stands in for a
    record without ``executed``): one dict ``{"step", "command", "rule", "category"}`` per step
    and rule that fired, in step then rule order. ``rules``: default ``load_rules()``."""
    rules = load_rules() if rules is None else rules
    flags: list[dict] = []
    earlier: list[Command] = []
    files: dict[str, str] = {}  # what the unit's commands wrote by redirection, for scripts run later
    for record in steps:
        executed = record.get("executed") or record.get("command") or ""
        commands = list(commands_of(executed, files=files))
        for rule in rules:
            for index, command in enumerate(commands):
                if not any(alternative_holds(a, command, context) for a in rule.match):
                    continue
                before = [*earlier, *commands[:index]]
                if any(alternative_holds(a, c, context) for a in rule.unless_earlier for c in before):
                    continue
                flags.append({"step": record.get("step"), "command": record.get("command", executed),
                              "rule": rule.name, "category": rule.category})
                break
        earlier += commands
    return flags


def integrity_columns(steps: Iterable[Mapping[str, Any]], context: IntegrityContext) -> dict:
    """The row's ``integrity_flags`` (JSON list of ``flag_steps``) and ``integrity_flagged``."""
    flags = flag_steps(steps, context)
    return {"integrity_flags": json.dumps(flags), "integrity_flagged": bool(flags)}
