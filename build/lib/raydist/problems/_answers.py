"""What the DyCodeEval agents (§3.2) answer, read without a model: the GBNF grammars that
shape the answers on servers that take one, the parsers that read them leniently (hosted
models get no grammar), and the deterministic checks of a rewritten prompt.
"""

from __future__ import annotations

import ast
import difflib
import re
import string
from collections.abc import Sequence

from raydist.problems._source import function_node, parse
from raydist.problems.seeds import Problem

SCENARIO_MAX_CHARS = 80
SCENARIO_MIN_WORDS = 2
SCENARIO_MAX_WORDS = 12
CONTEXT_MAX_CHARS = 120
REASON_MAX_CHARS = 200
PLACEHOLDER = "<context>"
"""What ``dyc_context.j2`` shows in place of a context in its answer format."""
VERDICTS = ("YES", "NO")

_GBNF_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•+]|\d+[.)]|\(\d+\))\s*")


def gbnf_literal(text: str) -> str:
    """``text`` as a quoted GBNF string literal."""
    return '"' + "".join(_GBNF_ESCAPES.get(char, char) for char in text) + '"'


# --- scenarios ------------------------------------------------------------------------


def scenario_grammar(count: int) -> str:
    """GBNF for 1..``count`` lines, each one scenario name: a letter, then 2 to
    ``SCENARIO_MAX_CHARS - 1`` letters, digits, spaces or ``,'&()/-``."""
    return (f"root ::= item{{1,{count}}}\n"
            f"item ::= [A-Za-z] [A-Za-z0-9 ,'&()/-]{{2,{SCENARIO_MAX_CHARS - 1}}} \"\\n\"\n")


def normalise_scenario(text: str) -> str:
    """The de-duplication key of a scenario: lower case, punctuation as spaces, single spaces.

    ``"Inventory management -- for a Bakery."`` -> ``"inventory management for a bakery"``.
    """
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


def parse_scenarios(answer: str) -> list[str]:
    """The scenario names of a proposer's ``answer``, one per line, in order.

    A line loses a list marker (``-``, ``*``, ``1.``, ``2)``), surrounding quotes or ``**`` and a
    final full stop; it is dropped when it ends with ``:`` (a heading such as "Here are ten
    scenarios:"), has fewer than ``SCENARIO_MIN_WORDS`` or more than ``SCENARIO_MAX_WORDS``
    words, or more than ``SCENARIO_MAX_CHARS`` characters. Duplicates are not removed here.
    """
    names = []
    for line in answer.splitlines():
        name = _LIST_MARKER.sub("", line).strip().strip("*\"'`").strip().rstrip(".").strip()
        words = normalise_scenario(name).split()
        if (not name or name.endswith(":") or len(name) > SCENARIO_MAX_CHARS
                or not SCENARIO_MIN_WORDS <= len(words) <= SCENARIO_MAX_WORDS):
            continue
        names.append(name)
    return names


# --- contexts -------------------------------------------------------------------------


def contexts_grammar(names: list[str]) -> str:
    """GBNF for exactly one ``name: context`` line per parameter, in ``names`` order; a context
    is 1..``CONTEXT_MAX_CHARS`` characters without a newline or a ``<``, not starting with a
    space (small models copy the prompt's ``<context>`` placeholder, anywhere in the line)."""
    lines = ' "\\n" '.join(f"{gbnf_literal(name + ': ')} context" for name in names)
    return f"root ::= {lines}\ncontext ::= [^\\n <] [^\\n<]{{0,{CONTEXT_MAX_CHARS - 1}}}\n"


def parse_contexts(answer: str, names: list[str]) -> dict[str, str]:
    """``{parameter: context}`` read from ``name: context`` lines of ``answer``, in ``names`` order.

    Read leniently: a list marker, Markdown bold and backticks around the name are ignored,
    ``=`` or ``-`` may stand for ``:``, lines of unknown names are skipped and the first line of
    a name wins. Parameters without a context are absent from the result; a context that
    still holds the prompt's ``PLACEHOLDER`` is no context.
    """
    found: dict[str, str] = {}
    pattern = re.compile(r"^[\s>#]*(?:[-*•+]|\d+[.)])?[\s*`]*(\w+)[\s*`]*[:=\-–]\s*(.*?)\s*$")
    for line in answer.splitlines():
        match = pattern.match(line)
        if not match or match.group(1) not in names or match.group(1) in found:
            continue
        context = match.group(2).strip().strip("*\"'").strip()
        if context and PLACEHOLDER not in context:
            found[match.group(1)] = context
    return {name: found[name] for name in names if name in found}


# --- rewrite --------------------------------------------------------------------------


_FENCED = re.compile(r"```[\w+-]*[ \t]*\n(.*?)\n?```", re.DOTALL)
_OPEN_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*)", re.DOTALL | re.MULTILINE)
_TRIPLE_QUOTES = ('"""', "'''")


def rewrite_grammar(problem: Problem) -> str | None:
    """GBNF for one ```python block that starts with the seed prompt verbatim up to the opening
    quotes of the entry point's docstring and ends with its closing quotes and the fence, so
    only the docstring's text is free (it cannot contain the closing quotes).

    A seed whose entry point has no triple-quoted docstring gets the text up to its signature
    line forced and free lines (none starting with a backtick) after it. A seed whose text
    before the signature is prose and which ends with the signature (MBPP: instruction, blank
    line, header) gets :func:`_instruction_grammar`. None for any other layout. Hosted models
    get no grammar, so :func:`rewrite_rejection` checks the answer in every case.
    """
    start = problem.prompt.find(problem.signature)
    if start < 0:
        return None
    if not _is_code(problem.prompt[:start]):
        return _instruction_grammar(problem, start)
    head = "```python\n" + problem.prompt[:start + len(problem.signature)].lstrip("\n")
    opening = _docstring_opening(problem, start + len(problem.signature))
    if opening is None:
        body_lines = 2 * problem.prompt.count("\n") + 8
        forced = gbnf_literal(head + "\n")
        return (f'root ::= {forced} line{{1,{body_lines}}} "```"\n'
                'line ::= ( [^`\\n] [^\\n]* )? "\\n"\n')
    quote = opening[-1]
    char = '\\"' if quote == '"' else quote  # as written inside GBNF brackets and strings
    closing = gbnf_literal(quote * 3 + "\n```")
    return (f"root ::= {gbnf_literal(head + opening)} text {closing}\n"
            f'text ::= ( [^{char}] | "{char}" [^{char}] | "{char}{char}" [^{char}] )*\n')


INSTRUCTION_MAX_LINES = 6
INSTRUCTION_LINE_MAX_CHARS = 400


def _instruction_grammar(problem: Problem, start: int) -> str | None:
    """GBNF for MBPP's layout: a ``` block of free instruction lines (none empty, starting
    with a space or holding a backtick), a blank line, then the seed's signature line verbatim
    and the closing fence. At most ``INSTRUCTION_MAX_LINES`` lines of at most
    ``INSTRUCTION_LINE_MAX_CHARS`` characters, or twice the seed instruction's when that is
    more. None when the seed prompt holds more than its signature after the instruction."""
    if problem.prompt[start + len(problem.signature):].strip():
        return None
    lines = problem.prompt[:start].strip("\n").split("\n")
    max_lines = max(INSTRUCTION_MAX_LINES, 2 * len(lines))
    max_chars = max(INSTRUCTION_LINE_MAX_CHARS, 2 * max(len(line) for line in lines))
    signature = gbnf_literal("\n" + problem.signature + "\n```")
    return (f'root ::= "```\\n" line{{1,{max_lines}}} {signature}\n'
            f'line ::= [^`\\n ] [^`\\n]{{0,{max_chars - 1}}} "\\n"\n')


def _docstring_opening(problem: Problem, signature_end: int) -> str | None:
    """The seed prompt's text from the end of the signature through the docstring's opening
    quotes (a newline, four spaces and three double quotes in HumanEval/0), or None when the
    entry point has no plain triple-quoted docstring."""
    node = function_node(problem.prompt, problem.entry_point)
    if node is None or ast.get_docstring(node) is None:
        return None
    docstring = node.body[0]
    lines = problem.prompt.splitlines(keepends=True)
    column = len(lines[docstring.lineno - 1].encode()[:docstring.col_offset].decode())
    position = sum(len(line) for line in lines[:docstring.lineno - 1]) + column
    if position < signature_end or problem.prompt[position:position + 3] not in _TRIPLE_QUOTES:
        return None
    return problem.prompt[signature_end:position + 3]


def _is_code(text: str) -> bool:
    try:
        parse(text)
    except SyntaxError:
        return False
    return True


def clean_rewrite(answer: str) -> str:
    """The rewritten prompt inside a rewriter's ``answer``: the first fenced block that holds
    a ``def`` line (else the first fenced block, else what follows an opening fence that was
    never closed, else the whole answer), without leading blank lines and trailing whitespace,
    ending with one newline; "" when nothing is left."""
    blocks = _FENCED.findall(answer)
    unclosed = _OPEN_FENCE.search(answer)
    text = next((block for block in blocks if re.search(r"^\s*def ", block, re.MULTILINE)),
                blocks[0] if blocks else unclosed.group(1) if unclosed else answer)
    text = text.rstrip()
    while text and not text.split("\n", 1)[0].strip():
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return text + "\n" if text else ""


def missing_examples(problem: Problem, variant_prompt: str) -> list[int]:
    """1-based numbers of the seed's ``examples`` that ``variant_prompt`` does not keep.

    An example is kept when its lines (the ``>>>`` input, its continuations and its expected
    output lines), each stripped, appear as consecutive stripped lines of the variant: the
    indentation may change, nothing else.
    """
    lines = [line.strip() for line in variant_prompt.splitlines()]
    missing = []
    for number, example in enumerate(problem.examples, start=1):
        wanted = [line.strip() for line in example.splitlines()]
        if not any(lines[i:i + len(wanted)] == wanted for i in range(len(lines) - len(wanted) + 1)):
            missing.append(number)
    return missing


ECHO_MIN_CHARS = 20
"""A request line at least this long found verbatim in a rewrite is an echo of the request."""


NEAR_COPY_SIMILARITY = 0.9
"""A rewrite whose description (signature and example lines left out, whitespace normalised)
is at least this similar to the seed's (``difflib`` ratio) is a near copy, not a variant."""

_STOPWORDS = frozenset("""
about also been being between could does each from have into just like many more most much must only other
over same should some such than that their them then there these they this those through under very were what
when where which while will with within would your
""".split())


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)} - _STOPWORDS


def _description_text(problem: Problem, prompt: str) -> str:
    """``prompt`` without its signature line and the seed's example lines, whitespace normalised."""
    fixed = {problem.signature.strip()} | {line.strip() for ex in problem.examples for line in ex.splitlines()}
    return " ".join(" ".join(line.split()) for line in prompt.splitlines() if line.strip() not in fixed).strip()


def rewrite_rejection(problem: Problem, variant_prompt: str, request: str = "",
                      grounding: Sequence[str] = ()) -> str | None:
    """Why ``variant_prompt`` cannot be a variant of ``problem`` (§3.2: the signature and the
    examples' inputs and outputs are kept), or None when it can.

    Reasons, checked in this order: ``"the rewrite is empty"``, ``"the rewrite is the seed
    prompt unchanged"``, ``"the rewrite copies the request: <line>"`` (a line of at least
    ``ECHO_MIN_CHARS`` characters of ``request``, the rewriter's instructions as sent, that is
    not in the seed prompt: small models echo their instructions), ``"the rewrite lacks the
    signature line <signature>"`` (verbatim, as ``repr``), ``"the rewrite lacks example(s) 1,
    3 of the seed"``, for a seed prompt that is Python ``"the rewrite is not valid Python
    (<error> at line <n>)"``, ``"the rewrite is a near copy of the seed (similarity <r>)"``
    (``NEAR_COPY_SIMILARITY``), and ``"the rewrite is not set in the scenario: ..."`` when
    ``grounding`` (the scenario and the contexts) has content words the seed does not use
    and the rewrite uses none of them (§3.2: the rewriter tailors the prompt to them).
    """
    if not variant_prompt.strip():
        return "the rewrite is empty"
    if variant_prompt.strip() == problem.prompt.strip():
        return "the rewrite is the seed prompt unchanged"
    echo = _echoed_line(variant_prompt, request, problem.prompt)
    if echo is not None:
        return f"the rewrite copies the request: {echo!r}"
    if problem.signature not in variant_prompt:
        return f"the rewrite lacks the signature line {problem.signature!r}"
    missing = missing_examples(problem, variant_prompt)
    if missing:
        return f"the rewrite lacks example(s) {', '.join(map(str, missing))} of the seed"
    if _is_code(problem.prompt) and not _is_code(variant_prompt):
        return f"the rewrite is not valid Python ({_syntax_error(variant_prompt)})"
    similarity = difflib.SequenceMatcher(None, _description_text(problem, problem.prompt),
                                         _description_text(problem, variant_prompt), autojunk=False).ratio()
    if similarity >= NEAR_COPY_SIMILARITY:
        return f"the rewrite is a near copy of the seed (similarity {similarity:.2f})"
    new_words = _content_words(" ".join(grounding)) - _content_words(problem.prompt)
    if new_words and not new_words & _content_words(variant_prompt):
        return "the rewrite is not set in the scenario: it uses no word of the scenario or the contexts"
    return None


def _echoed_line(variant_prompt: str, request: str, seed_prompt: str) -> str | None:
    """The first line of ``request`` (stripped, at least ``ECHO_MIN_CHARS`` long, not a line of
    the seed prompt) that ``variant_prompt`` holds, else None."""
    seed_lines = {line.strip() for line in seed_prompt.splitlines()}
    for line in request.splitlines():
        line = line.strip().removeprefix("- ").strip()
        if len(line) >= ECHO_MIN_CHARS and line not in seed_lines and line in variant_prompt:
            return line
    return None


def _syntax_error(text: str) -> str:
    try:
        parse(text)
    except SyntaxError as error:
        return f"{error.msg} at line {error.lineno}"
    return ""


# --- verdicts -------------------------------------------------------------------------


VERDICT_GRAMMAR = (
    'root ::= "VERDICT: " verdict "\\nREASON: " reason\n'
    'verdict ::= "YES" | "NO"\n'
    f"reason ::= [^\\n ] [^\\n]{{0,{REASON_MAX_CHARS - 1}}}\n"
)
"""GBNF of one validator answer, exactly what :func:`parse_verdict` reads::

    VERDICT: YES|NO
    REASON: <1 to 200 characters, no newline>
"""

_VERDICT = re.compile(r"^[\s*#>-]*(?:VERDICT|ANSWER)[\s*]*[:=-][\s*]*(YES|NO)\b", re.IGNORECASE | re.MULTILINE)
_BARE_VERDICT = re.compile(r"^[\s*#>-]*(YES|NO)\b", re.IGNORECASE)
_REASON = re.compile(r"^[\s*#>-]*REASON[\s*]*:[\s*]*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_verdict(answer: str) -> tuple[str | None, str]:
    """``(verdict, reason)`` of a validator's ``answer`` (``VERDICT_GRAMMAR``, read leniently).

    The verdict is the first ``VERDICT:`` (or ``ANSWER:``) line's YES/NO in any case, with
    Markdown bold or bullets around it, or else a YES/NO that starts the answer; None when
    there is neither. The reason is the stripped ``REASON:`` text, "" when absent.
    """
    match = _VERDICT.search(answer) or _BARE_VERDICT.match(answer)
    reason = _REASON.search(answer)
    return (match.group(1).upper() if match else None), (reason.group(1).strip() if reason else "")
