"""Level 1 without a capable model: a deterministic, seeded restatement of a problem statement.

SchrodingerRepo §III-B rewords the statement while keeping the bug description, the
requirements and the success criteria. When no LLM paraphrase passes (offline, the embedded
270M model never writes one), ``rule_paraphrase`` changes the statement's surface by fixed
rules, each of which leaves meaning alone:

1. issue-template scaffolding goes: HTML comments, ``_No response_``, greeting lines ("Hi
   all,") and sign-off lines ("Thanks!", "Best regards"); a Markdown heading becomes a plain
   line ending with a colon ("### Expected behavior" -> "Expected behavior:");
2. fixed discourse phrases are rewritten from a lexicon (``LEXICON``: "But " -> "However, ",
   "instead of" -> "rather than", "does not" -> "doesn't"...), the variant chosen by the seed;
3. list markers are renumbered: ordered items ``1.`` become ``1)`` (or stay, by seed), bullets
   ``*`` become ``-`` and ``-`` become ``*``;
4. independent paragraphs are reordered by the seed: the first paragraph (the summary) stays
   first, a paragraph ending with a colon stays before what it introduces, and a code block
   stays after the paragraph that shows it;
5. the summary line gets a lead-in chosen by the seed ("Summary: ", "Problem: "...; ``LEAD_INS``).

Code blocks, inline code and every other protected span (``raydist.views.l1._spans``:
identifiers, paths, numbers inside code, error messages, quoted literals, URLs) are never
edited: a rule only rewrites prose outside code, and ``rule_paraphrase`` checks the result
with ``missing_spans`` and drops a rule whose edits lost a span (lead-in only, in the worst
case), so the restatement keeps every protected span verbatim by construction and by check.
"""

from __future__ import annotations

import random
import re

from raydist.views.l1._spans import missing_spans, normalise

__all__ = ["LEAD_INS", "LEXICON", "rule_paraphrase"]

#: Fixed discourse phrases and their rewrites (prose only; the seed picks one variant per phrase).
LEXICON: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bBut\b(?=\s)", ("However,", "Yet")),
    (r"\bHowever,", ("That said,", "Still,")),
    (r"\bI expected\b", ("What I expected was", "I was expecting")),
    (r"^Expected\b", ("The expected result is", "What should happen instead:")),
    (r"\binstead of\b", ("rather than", "in place of")),
    (r"\bshould be\b", ("ought to be", "is supposed to be")),
    (r"\bdoes not\b", ("doesn't",)),
    (r"\bis not\b", ("isn't",)),
    (r"\bcannot\b", ("can't",)),
    (r"\bfor example\b", ("for instance",)),
    (r"\bFor example\b", ("For instance",)),
    (r"\bsuch as\b", ("like",)),
    (r"\bthe same as\b", ("identical to", "just like")),
    (r"\bIn order to\b", ("To",)),
    (r"\bin order to\b", ("to",)),
    (r"\bI think\b", ("It seems",)),
    (r"\bWe rely on\b", ("Our code relies on", "We depend on")),
    (r"\bwe rely on\b", ("our code relies on", "we depend on")),
    (r"\bThis also breaks\b", ("It also breaks", "The same bug also breaks")),
    (r"\bas well\b(?! as)", ("too",)),
    (r"\bno matter what\b", ("regardless of what",)),
    (r"\bis meant to\b", ("is supposed to", "is intended to")),
    (r"\bcorrectly gives\b", ("rightly returns",)),
)
#: What the summary line may start with, by seed.
LEAD_INS = ("Summary: ", "Problem: ", "Issue: ", "Reported bug: ", "In short: ")

_FENCE_LINE = re.compile(r"^[ \t]*`{3,}")
_INLINE = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|'[^'\s\n]*'")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_GREETING = re.compile(r"^\s*(hi|hello|hey|dear)( (all|team|there|everyone|folks|maintainers))?[,!.]*\s*$",
                       re.IGNORECASE)
_SIGN_OFF = re.compile(r"^\s*(thanks|thank you|many thanks|cheers|best|best regards|regards|kind regards)"
                       r"( (in advance|a lot|so much|for your help))?[,!.]*\s*$", re.IGNORECASE)
_NO_RESPONSE = re.compile(r"^\s*_No response_\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_ORDERED = re.compile(r"^(\s*)(\d+)\.(\s+)")
_BULLET = re.compile(r"^(\s*)([*-])(\s+)")


def rule_paraphrase(statement: str, seed: int) -> str:
    """``statement`` restated by the rules above, the choices made by ``seed`` (the same
    statement and seed give the same text in every process; seeds that differ modulo
    ``len(LEAD_INS)`` differ at least in the lead-in). Every protected span of ``statement`` is kept verbatim
    (``missing_spans`` of the result is empty: a rule that lost one is dropped), and the
    result always differs from ``statement``. Pure: no model, no randomness beyond the seed."""
    text = normalise(statement).strip("\n")
    rng = random.Random(f"raydist-l1-rule:{seed}")
    plans = [("scaffold", "lexicon", "lists", "reorder"), ("scaffold", "lists", "reorder"), ("reorder",), ()]
    choices: dict = {"lexicon": [rng.randrange(len(v)) for _, v in LEXICON], "ordered": rng.random() < 0.5,
                     "shuffle": rng.randrange(2 ** 32), "lead": seed % len(LEAD_INS)}
    for plan in plans:
        candidate = _lead_in(_apply(text, plan, choices), choices["lead"])
        if not missing_spans(statement, candidate) and normalise(candidate).strip() != normalise(statement).strip():
            return candidate
    raise AssertionError("the lead-in alone changed a protected span")  # cannot happen: it only prefixes prose


def _apply(text: str, plan: tuple[str, ...], choices: dict) -> str:
    blocks = _blocks(text)
    if "scaffold" in plan:
        blocks = [b for b in (_drop_scaffold(b) for b in blocks) if b.strip()]
    if "lexicon" in plan:
        blocks = [b if _is_code(b) else _prose(b, lambda s: _lexicon(s, choices["lexicon"])) for b in blocks]
    if "lists" in plan:
        blocks = [b if _is_code(b) else _relist(b, choices["ordered"]) for b in blocks]
    if "reorder" in plan:
        blocks = _reorder(blocks, choices["shuffle"])
    return "\n\n".join(blocks)


def _blocks(text: str) -> list[str]:
    """Paragraphs separated by blank lines; a fenced code block is one block, blank lines and all."""
    blocks: list[str] = []
    current: list[str] = []
    fence = False
    for line in text.split("\n"):
        if _FENCE_LINE.match(line):
            if not fence and current:
                blocks.append("\n".join(current))
                current = []
            current.append(line)
            if fence:
                blocks.append("\n".join(current))
                current = []
            fence = not fence
            continue
        if not fence and not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _is_code(block: str) -> bool:
    """A fenced block, or an indented one (every line starts with four spaces or a tab)."""
    lines = [line for line in block.split("\n") if line.strip()]
    return bool(_FENCE_LINE.match(block)) or (bool(lines) and all(line.startswith(("    ", "\t")) for line in lines))


def _drop_scaffold(block: str) -> str:
    if _is_code(block):
        return block
    block = _COMMENT.sub("", block)
    lines = []
    for line in block.split("\n"):
        if _GREETING.match(line) or _SIGN_OFF.match(line) or _NO_RESPONSE.match(line):
            continue
        heading = _HEADING.match(line)
        lines.append(f"{heading.group(2).strip('*_ ').rstrip(':')}:" if heading else line)
    return "\n".join(lines).strip("\n")


def _prose(block: str, edit) -> str:
    """``block`` with ``edit`` applied to its prose only: inline code and quoted literals are
    masked while it runs and put back unchanged."""
    kept: list[str] = []

    def mask(match: re.Match) -> str:
        kept.append(match.group(0))
        return f"\x00{len(kept) - 1}\x00"

    masked = _QUOTED.sub(mask, _INLINE.sub(mask, block))
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], edit(masked))


def _lexicon(text: str, picks: list[int]) -> str:
    for (pattern, variants), pick in zip(LEXICON, picks, strict=True):
        text = re.sub(pattern, variants[pick], text, flags=re.MULTILINE)
    return text


def _relist(block: str, ordered_parens: bool) -> str:
    lines = []
    for line in block.split("\n"):
        if ordered_parens and _ORDERED.match(line):
            line = _ORDERED.sub(r"\1\2)\3", line, count=1)
        elif _BULLET.match(line) and not line.lstrip().startswith("**"):
            line = _BULLET.sub(lambda m: f"{m.group(1)}{'-' if m.group(2) == '*' else '*'}{m.group(3)}", line, count=1)
        lines.append(line)
    return "\n".join(lines)


def _reorder(blocks: list[str], draw: int) -> list[str]:
    """The first block stays; the others, as units (a block ending with ':' and the code blocks
    right after a block go with it), are shuffled by ``draw``."""
    if len(blocks) < 2:
        return blocks
    units: list[list[str]] = [[blocks[0]]]
    for block in blocks[1:]:
        if _is_code(block) or units[-1][-1].rstrip().endswith(":"):
            units[-1].append(block)
        else:
            units.append([block])
    head, rest = units[0], units[1:]
    random.Random(draw).shuffle(rest)
    return [block for unit in (head, *rest) for block in unit]


def _lead_in(text: str, pick: int) -> str:
    first, sep, rest = text.partition("\n")
    if _is_code(first) or not first.strip():
        return LEAD_INS[pick] + "\n\n" + text
    return f"{LEAD_INS[pick]}{first}{sep}{rest}"
