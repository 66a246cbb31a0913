"""Consistent renaming inside a prompt: identifiers in the code through libcst, and mentions in
the entry function's description (examples through Python's tokenizer, prose by whole word)."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping

import libcst as cst

from raydist.analysis._prompt import NotApplicable, description, example_kind, example_units

# A name that could be an ordinary English word ("add", "string", "numbers", the article "a") is
# left alone in prose, where it is more often the word than a reference to the code.
_ENGLISH_LETTERS = frozenset({"a", "A", "I"})


def _codelike(name: str) -> bool:
    """True for names that cannot be an English word: snake_case, digits, an inner capital, or a
    single letter other than a/A/I (the ``n`` of "a number n")."""
    if len(name) == 1:
        return name not in _ENGLISH_LETTERS
    return "_" in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])


class _NameRenamer(cst.CSTTransformer):
    """Renames ``Name`` nodes; attribute names, keyword-argument names and imported names keep theirs."""

    def __init__(self, mapping: Mapping[str, str]):
        super().__init__()
        self.mapping = mapping

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.mapping.get(updated.value, updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> cst.ImportAlias:
        return original


def rename_function(prompt: str, old: str, new: str) -> str:
    """Every code reference to function ``old`` (its ``def`` and all uses) and every mention in
    the entry function's description (found under its new name) renamed to ``new``."""
    module = cst.parse_module(prompt)
    renamed = module.visit(_NameRenamer({old: new})).code
    return rename_in_description(renamed, new, {old: new})


def rename_parameters(prompt: str, entry_point: str, mapping: Mapping[str, str]) -> str:
    """The entry function's parameters renamed per ``mapping`` in its signature, its body and its
    description; defaults and annotations are left alone (they are evaluated outside the function).
    Raises NotApplicable when there is no top-level function ``entry_point``."""
    module = cst.parse_module(prompt)
    body = list(module.body)
    index, fn = _entry_function(body, entry_point)
    params = fn.params
    renamer = _NameRenamer(mapping)
    body[index] = fn.with_changes(
        params=params.with_changes(
            posonly_params=[_param(p, mapping) for p in params.posonly_params],
            params=[_param(p, mapping) for p in params.params],
            kwonly_params=[_param(p, mapping) for p in params.kwonly_params],
            star_arg=_param(params.star_arg, mapping) if isinstance(params.star_arg, cst.Param) else params.star_arg,
            star_kwarg=_param(params.star_kwarg, mapping) if params.star_kwarg else None,
        ),
        body=fn.body.visit(renamer),
    )
    return rename_in_description(module.with_changes(body=body).code, entry_point, mapping)


def _param(param: cst.Param, mapping: Mapping[str, str]) -> cst.Param:
    return param.with_changes(name=param.name.with_changes(value=mapping.get(param.name.value, param.name.value)))


def _entry_function(body: list, entry_point: str) -> tuple[int, cst.FunctionDef]:
    """The last top-level ``def entry_point`` of a module's ``body``, with its index."""
    for i in range(len(body) - 1, -1, -1):
        node = body[i]
        if isinstance(node, cst.FunctionDef) and node.name.value == entry_point:
            return i, node
    raise NotApplicable(f"no top-level function {entry_point!r} in the prompt")


def rename_in_description(prompt: str, entry_point: str, mapping: Mapping[str, str]) -> str:
    """Mentions of ``mapping``'s keys in the entry function's description renamed: NAME tokens in
    example lines (never inside their string literals), whole words in prose when the name cannot
    be an English word (snake_case, a digit, an inner capital, one letter other than a/A/I).
    A prompt whose entry function has no description comes back unchanged."""
    try:
        desc = description(prompt, entry_point)
    except NotApplicable:
        return prompt
    lines = desc.text.split("\n")
    in_example = {i for unit in example_units(lines) for i in unit}
    for i, line in enumerate(lines):
        if i in in_example or example_kind(line) in ("doctest", "call"):
            lines[i] = _rename_code_line(line, mapping)
        else:
            lines[i] = _rename_prose_line(line, mapping)
    return desc.replaced("\n".join(lines))


def _rename_prose_line(line: str, mapping: Mapping[str, str]) -> str:
    for old, new in mapping.items():
        if _codelike(old):
            line = re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", new, line)
    return line


def _rename_code_line(line: str, mapping: Mapping[str, str]) -> str:
    """NAME tokens of one example line renamed. The line need not be valid Python (``f(x) ➞ y``):
    the tokens read before the tokenizer gives up are renamed, the rest is left as it is."""
    body = line.lstrip()
    spans = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(body).readline):
            if tok.type == tokenize.NAME and tok.string in mapping and tok.start[0] == 1:
                spans.append((tok.start[1], tok.end[1], mapping[tok.string]))
    except (tokenize.TokenError, SyntaxError):
        pass
    for start, end, new in reversed(spans):
        body = body[:start] + new + body[end:]
    return line[: len(line) - len(line.lstrip())] + body
