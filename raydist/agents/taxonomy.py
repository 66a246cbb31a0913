"""Action taxonomy: which kind of step an agent's bash command is (SchrodingerRepo §IV, RQ2).

RQ2 splits an agent's actions into navigate, search, read, probe, edit and test. A
command is parsed with bashlex into simple commands (through pipelines, ``&&``/``||``/``;``
chains, subshells, loops, ``$(...)``, ``bash -c``), wrappers (``timeout``, ``xargs``,
``env``, ``time``...) and ``VAR=x`` prefixes are peeled off, and each simple command gets
one category. Here-documents are cut out before parsing (bashlex rejects quoted
delimiters) and their bodies are kept, so ``python - <<'EOF'`` is judged by its code.
When bashlex cannot parse a command, ``shlex`` splits it instead, and when even that
fails (unbalanced quotes) a regular-expression tokenizer does; classification never raises.

One step, one category: the most consequential part wins, in the order of ``PRIORITY``
(submit > edit > test > probe > read > search > navigate > other). A pipeline stage after
the first that filters text from stdin (``| head``, ``| grep x``, ``| sed -n 1,9p``) is
``other``: it refines the previous stage's output rather than acting on the repository.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

import bashlex

#: Categories from the most to the least consequential; a compound command takes the first.
PRIORITY = ("submit", "edit", "test", "probe", "read", "search", "navigate", "other")
CATEGORIES = frozenset(PRIORITY)
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_MARK = "__raydist_heredoc_{}__"
_NOT_FILES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_WRAPPERS = {"timeout", "xargs", "env", "time", "nice", "nohup", "sudo", "command", "exec", "stdbuf", "builtin"}
_FILTERS = {"head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "awk", "sort", "uniq", "wc", "cut", "tr",
            "less", "more", "cat", "nl", "column", "tee", "fold", "fmt", "jq"}
_NAVIGATE = {"cd", "ls", "tree", "pwd", "pushd", "popd", "dirname", "basename", "realpath", "readlink", "stat",
             "du", "file"}
_SEARCH = {"grep", "egrep", "fgrep", "rg", "ag", "ack", "locate"}
_READ = {"cat", "head", "tail", "less", "more", "nl", "bat", "view", "wc", "diff", "cmp", "strings", "xxd", "od"}
_EDIT = {"mv", "cp", "rm", "touch", "mkdir", "rmdir", "ln", "chmod", "patch", "truncate", "install", "ed", "dd"}
_TEST = {"pytest", "py.test", "tox", "nox", "nosetests", "nose2", "trial"}
_PROBE = {"pip", "pip3", "conda", "which", "type", "whereis", "uname", "whoami", "env", "printenv", "node",
          "ruby", "java", "go", "cargo", "npm"}
_PY_TEST_MODULES = {"pytest", "unittest", "nose", "nose2", "tox", "nox", "trial"}
_GIT_EDIT = {"apply", "am", "checkout", "restore", "reset", "stash", "mv", "rm", "clean", "cherry-pick", "revert"}
_PY_WRITE_ATTRS = {"write_text", "write_bytes", "unlink", "rmtree", "copyfile", "copy", "copy2", "copytree",
                   "move", "remove", "rename", "replace", "makedirs", "mkdir", "touch", "rmdir", "symlink_to"}
_PY_READ_CALLS = {"print", "open", "read", "readlines", "read_text", "Path", "enumerate", "len", "range",
                  "splitlines", "strip", "rstrip", "join", "str", "repr", "format", "list", "sorted"}


@dataclass
class Simple:
    """One simple command: its words (wrappers and ``VAR=`` prefixes kept), its output
    redirection targets, its input redirection sources (here-documents not among them), its
    here-document body (or None) and whether it is a pipeline stage after the first (reading
    stdin)."""

    words: list[str]
    outputs: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    heredoc: str | None = None
    downstream: bool = False


def _cut_heredocs(command: str) -> tuple[str, list[str]]:
    """``command`` with every here-document replaced by ``< marker`` and the bodies, in order."""
    lines = command.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pending: list[tuple[bool, str]] = []  # (strip tabs, delimiter) of each here-document opened

        def mark(m: re.Match, pending: list = pending) -> str:
            pending.append((m.group(1) == "-", m.group(3)))
            return f"< {_MARK.format(len(bodies) + len(pending) - 1)}"

        out.append(_HEREDOC.sub(mark, line))
        i += 1
        for strip_tabs, delim in pending:
            body = []
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != delim:
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _bashlex_simples(node, bodies: list[str], downstream: bool = False) -> list[Simple]:
    kind = node.kind
    if kind == "command":
        simple, found = Simple([], downstream=downstream), []
        for part in node.parts:
            if part.kind == "word":
                simple.words.append(part.word)
            elif part.kind == "redirect" and part.type in (">", ">>", ">|", "&>", "&>>"):
                target = getattr(part.output, "word", None)
                if target is not None:
                    simple.outputs.append(target)
            elif part.kind == "redirect" and part.type in ("<", "<>"):
                source = getattr(part.output, "word", "")
                idx = _marker_index(source)
                if idx is not None and idx < len(bodies):
                    simple.heredoc = bodies[idx]
                elif source:
                    simple.inputs.append(source)
            for sub in getattr(part, "parts", []) or []:
                if sub.kind in ("commandsubstitution", "processsubstitution"):
                    found.extend(_bashlex_simples(sub.command, bodies))
        return [simple, *found]
    if kind == "pipeline":
        stages = [p for p in node.parts if p.kind != "pipe"]
        return [s for n, stage in enumerate(stages) for s in _bashlex_simples(stage, bodies, downstream or n > 0)]
    children = list(getattr(node, "parts", None) or getattr(node, "list", None) or [])
    return [s for child in children if hasattr(child, "kind") for s in _bashlex_simples(child, bodies, downstream)]


def _marker_index(word: str) -> int | None:
    m = re.fullmatch(_MARK.format(r"(\d+)"), word)
    return int(m.group(1)) if m else None


def _fallback_simples(command: str, bodies: list[str]) -> list[Simple]:
    """Split with shlex, or by a regular expression when the quotes do not balance."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = re.findall(r"&&|\|\||>>|[|;&<>()]|[^\s|;&<>()]+", command)
    simples, current, pipe_next = [], Simple([]), False
    it = iter(tokens)
    for tok in it:
        if tok in ("&&", "||", ";", "&", "|", "(", ")", ";;", "\n"):
            if current.words:
                simples.append(current)
            pipe_next = tok == "|"
            current = Simple([], downstream=pipe_next)
        elif tok.startswith(">") or tok == "&>":
            if current.words and current.words[-1].isdigit():
                current.words.pop()  # the fd of ``2>``
            target = next(it, "")
            if not target.startswith("&") and tok != ">&":
                current.outputs.append(target)
        elif tok.startswith("<"):
            source = next(it, "")
            idx = _marker_index(source)
            if idx is not None and idx < len(bodies):
                current.heredoc = bodies[idx]
            elif source:
                current.inputs.append(source)
        else:
            current.words.append(tok)
    if current.words:
        simples.append(current)
    return simples


def parse_simple_commands(command: str) -> list[Simple]:
    """Every simple command in ``command``, in order (see the module doc). Never raises."""
    text, bodies = _cut_heredocs(command)
    try:
        simples = [s for tree in bashlex.parse(text) for s in _bashlex_simples(tree, bodies)]
    except Exception:  # bashlex raises ParsingError, NotImplementedError and others
        simples = _fallback_simples(text, bodies)
    return [s for s in simples if s.words or s.outputs]


def unwrap(words: list[str]) -> list[str]:
    """Drop ``VAR=x`` prefixes and wrappers with their options (``timeout -s 9 30 cmd``)."""
    words = list(words)
    while words:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        elif words[0].rsplit("/", 1)[-1] in _WRAPPERS and len(words) > 1:
            head = words.pop(0).rsplit("/", 1)[-1]
            while words and (words[0].startswith("-") or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0])):
                opt = words.pop(0)
                if head in ("timeout", "xargs", "stdbuf") and opt in ("-s", "-k", "-n", "-I", "-P", "-d", "-L"):
                    words[:1] = []
            if head == "timeout" and words and re.fullmatch(r"[\d.]+[smhd]?", words[0]):
                words.pop(0)
        else:
            break
    return words


def _python_code_category(code: str) -> str:
    """edit when the code writes files, read when it only prints a file, else probe."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "probe"
    calls, reads_file = set(), False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] not in ("os", "sys", "pathlib", "io") for m in mods):
                calls.add("<import>")
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "<expr>")
        calls.add(name)
        if name in _PY_WRITE_ATTRS and isinstance(node.func, ast.Attribute):
            return "edit"
        if name == "open":
            mode = (node.args[1] if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None))
            if isinstance(node.func, ast.Attribute):
                mode = node.args[0] if node.args else mode
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                return "edit"
            reads_file = True
        reads_file = reads_file or name == "read_text"
    return "read" if reads_file and calls <= _PY_READ_CALLS else "probe"


def _python_category(args: list[str], heredoc: str | None) -> str:
    args = [a for a in args if a not in ("-u", "-B", "-W", "-X", "-O", "-OO", "-E", "-s", "-I")]
    if not args or args[0] == "-":
        return _python_code_category(heredoc) if heredoc else "probe"
    if args[0] == "-m" and len(args) > 1:
        if args[1].split(".")[0] in _PY_TEST_MODULES:
            return "test"
        return "probe"
    if args[0] == "-c" and len(args) > 1:
        return _python_code_category(args[1])
    if args[0].startswith("-c") and len(args[0]) > 2:
        return _python_code_category(args[0][2:])
    script = args[0].rsplit("/", 1)[-1]
    rest = args[1:]
    if script == "manage.py" and rest[:1] == ["test"] or script == "setup.py" and rest[:1] == ["test"]:
        return "test"
    if re.fullmatch(r"(test_.*|.*_tests?|tests?|runtests?.*)\.py", script):
        return "test"
    return "probe"


def _find_category(args: list[str], heredoc: str | None) -> str:
    if "-exec" in args or "-execdir" in args:
        i = args.index("-exec" if "-exec" in args else "-execdir")
        inner = [a for a in args[i + 1:] if a not in (";", "\\;", "+", "{}")]
        return _simple_category(Simple(inner), nested=True)
    if "-delete" in args:
        return "edit"
    if any(a in ("-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-newer") for a in args):
        return "search"
    return "navigate"


def _simple_category(simple: Simple, nested: bool = False) -> str:
    words = unwrap(simple.words)
    if any(t not in _NOT_FILES and not t.startswith("&") for t in simple.outputs):
        return "edit"
    if not words:
        return "other"
    prog, args = words[0].rsplit("/", 1)[-1], words[1:]
    if prog in ("echo", "printf") and SUBMIT in args:
        return "submit"
    if re.fullmatch(r"python[\d.]*|pypy[\d.]*", prog):
        return _python_category(args, simple.heredoc)
    if prog in ("bash", "sh", "zsh") and len(args) > 1 and args[0] == "-c":
        return classify(args[1])
    if simple.downstream and prog in _FILTERS and not (prog == "sed" and _sed_in_place(args)):
        return "edit" if prog == "tee" and _has_file_arg(args) else "other"
    if prog == "git" and args:
        sub = args[0]
        if sub == "grep":
            return "search"
        if sub in ("ls-files", "ls-tree"):
            return "navigate"
        return "edit" if sub in _GIT_EDIT else "probe"
    if prog == "sed":
        return "edit" if _sed_in_place(args) else "read"
    if prog in ("awk", "gawk"):
        return "edit" if "inplace" in args else "read"
    if prog == "perl":
        return "edit" if any(re.fullmatch(r"-\w*i.*", a) for a in args) else "probe"
    if prog == "tee":
        return "edit" if _has_file_arg(args) else "other"
    if prog == "find":
        return _find_category(args, simple.heredoc)
    if prog == "make":
        return "test" if any(a in ("test", "tests", "check") for a in args) else "probe"
    if prog == "coverage":
        return "test" if any(a in _PY_TEST_MODULES for a in args) else "probe"
    if prog in _TEST or re.fullmatch(r"(run)?tests?(\.sh|\.py)?", prog):
        return "test"
    for names, category in ((_EDIT, "edit"), (_SEARCH, "search"), (_READ, "read"), (_NAVIGATE, "navigate"),
                            (_PROBE, "probe")):
        if prog in names:
            return category
    return "other"


def _sed_in_place(args: list[str]) -> bool:
    return any(a.startswith("--in-place") or re.fullmatch(r"-[a-zA-Z]*i.*", a) for a in args)


def _has_file_arg(args: list[str]) -> bool:
    return any(not a.startswith("-") and a not in _NOT_FILES for a in args)


def classify_parts(command: str) -> list[str]:
    """The category of every simple command in ``command``, in order (``[]`` when empty).

    Pipeline filters after the first stage are ``other`` (module doc). Never raises.
    """
    return [_simple_category(s) for s in parse_simple_commands(command)]


def classify(command: str) -> str:
    """One category for the step ``command``: the highest-``PRIORITY`` part, else ``other``.

    >>> classify("cd /testbed && grep -rn 'def foo' src | head -5")
    'search'
    """
    parts = set(classify_parts(command))
    return next((c for c in PRIORITY if c in parts), "other")


def count_categories(commands: Iterable[str]) -> dict[str, int]:
    """How many of ``commands`` fall in each category; every category is a key (zero included)."""
    counts = dict.fromkeys(PRIORITY, 0)
    for command in commands:
        counts[classify(command)] += 1
    return counts
