"""Level 1 protected spans: the parts of a problem statement a paraphrase must keep verbatim.

SchrodingerRepo §III-B rewords the statement but keeps the bug description, requirements and
success criteria. Wording may change; the tokens an agent would grep for, run or compare
against may not. ``protected_spans`` finds them with fixed textual rules, applied in this
order, each rule masking what it took so that later rules never see it twice:

1. fenced code blocks (a line opening with three or more backticks up to the line closing
   with the same fence, or to the end of the text when unclosed): the lines between the
   fences, one span per block; the fence lines and their info string (```python) are not
   part of it;
2. inline code spans (`x`, ``x``): their content, stripped of surrounding spaces;
3. traceback lines outside code blocks: ``Traceback (most recent call last):``,
   ``File "...", line N...`` together with the indented source line under it, and a line
   that starts with an exception name and a colon (``UnicodeDecodeError: ...``) or is only
   an exception name; each stripped of its leading indentation;
4. URLs (``http://``, ``https://``);
5. quoted literals outside code: the content of "..." (curly double quotes too) up to 80
   characters, and of '...' without spaces up to 40, unless the content is one ordinary
   lowercase word (a scare-quoted "right" stays prose);
6. file paths: a run of path characters with a ``/`` that starts with ``/``, ``./``,
   ``../`` or ``~/``, or whose last component has an extension starting with a letter
   (``pkg/mod.py``, ``doc/x.ipynb``), but not an HTML closing tag (``</details>``); a name
   with a known source or config extension and no ``/`` (``config.toml``, ``my-file.py``);
   a dotfile (``.env``);
7. dotted names (``pkg.mod.func``, ``test.local``), except those whose parts are all
   single letters (``e.g``, ``i.e``); a call's parentheses are not part of the span;
8. code-like words: identifiers containing ``_`` (``snake_case``, ``_id``, ``LC_ALL``),
   identifiers with an inner capital (``MultiIndex``, ``IPython``; not plural acronyms
   like ``URLs``), identifiers written as a call (``titleize(``, but not ``method(s)``),
   Unicode code points (``U+3FFFD``), hex literals (``0x7f``) and long options
   (``--verbose``).

Markdown emphasis (``_No response_``) is prose, so its underscores are ignored. Plain
numbers, version strings and ordinary words are never spans: whether "2" became "two" is
the verifier's question, not this module's.

Comparison is line-normalised: line endings become ``\\n`` and trailing spaces and tabs of
every line are dropped, in the statement and in the candidate alike; indentation and
everything else is compared exactly.
"""

from __future__ import annotations

import re

KNOWN_EXTENSIONS = frozenset(
    "py pyi pyx pxd pyc cfg toml ini txt md rst json jsonl yaml yml lock c h cc cpp hpp rs "
    "java js ts jsx tsx sh bash bat ps1 ipynb html htm css csv tsv xml sql j2 jinja log pem "
    "patch diff whl gz tar zip dll".split()
)

_FENCE = re.compile(r"^[ \t]*(`{3,})[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_TRACEBACK = re.compile(
    r"^[ \t]*(?:Traceback \(most recent call last\):"
    r"|File \"[^\"\n]+\", line \d+[^\n]*(?:\n[ \t]+[^ \t\n][^\n]*)?"  # with its source line
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Iteration):[^\n]*"
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Iteration))[ \t]*$",
    re.MULTILINE,
)
_EMPHASIS = re.compile(r"(?<!\w)(_{1,2})(?=[^\s_])([^\n_]*?\s[^\n_]*?)(?<=[^\s_])\1(?!\w)")
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]]+")
_PATH_RUN = re.compile(
    r"(?<![<\w.~+-])[\w.~+-]*/[\w./~+-]*"  # anything with a slash, not after "<"
    r"|(?<![\w.-])(?:\.[A-Za-z][\w+-]*|[\w+-]+\.[\w+-]+)(?:\.[\w+-]+)*"  # dotfile or name.ext
)
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_QUOTED = re.compile(
    r"(?<![\w\"])\"([^\"\n]{1,80})\"(?![\w\"])"
    r"|“([^”\n]{1,80})”"
    r"|(?<![\w'])'([^'\s]{1,40})'(?![\w'])"
)
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w])")
_CODE_WORD = re.compile(r"(?<![\w.+])(?:U\+[0-9A-Fa-f]{4,6}|0[xX][0-9A-Fa-f]+|--[A-Za-z][\w-]*|[A-Za-z_]\w*)(?![\w+])")
_INNER_CAPITAL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_PLURAL_ACRONYM = re.compile(r"[A-Z]{2,}s")
_PLURAL_SUFFIX = re.compile(r"\((?:e?s)\)")
_PLAIN_WORD = re.compile(r"[a-z]+")


def normalise(text: str) -> str:
    """``text`` with ``\\n`` line endings and no trailing spaces or tabs on any line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip(" \t") for line in text.split("\n"))


def protected_spans(statement: str) -> list[str]:
    """The substrings of ``statement`` that a paraphrase must keep verbatim (SchrodingerRepo §III-B).

    Args:
        statement: a problem statement (Markdown or plain text).

    Returns:
        The spans found by the rules in this module's docstring, line-normalised, without
        duplicates, in order of first appearance; ``[]`` for a statement of plain prose.
    """
    text = normalise(statement)
    found: list[tuple[int, str]] = []
    masked = _take(text, _FENCE, found, _block_content)
    masked = _take(masked, _INLINE, found, lambda m: m.group(2).strip())
    masked = _take(masked, _TRACEBACK, found, lambda m: m.group(0).strip())
    masked = _EMPHASIS.sub(lambda m: " " * len(m.group(1)) + m.group(2) + " " * len(m.group(1)), masked)
    masked = _take(masked, _URL, found, lambda m: m.group(0).rstrip(".,;:!?"))
    masked = _take(masked, _QUOTED, found, lambda m: _quoted(m, text))
    masked = _take(masked, _PATH_RUN, found, _path)
    masked = _take(masked, _DOTTED, found, _dotted)
    _take(masked, _CODE_WORD, found, _code_word)
    spans: list[str] = []
    for _, span in sorted(found, key=lambda item: item[0]):
        if span and span not in spans:
            spans.append(span)
    return spans


def missing_spans(original: str, candidate: str) -> list[str]:
    """Protected spans of ``original`` that ``candidate`` does not contain (both line-normalised).

    Returns:
        The missing spans in their order in ``original``; ``[]`` when all survived.
    """
    text = normalise(candidate)
    return [span for span in protected_spans(original) if span not in text]


def _take(text: str, pattern: re.Pattern, found: list[tuple[int, str]], span_of) -> str:
    """Record ``span_of(match)`` for each match (None: not a span, leave the text) and mask
    the recorded matches with spaces, so positions stay those of the statement."""
    pieces, last = [], 0
    for match in pattern.finditer(text):
        span = span_of(match)
        if span is None:
            continue
        if span:
            found.append((match.start(), span))
        pieces.append(text[last:match.start()])
        pieces.append(re.sub(r"[^\n]", " ", match.group(0)))
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _block_content(match: re.Match) -> str:
    return match.group(2).strip("\n")


def _path(match: re.Match) -> str | None:
    run = match.group(0).rstrip(".-")
    if "/" in run:
        if re.match(r"(?:/|\./|\.\./|~/)[\w.~+-]", run) or _EXTENSION.search(run.rsplit("/", 1)[-1]):
            return run
        return None
    if re.fullmatch(r"\.[A-Za-z][\w-]*", run):
        return run
    stem, _, extension = run.rpartition(".")
    if stem and extension in KNOWN_EXTENSIONS and re.search(r"[A-Za-z]", stem):
        return run
    return None


def _quoted(match: re.Match, text: str) -> str | None:
    # The content comes from the statement, not the masked text: a quotation is kept whole
    # even when an earlier rule already took a piece of it.
    group = next(index for index in (1, 2, 3) if match.group(index) is not None)
    content = text[match.start(group):match.end(group)].strip()
    return None if _PLAIN_WORD.fullmatch(content) else content


def _dotted(match: re.Match) -> str | None:
    name = match.group(0)
    return None if all(len(part) == 1 for part in name.split(".")) else name


def _code_word(match: re.Match) -> str | None:
    word = match.group(0)
    if not word[0].isalpha() and word[0] != "_" or word.startswith(("U+", "0x", "0X")):
        return word  # a code point, hex literal or long option
    if "_" in word and re.search(r"[A-Za-z0-9]", word):
        return word
    if _INNER_CAPITAL.search(word) and not _PLURAL_ACRONYM.fullmatch(word):
        return word
    after = match.string[match.end():match.end() + 4]
    if after.startswith("(") and not _PLURAL_SUFFIX.match(after):
        return word
    return None
