"""Level 4 by a model: a behaviour-preserving rewrite of one function, proposed and statically
gated (SchrodingerRepo §III-E).

§III-E restates the implementation near the eventual fix "in a behaviorally equivalent form
rather than fixing the issue"; §III-F keeps a rewrite only when PASS_TO_PASS all pass and
FAIL_TO_PASS still fail. This module is the model's half, before that test gate:

1. ``rewrite_messages`` renders ``conf/prompts/l4_rewrite.j2`` with the function as the module
   has it (dedented; a method names its class), or, on a retry, ``l4_retry.j2`` with that same
   prompt plus the previous candidate and why it was rejected (a failing test's output, or the
   static gate's reason).
2. ``complete`` (injected; the only place a model is reached) answers in at most ``max_tokens``,
   under ``rewrite_grammar`` where the server takes a grammar: the function's decorators,
   signature and docstring verbatim, then only its body.
3. ``check_answer`` (``raydist.views.l4.gate``) splices the answer's function into the module
   and accepts it only when the new module compiles, the interface is the same and the body
   differs; a rejected ``Proposal`` says why (``REASONS``).

``Proposal``, ``check_answer`` and ``REASONS`` are re-exported here for callers.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

from raydist._util.protocols import Complete
from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates, render
from raydist.views.l4.gate import REASONS, Proposal, check_answer
from raydist.views.l4.splice import shown_function, source_lines

__all__ = [
    "CODE_BLOCK_GRAMMAR", "DEFAULT_PROMPTS_DIR", "REASONS", "Complete", "L4Prompts", "Proposal", "check_answer",
    "default_max_tokens", "estimate_tokens", "load_l4_prompts", "propose_rewrite", "rewrite_grammar",
    "rewrite_messages",
]

PROMPT_FILES = ("l4_rewrite", "l4_retry")
MAX_TOKENS_CAP = 1024
CHARS_PER_TOKEN = 3
"""Python source runs at roughly three characters per token in common BPE / SentencePiece
vocabularies (Gemma 3's included)."""
FENCE_TOKENS = 16
"""Tokens for the fences around the answer."""

CODE_BLOCK_GRAMMAR = 'root ::= "```python\\n" line+ "```"\nline ::= ( [^`\\n] [^\\n]* )? "\\n"\n'
"""GBNF for exactly one ```python block and nothing after it: no line of the code starts with a
backtick, so only the closing fence can end it."""
_GBNF_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}

@dataclass(frozen=True)
class L4Prompts:
    """The Jinja templates of L4 rewrites (``l4_rewrite.j2``, ``l4_retry.j2``)."""

    rewrite: str
    retry: str


def load_l4_prompts(prompts_dir: str | Path = DEFAULT_PROMPTS_DIR) -> L4Prompts:
    """Read ``l4_rewrite.j2`` and ``l4_retry.j2`` from ``prompts_dir`` (a relative path is taken
    from the raydist checkout, not the working directory).

    Raises:
        FileNotFoundError: a template is missing; the message names the file, the folder and
            the two files it must hold.
        jinja2.TemplateSyntaxError: a template does not parse.
    """
    return L4Prompts(**read_templates(prompts_dir, {n.removeprefix("l4_"): n for n in PROMPT_FILES}, "L4"))


def estimate_tokens(text: str) -> int:
    """Rough token count of source ``text`` (``CHARS_PER_TOKEN`` characters each)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def default_max_tokens(function_source: str) -> int:
    """Completion budget for restating ``function_source``: twice its token estimate (a rewrite
    may be longer than the original, e.g. a comprehension unrolled into a loop) plus the fences,
    capped at ``MAX_TOKENS_CAP`` so one call stays bounded and, with the prompt, inside a 4096-token
    context. A function over ~1500 characters may then be cut off ("code block not closed");
    pass ``max_tokens`` for those."""
    return min(MAX_TOKENS_CAP, 2 * estimate_tokens(function_source) + FENCE_TOKENS)


def rewrite_grammar(function_source: str, max_lines: int | None = None) -> str:
    """GBNF for one ```python block that starts with ``function_source``'s fixed part verbatim
    (its decorators and ``def`` line(s), and its docstring when other statements follow it),
    then at most ``max_lines`` body lines (default: twice the original's, plus four), each
    empty or indented, and the closing fence.

    The fixed part must come back unchanged anyway (``same_interface``), and a small model that
    has to write it itself often does not; indented lines keep anything but the function out of
    the block, and the line bound stops a model that would not close it. A line inside a
    multi-line string cannot start at column 0 or with a backtick. ``CODE_BLOCK_GRAMMAR`` when
    nothing can be fixed (the body starts on the ``def`` line, or the source is not one
    definition at column 0).
    """
    try:
        node = ast.parse(function_source).body[0]
    except (SyntaxError, IndexError):
        return CODE_BLOCK_GRAMMAR
    lines = source_lines(function_source)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return CODE_BLOCK_GRAMMAR
    first = node.body[0]
    if lines[first.lineno - 1].encode()[:first.col_offset].strip():
        return CODE_BLOCK_GRAMMAR
    has_doc = ast.get_docstring(node) is not None and len(node.body) > 1
    doc_end = first.end_lineno or first.lineno  # ast.parse sets end_lineno on every statement
    fixed_to = doc_end if has_doc and node.body[1].lineno > doc_end else first.lineno - 1
    if max_lines is None:
        max_lines = 2 * (len(lines) - fixed_to) + 4
    literal = "".join(_GBNF_ESCAPES.get(char, char) for char in "".join(lines[:fixed_to]))
    return (f'root ::= "```python\\n{literal}" body{{1,{max_lines}}} "```"\n'
            'body ::= ( [ \\t]+ [^`\\n \\t] [^\\n]* )? "\\n"\n')


def _render(template: str, **context) -> str:
    return render(template, context, trim_blocks=True, lstrip_blocks=True)


def _module_imports(module_source: str) -> str:
    tree = ast.parse(module_source)
    return "\n".join(segment for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                     and (segment := ast.get_source_segment(module_source, node)) is not None)


def rewrite_messages(module_source: str, qualname: str, prompts: L4Prompts, *, feedback: str | None = None,
                     previous: str | None = None) -> list[dict]:
    """The chat messages asking for a rewrite of ``qualname`` (one user message).

    Template variables: ``qualname``, ``name``, ``class_name`` (``"A.B"`` for ``A.B.meth``, else
    None), ``kind`` ("method"/"function"), ``function_source`` (as ``shown_function``) and
    ``imports`` (the module's top-level import statements); ``l4_retry.j2`` also gets ``task``
    (the first prompt, rendered), ``previous`` (may be None) and ``feedback``.

    Raises ``KeyError``/``ValueError`` as ``find_function``, ``ValueError`` for ``previous``
    without ``feedback``, ``jinja2.UndefinedError`` for a template using an unknown variable.
    """
    if previous is not None and feedback is None:
        raise ValueError("a previous candidate needs the feedback that rejected it")
    owners, _, name = qualname.rpartition(".")
    context = dict(qualname=qualname, name=name, class_name=owners or None, kind="method" if owners else "function",
                   function_source=shown_function(module_source, qualname).rstrip("\n"),
                   imports=_module_imports(module_source))
    text = _render(prompts.rewrite, **context)
    if feedback is not None:
        previous = None if previous is None else previous.rstrip("\n")
        text = _render(prompts.retry, **context, task=text, previous=previous, feedback=feedback.rstrip("\n"))
    return [{"role": "user", "content": text}]


def propose_rewrite(module_source: str, qualname: str, complete: Complete, *, seed: int, feedback: str | None = None,
                    previous: str | None = None, prompts: L4Prompts, max_tokens: int | None = None) -> Proposal:
    """Ask ``complete`` once for a rewrite of function ``qualname`` (``f``, ``Cls.meth``,
    ``A.B.meth``) of ``module_source`` and gate the answer (``check_answer``).

    ``feedback`` (with ``previous``, the last candidate) makes it a retry. ``max_tokens``
    defaults to ``default_max_tokens`` of the function; ``seed`` goes to ``complete``;
    ``rewrite_grammar`` of the function is offered as ``grammar``.

    Raises whatever ``complete`` raises; ``KeyError`` (no such function), ``ValueError``
    (several, or ``previous`` without ``feedback``), ``SyntaxError`` (module does not parse).
    """
    messages = rewrite_messages(module_source, qualname, prompts, feedback=feedback, previous=previous)
    shown = shown_function(module_source, qualname)
    max_tokens = default_max_tokens(shown) if max_tokens is None else max_tokens
    raw = complete(messages, seed=seed, max_tokens=max_tokens, grammar=rewrite_grammar(shown))
    return check_answer(module_source, qualname, raw)


