"""Rule-based prompt perturbations, the baselines DyCodeEval §4.4 (Table 1) compares its agents'
diversity against: the classic ReCode perturbations (Wang et al., 2023) of a code-generation prompt.

Each perturbation is ``(prompt, entry_point, rng) -> prompt`` and keeps the problem solvable: the
code still parses once a body is appended, expected outputs and literals are untouched, and only
``function_rename`` and ``variable_rename`` change the signature. Prose edits touch prose words
only (see ``raydist.analysis._prompt`` for what counts as prose and as an example).

``function_rename`` changes the name the tests call: a variant is only gradable if the harness
appends ``<original name> = <new name>`` after the completion; otherwise use it for diversity
measurement only. ``variable_rename`` keeps positional calls working but breaks keyword calls.

A perturbation that finds nothing to act on raises :class:`NotApplicable` rather than returning
the prompt unchanged, so a diversity table never counts a copy as a variant.

:func:`perturb` also takes MBPP's layout (an instruction in prose, a blank line, the entry
function's header): the instruction is perturbed as the description string would be.
"""

from __future__ import annotations

import ast
import inspect
import random
import re
from collections.abc import Callable

from raydist.analysis._prompt import (
    NotApplicable,
    Word,
    code_names,
    description,
    description_node,
    description_text,
    end_position,
    entry_function,
    example_kind,
    example_units,
    prose_words,
)
from raydist.analysis._rename import rename_function, rename_parameters

Perturbation = Callable[[str, str, random.Random], str]

# Share of the prose words a word-level perturbation edits (at least one word).
WORD_RATE = 0.1
# Chance that each letter of a word chosen by char_case flips case.
CASE_RATE = 0.35

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_PARAM_NAMES = (
    "values", "data", "seq", "arg", "inp", "obj", "elems", "source", "operand", "payload", "record", "quantity",
    "entry", "target", "content", "subject", "param", "item", "collection", "amount", "bound", "limit", "key",
    "token", "series", "batch", "sample", "query", "term", "factor",
)  # fmt: skip


def function_rename(prompt: str, entry_point: str, rng: random.Random) -> str:
    """ReCode's function-name perturbation: the entry point renamed (camelCase/snake_case switch or
    a keyboard typo in one of its words) in its ``def``, every code use and its description.

    The tests still call the old name: alias it (``old = new``) to grade the variant. Raises
    NotApplicable when the prompt has no such function.
    """
    entry_function(ast.parse(prompt), entry_point)
    taken = code_names(prompt) | _words(prompt)
    for _ in range(50):
        new = _renamed_function(entry_point, rng)
        if new.isidentifier() and new not in taken:
            return rename_function(prompt, entry_point, new)
    raise NotApplicable(f"found no fresh name for {entry_point!r}")


def variable_rename(prompt: str, entry_point: str, rng: random.Random) -> str:
    """ReCode's variable renaming, applied to the entry function's parameters: each gets a fresh
    name from a neutral vocabulary, in the signature, the body and the description's examples
    (and prose, where the old name cannot be an English word).

    Positional calls in the tests keep working. Raises NotApplicable when the function has no
    parameter other than self/cls.
    """
    fn = entry_function(ast.parse(prompt), entry_point)
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None]
    params = [p for p in params if p not in ("self", "cls")]
    if not params:
        raise NotApplicable(f"{entry_point!r} has no parameter to rename")
    taken = code_names(prompt) | _words(prompt)
    pool = list(_PARAM_NAMES)
    rng.shuffle(pool)
    fresh = iter([n for n in pool if n not in taken] + [f"arg{i}" for i in range(len(params))])
    return rename_parameters(prompt, entry_point, {p: next(fresh) for p in params})


def char_noise(prompt: str, entry_point: str, rng: random.Random) -> str:
    """ReCode's ButterFingers on the description prose: one letter-level typo (swap of two
    neighbouring letters, deletion, insertion or substitution of a keyboard neighbour) in each of
    ``WORD_RATE`` of the prose words. Raises NotApplicable when there is no prose word."""
    return _edit_words(prompt, entry_point, rng, lambda word: _typo(word, rng))


def char_case(prompt: str, entry_point: str, rng: random.Random) -> str:
    """ReCode's ChangeCharCase on the description prose: in ``WORD_RATE`` of the prose words each
    letter flips case with chance ``CASE_RATE`` (at least one per word). Raises NotApplicable when
    there is no prose word."""
    return _edit_words(prompt, entry_point, rng, lambda word: _flip_case(word, rng))


def token_noise(prompt: str, entry_point: str, rng: random.Random) -> str:
    """Word-level noise in the description prose, with no synonyms: ``WORD_RATE`` of the prose
    words are duplicated or swapped with the next prose word. Raises NotApplicable when there is
    no prose word."""
    desc, lines, words = _prose(prompt, entry_point)
    edits: dict[int, str] = {}
    order = list(range(len(words)))
    rng.shuffle(order)
    for i in order[: _count(len(words))]:
        if i in edits:
            continue
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and _adjacent(lines, w, nxt) and i + 1 not in edits and nxt.text != w.text \
                and rng.random() < 0.5:
            edits[i], edits[i + 1] = nxt.text, w.text
        else:
            edits[i] = f"{w.text} {w.text}"
    return desc.replaced("\n".join(_apply(lines, [(words[i], t) for i, t in edits.items()])))


def demo_deletion(prompt: str, entry_point: str, rng: random.Random) -> str:
    """Delete one example (a doctest with its output, a call example, an Input/Output block) from
    the description. Raises NotApplicable when the description has no example."""
    desc, lines, units = _examples(prompt, entry_point)
    gone = rng.choice(units)
    return desc.replaced("\n".join(lines[: gone.start] + lines[gone.stop :]))


def demo_insertion(prompt: str, entry_point: str, rng: random.Random) -> str:
    """Duplicate one example in place, or (with two or more different examples of one kind, half
    the time) swap two of them. Raises NotApplicable when the description has no example."""
    desc, lines, units = _examples(prompt, entry_point)
    texts = [lines[u.start : u.stop] for u in units]
    kinds = [example_kind(lines[u.start]) for u in units]
    # Swapping a doctest with a call line could leave a doctest right above prose, which would
    # then read as its expected output; only examples of one kind trade places.
    pairs = [
        (i, j)
        for i in range(len(units))
        for j in range(i + 1, len(units))
        if texts[i] != texts[j] and kinds[i] == kinds[j]
    ]
    if pairs and rng.random() < 0.5:
        i, j = rng.choice(pairs)
        a, b = units[i], units[j]
        new = lines[: a.start] + texts[j] + lines[a.stop : b.start] + texts[i] + lines[b.stop :]
    else:
        u = rng.choice(units)
        new = lines[: u.stop] + lines[u.start : u.stop] + lines[u.stop :]
    return desc.replaced("\n".join(new))


def doc_to_comments(prompt: str, entry_point: str, rng: random.Random) -> str:
    """ReCode's doc2comments: the description string becomes ``#`` comments, either where it stood
    (in the body) or above the ``def``; the rng picks. The prompt then needs the completion's body
    to parse. Raises NotApplicable when the description shares a line with other code."""
    fn = entry_function(ast.parse(prompt), entry_point)
    node = description_node(fn)
    lines = prompt.split("\n")
    end_line, end_col = end_position(node)
    first, last = node.lineno - 1, end_line - 1
    before = lines[first].encode()[: node.col_offset].decode()
    after = lines[last].encode()[end_col:].decode()
    if before.strip() or after.strip():
        raise NotApplicable("the description shares its line with other code")
    text = inspect.cleandoc(description_text(node)).split("\n")
    rest = lines[:first] + lines[last + 1 :]
    if rng.random() < 0.5:
        return "\n".join(lines[:first] + _comments(text, before) + lines[last + 1 :])
    top = (fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno) - 1
    indent = lines[top][: len(lines[top]) - len(lines[top].lstrip())]
    return "\n".join(rest[:top] + _comments(text, indent) + rest[top:])


PERTURBATIONS: dict[str, Perturbation] = {
    "function_rename": function_rename,
    "variable_rename": variable_rename,
    "char_noise": char_noise,
    "char_case": char_case,
    "token_noise": token_noise,
    "demo_deletion": demo_deletion,
    "demo_insertion": demo_insertion,
    "doc_to_comments": doc_to_comments,
}
"""Every baseline perturbation by name."""

RENAMING = frozenset({"function_rename", "variable_rename"})
"""The perturbations that change the entry function's signature."""


def perturb(prompt: str, entry_point: str, name: str, seed: int) -> str:
    """``PERTURBATIONS[name]`` applied with ``random.Random(f"{name}:{seed}")``: the same
    (prompt, name, seed) gives the same variant in every process.

    Raises ValueError for an unknown name and NotApplicable (a ValueError) when the perturbation
    finds nothing to act on.
    """
    try:
        fn = PERTURBATIONS[name]
    except KeyError:
        raise ValueError(f"unknown perturbation {name!r}; known: {', '.join(PERTURBATIONS)}") from None
    rng = random.Random(f"{name}:{seed}")
    try:
        ast.parse(prompt)
    except SyntaxError:
        return _on_instruction(fn, name, prompt, entry_point, rng)
    return fn(prompt, entry_point, rng)


def _on_instruction(fn: Perturbation, name: str, prompt: str, entry_point: str, rng: random.Random) -> str:
    """``fn`` on an MBPP-style prompt (an instruction in prose, a blank line, the entry
    function's header): the instruction acts as the function's description string, and the
    result comes back in the same layout (instruction, blank line, header). Raises
    NotApplicable when the prompt is not in that layout, for ``doc_to_comments`` (an
    instruction is no description string to turn into comments), and when the instruction
    cannot stand in a raw string literal."""
    headers = list(re.finditer(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", prompt, re.MULTILINE))
    if not headers:
        raise NotApplicable(f"prompt does not parse and has no header of {entry_point!r}")
    instruction, header = prompt[:headers[-1].start()].strip("\n"), prompt[headers[-1].start():].rstrip("\n")
    if name == "doc_to_comments":
        raise NotApplicable("the prompt's instruction is prose, not a description string")
    if not instruction or '"""' in instruction or instruction.endswith(("\\", '"')):
        raise NotApplicable("the instruction cannot stand as a description string")
    as_code = f'{header}\n    r"""{instruction}"""\n'
    try:
        ast.parse(as_code)
    except SyntaxError as e:
        raise NotApplicable(f"prompt does not parse: {e}") from e
    out = fn(as_code, entry_point, rng)
    tree = ast.parse(out)
    function = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)][-1]
    node = description_node(function)
    new_header = "\n".join(out.split("\n")[: node.lineno - 1])
    return f"{description(out, function.name).text}\n\n{new_header}\n"


def _words(prompt: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", prompt))


def _prose(prompt: str, entry_point: str):
    desc = description(prompt, entry_point)
    lines = desc.text.split("\n")
    words = prose_words(lines, code_names(prompt))
    if not words:
        raise NotApplicable("the description has no prose word to perturb")
    return desc, lines, words


def _examples(prompt: str, entry_point: str):
    desc = description(prompt, entry_point)
    lines = desc.text.split("\n")
    units = example_units(lines)
    if not units:
        raise NotApplicable("the description has no example")
    return desc, lines, units


def _count(n: int) -> int:
    return max(1, round(WORD_RATE * n))


def _edit_words(prompt: str, entry_point: str, rng: random.Random, edit: Callable[[str], str]) -> str:
    desc, lines, words = _prose(prompt, entry_point)
    chosen = sorted(rng.sample(range(len(words)), _count(len(words))))
    return desc.replaced("\n".join(_apply(lines, [(words[i], edit(words[i].text)) for i in chosen])))


def _apply(lines: list[str], edits: list[tuple[Word, str]]) -> list[str]:
    """Lines with each word's span replaced; spans never overlap, so right-to-left keeps offsets valid."""
    out = list(lines)
    for word, text in sorted(edits, key=lambda e: (e[0].line, e[0].start), reverse=True):
        line = out[word.line]
        out[word.line] = line[: word.start] + text + line[word.end :]
    return out


def _adjacent(lines: list[str], w: Word, nxt: Word | None) -> bool:
    return nxt is not None and nxt.line == w.line and lines[w.line][w.end : nxt.start].isspace()


def _neighbours(c: str) -> str:
    low = c.lower()
    for r, row in enumerate(_ROWS):
        k = row.find(low)
        if k < 0:
            continue
        near = [row[j] for j in (k - 1, k + 1) if 0 <= j < len(row)]
        for rr, kk in ((r - 1, k), (r - 1, k + 1), (r + 1, k), (r + 1, k - 1)):
            if 0 <= rr < len(_ROWS) and 0 <= kk < len(_ROWS[rr]):
                near.append(_ROWS[rr][kk])
        return "".join(n.upper() if c.isupper() else n for n in near)
    return c


def _typo(word: str, rng: random.Random) -> str:
    """One letter-level typo that always changes ``word``."""
    swaps = [i for i in range(len(word) - 1) if word[i] != word[i + 1]]
    kinds = ["insert", "substitute"] + (["swap"] if swaps else []) + (["delete"] if len(word) > 2 else [])
    kind = rng.choice(kinds)
    i = rng.randrange(len(word))
    if kind == "swap":
        i = rng.choice(swaps)
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "delete":
        return word[:i] + word[i + 1 :]
    near = rng.choice(_neighbours(word[i]))
    return word[: i + 1] + near + word[i + 1 :] if kind == "insert" else word[:i] + near + word[i + 1 :]


def _flip_case(word: str, rng: random.Random) -> str:
    flips = [rng.random() < CASE_RATE for _ in word]
    if not any(flips):
        flips[rng.randrange(len(word))] = True
    return "".join(c.swapcase() if f else c for c, f in zip(word, flips))


def _renamed_function(name: str, rng: random.Random) -> str:
    parts = [p for p in re.split(r"_|(?<=[a-z0-9])(?=[A-Z])", name) if p]
    if "_" in name:
        switched = parts[0].lower() + "".join(p.capitalize() for p in parts[1:])
    else:
        switched = "_".join(p.lower() for p in parts)
    if switched != name and len(parts) > 1 and rng.random() < 0.5:
        return switched
    long = [i for i, p in enumerate(parts) if len(p) >= 3] or list(range(len(parts)))
    k = rng.choice(long)
    parts[k] = _typo(parts[k], rng)
    return ("_" if "_" in name else "").join(parts)


def _comments(text: list[str], indent: str) -> list[str]:
    return [f"{indent}# {line}".rstrip() if line.strip() else f"{indent}#" for line in text]
