"""L4 by a model, without a model: the static gate and the splice on real toolz 1.0.0 code.

A scripted ``complete`` stands in for the model, since what is under test is what happens to
an answer: accepted rewrites replace exactly one function and pass toolz's own tests,
rejected ones say exactly why, and retries show the model what went wrong.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from raydist.views.l4.llm import (
    CODE_BLOCK_GRAMMAR,
    Proposal,
    check_answer,
    default_max_tokens,
    load_l4_prompts,
    propose_rewrite,
    rewrite_grammar,
    rewrite_messages,
)
from raydist.views.l4.rewrite import _functions, rewrite_function_source
from raydist.views.l4.splice import shown_function

FREQUENCIES_DOC = '''def frequencies(seq):
    """ Find number of occurrences of each value in seq

    >>> frequencies(['cat', 'cat', 'ox', 'pig', 'pig', 'cat'])  #doctest: +SKIP
    {'cat': 3, 'ox': 1, 'pig': 2}

    See Also:
        countby
        groupby
    """
'''
FREQUENCIES_BODY = """    d = collections.defaultdict(int)
    for item in seq:
        d[item] += 1
    return dict(d)
"""
REWRITTEN_FREQUENCIES = FREQUENCIES_DOC + """    counts = collections.defaultdict(int)
    for value in seq:
        counts[value] = counts[value] + 1
    return dict(counts)
"""
COMPOSE_CALL = """def __call__(self, *args, **kwargs):
    ret = self.first(*args, **kwargs)
    for f in self.funcs:
        ret = f(ret)
    return ret
"""
REWRITTEN_COMPOSE_CALL = """def __call__(self, *args, **kwargs):
    result = self.first(*args, **kwargs)
    for func in self.funcs:
        result = func(
            result)
    return result
"""
COMPOSE_NAME_BODY = """def __name__(self):
    try:
        return '_of_'.join(f.__name__ for f in reversed((self.first,) + self.funcs))
    except AttributeError:
        return type(self).__name__
"""


class Scripted:
    """A ``complete`` that answers with a fixed text and records each call."""

    def __init__(self, answer: str) -> None:
        self.answer, self.calls = answer, []

    def __call__(self, messages, *, seed, max_tokens, grammar):
        self.calls.append(dict(messages=messages, seed=seed, max_tokens=max_tokens, grammar=grammar))
        return self.answer


def fenced(code: str) -> str:
    return f"Here is the rewrite.\n\n```python\n{code}```\n"


@pytest.fixture(scope="module")
def itertoolz(toolz_src) -> str:
    return (toolz_src / "toolz" / "itertoolz.py").read_text()


@pytest.fixture(scope="module")
def functoolz(toolz_src) -> str:
    return (toolz_src / "toolz" / "functoolz.py").read_text()


@pytest.fixture(scope="module")
def prompts():
    return load_l4_prompts()


def _without(source: str, function: str, indent: str = "") -> tuple[str, str]:
    """The module text before and after ``function`` (its exact text at ``indent``)."""
    text = textwrap.indent(function, indent)
    start = source.index(text)
    return source[:start], source[start + len(text):]


def _run_toolz_tests(toolz_src: Path, tmp_path: Path, module: str, source: str, test_file: str):
    tree = tmp_path / "toolz-copy"
    shutil.copytree(toolz_src, tree)
    (tree / "toolz" / module).write_text(source)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"toolz/tests/{test_file}"]
    return subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=300, check=False)


# --- accepted rewrites ------------------------------------------------------------------


def test_correct_rewrite_of_frequencies_is_accepted(itertoolz, prompts):
    proposal = propose_rewrite(itertoolz, "frequencies", Scripted(fenced(REWRITTEN_FREQUENCIES)), seed=0,
                               prompts=prompts)
    assert proposal.reason is None and proposal.accepted
    assert proposal.function_source == REWRITTEN_FREQUENCIES
    assert proposal.raw == fenced(REWRITTEN_FREQUENCIES)


def test_module_outside_the_rewritten_function_is_byte_identical(itertoolz):
    before, after = _without(itertoolz, FREQUENCIES_DOC + FREQUENCIES_BODY)
    proposal = check_answer(itertoolz, "frequencies", fenced(REWRITTEN_FREQUENCIES))
    assert proposal.module_source == before + REWRITTEN_FREQUENCIES + after


def test_accepted_frequencies_rewrite_passes_toolz_itertoolz_tests(itertoolz, toolz_src, tmp_path):
    proposal = check_answer(itertoolz, "frequencies", fenced(REWRITTEN_FREQUENCIES))
    done = _run_toolz_tests(toolz_src, tmp_path, "itertoolz.py", proposal.module_source, "test_itertoolz.py")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "50 passed" in done.stdout


def test_method_written_at_column_zero_is_spliced_at_the_class_indentation(functoolz):
    before, after = _without(functoolz, COMPOSE_CALL, "    ")
    proposal = check_answer(functoolz, "Compose.__call__", fenced(REWRITTEN_COMPOSE_CALL))
    assert proposal.reason is None
    assert proposal.module_source == before + textwrap.indent(REWRITTEN_COMPOSE_CALL, "    ") + after


def test_method_written_at_the_class_indentation_is_spliced_the_same(functoolz):
    at_zero = check_answer(functoolz, "Compose.__call__", fenced(REWRITTEN_COMPOSE_CALL))
    indented = check_answer(functoolz, "Compose.__call__", fenced(textwrap.indent(REWRITTEN_COMPOSE_CALL, "    ")))
    assert indented.module_source == at_zero.module_source
    assert indented.function_source == REWRITTEN_COMPOSE_CALL


def test_method_answered_inside_its_class_is_taken_from_the_class(functoolz):
    wrapped = "class Compose(object):\n" + textwrap.indent(REWRITTEN_COMPOSE_CALL, "    ")
    proposal = check_answer(functoolz, "Compose.__call__", fenced(wrapped))
    assert proposal.module_source == check_answer(functoolz, "Compose.__call__",
                                                  fenced(REWRITTEN_COMPOSE_CALL)).module_source


def test_accepted_method_rewrite_passes_toolz_functoolz_tests(functoolz, toolz_src, tmp_path):
    proposal = check_answer(functoolz, "Compose.__call__", fenced(REWRITTEN_COMPOSE_CALL))
    done = _run_toolz_tests(toolz_src, tmp_path, "functoolz.py", proposal.module_source, "test_functoolz.py")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "38 passed" in done.stdout


def test_nested_class_method_keeps_line_endings_comments_and_docstring():
    module = ("class A:\r\n    class B:\r\n        # above\r\n        @staticmethod\r\n        def m(x):\r\n"
              '            """Doc.\r\n\r\n            More.\r\n            """\r\n            return (x +\r\n'
              "                    1)\r\n            # below\r\n\r\n        y = 2\r\n")
    answer = fenced('@staticmethod\ndef m(x):\n    """Doc.\n\n    More.\n    """\n    total = (x +\n'
                    "             1)\n    return total\n")
    proposal = check_answer(module, "A.B.m", answer)
    assert proposal.module_source == (
        "class A:\r\n    class B:\r\n        # above\r\n        @staticmethod\r\n        def m(x):\r\n"
        '            """Doc.\r\n\r\n            More.\r\n            """\r\n            total = (x +\r\n'
        "                     1)\r\n            return total\r\n            # below\r\n\r\n        y = 2\r\n")


def test_every_deterministic_functoolz_rewrite_answered_dedented_splices_back_exactly(functoolz):
    """The model path (dedented display, re-indented answer) reproduces rewrite_function_source's
    module byte for byte, for module functions and methods alike."""
    compared, mismatched = 0, []
    names = Counter(q for q, _ in _functions(ast.parse(functoolz)))
    for qualname in sorted(q for q, count in names.items() if count == 1):  # _check_sigspec is defined twice (PyPy)
        rewritten = rewrite_function_source(functoolz, qualname, 0)
        if rewritten == functoolz:
            continue
        compared += 1
        if check_answer(functoolz, qualname, fenced(shown_function(rewritten, qualname))).module_source != rewritten:
            mismatched.append(qualname)
    assert (compared, mismatched) == (29, [])


# --- rejections, one reason each --------------------------------------------------------


def _reason(module: str, qualname: str, answer: str) -> str:
    proposal = check_answer(module, qualname, answer)
    assert proposal.module_source is None
    return proposal.reason


def test_answer_without_a_code_block_is_rejected(itertoolz):
    assert _reason(itertoolz, "frequencies", "Use collections.Counter instead.") == "no python code block"


def test_answer_with_only_a_bash_block_is_rejected(itertoolz):
    assert _reason(itertoolz, "frequencies", "```bash\nls\n```") == "no python code block"


def test_answer_cut_off_inside_the_block_is_rejected(itertoolz):
    assert _reason(itertoolz, "frequencies", "```python\ndef frequencies(seq):\n    counts =") == (
        "code block not closed (the answer may have run out of max_tokens)")


def test_syntax_error_is_rejected_with_the_parser_message(itertoolz):
    assert _reason(itertoolz, "frequencies", fenced("def frequencies(seq:\n    return {}\n")) == (
        "does not parse: '(' was never closed (line 1)")


def test_renamed_function_is_rejected(itertoolz):
    renamed = REWRITTEN_FREQUENCIES.replace("def frequencies(", "def count_values(")
    assert _reason(itertoolz, "frequencies", fenced(renamed)) == "defines no function named frequencies"


def test_changed_signature_is_rejected(itertoolz):
    changed = REWRITTEN_FREQUENCIES.replace("frequencies(seq):", "frequencies(items):").replace(
        "value in seq:", "value in items:")
    assert _reason(itertoolz, "frequencies", fenced(changed)) == "interface changed: signature (seq) became (items)"


def test_removed_decorator_is_rejected(functoolz):
    assert _reason(functoolz, "Compose.__name__", fenced(COMPOSE_NAME_BODY)) == (
        "interface changed: decorators @property became none")


def test_dropped_docstring_is_rejected(itertoolz):
    answer = fenced("def frequencies(seq):\n    return dict(collections.Counter(seq))\n")
    assert _reason(itertoolz, "frequencies", answer) == "interface changed: docstring removed"


def test_identical_function_is_rejected(itertoolz):
    assert _reason(itertoolz, "frequencies", fenced(FREQUENCIES_DOC + FREQUENCIES_BODY)) == "identical to the original"


def test_layout_only_change_is_rejected(itertoolz):
    relaid = FREQUENCIES_DOC + FREQUENCIES_BODY.replace("+= 1\n", "+= 1  # count it\n\n")
    assert _reason(itertoolz, "frequencies", fenced(relaid)) == "body unchanged after normalisation"


def test_name_the_module_lacks_is_rejected(itertoolz):
    answer = fenced(FREQUENCIES_DOC + "    return dict(Counter(seq))\n")
    assert _reason(itertoolz, "frequencies", answer) == "uses a name not defined in the module: Counter"


def test_import_of_a_new_module_is_rejected(itertoolz):
    answer = fenced(FREQUENCIES_DOC + "    import numpy\n    return dict(collections.Counter(seq))\n")
    assert _reason(itertoolz, "frequencies", answer) == "imports a module the module does not import: numpy"


def test_code_that_parses_but_does_not_compile_is_rejected(itertoolz):
    answer = fenced(FREQUENCIES_DOC + "    nonlocal seq\n    return dict(collections.Counter(seq))\n")
    assert _reason(itertoolz, "frequencies", answer).startswith("does not compile: ")


def test_unknown_function_raises_key_error(itertoolz):
    with pytest.raises(KeyError, match="no function 'nope'"):
        check_answer(itertoolz, "nope", fenced(REWRITTEN_FREQUENCIES))


def test_property_getter_and_setter_are_ambiguous():
    module = ("class A:\n    @property\n    def x(self):\n        return 1\n\n"
              "    @x.setter\n    def x(self, v):\n        pass\n")
    with pytest.raises(ValueError, match="2 functions are named 'A.x'"):
        check_answer(module, "A.x", fenced("def x(self):\n    return 2 - 1\n"))


# --- prompts and the call -----------------------------------------------------------------


def test_first_prompt_shows_the_method_dedented_and_names_its_class(functoolz, prompts):
    [message] = rewrite_messages(functoolz, "Compose.__call__", prompts)
    assert message["role"] == "user"
    assert f"```python\n{COMPOSE_CALL}```" in message["content"]
    assert "method `__call__` of class `Compose`" in message["content"]
    assert "from types import MethodType" in message["content"]


def test_retry_prompt_contains_the_feedback_and_the_previous_candidate(itertoolz, prompts):
    complete = Scripted(fenced(REWRITTEN_FREQUENCIES))
    feedback = "FAILED toolz/tests/test_itertoolz.py::test_frequencies - AssertionError: {} != {'a': 1}"
    previous = FREQUENCIES_DOC + "    return {}\n"
    propose_rewrite(itertoolz, "frequencies", complete, seed=3, feedback=feedback, previous=previous, prompts=prompts)
    content = complete.calls[0]["messages"][0]["content"]
    assert feedback in content
    assert f"```python\n{previous}```" in content
    assert f"```python\n{FREQUENCIES_DOC}{FREQUENCIES_BODY}```" in content


def test_previous_candidate_without_feedback_is_refused(itertoolz, prompts):
    with pytest.raises(ValueError, match="needs the feedback"):
        rewrite_messages(itertoolz, "frequencies", prompts, previous="def frequencies(seq):\n    pass\n")


def test_complete_gets_the_seed_the_default_budget_and_the_function_grammar(itertoolz, prompts):
    complete = Scripted(fenced(REWRITTEN_FREQUENCIES))
    propose_rewrite(itertoolz, "frequencies", complete, seed=11, prompts=prompts)
    call = complete.calls[0]
    assert (call["seed"], call["max_tokens"]) == (11, 248)
    assert call["grammar"] == rewrite_grammar(FREQUENCIES_DOC + FREQUENCIES_BODY)


def test_grammar_fixes_the_def_line_and_bounds_the_body(functoolz):
    assert rewrite_grammar(shown_function(functoolz, "Compose.__call__")) == (
        'root ::= "```python\\ndef __call__(self, *args, **kwargs):\\n" body{1,12} "```"\n'
        'body ::= ( [ \\t]+ [^`\\n \\t] [^\\n]* )? "\\n"\n')


def test_grammar_fixes_decorators_and_the_docstring_escaped():
    source = '@property\ndef f(self):\n    r"""Say "hi" to C:\\temp."""\n    return 1\n'
    assert rewrite_grammar(source).startswith(
        r'root ::= "```python\n@property\ndef f(self):\n    r\"\"\"Say \"hi\" to C:\\temp.\"\"\"\n" body{1,6} "```"')


def test_grammar_of_a_one_line_def_is_the_plain_code_block():
    assert rewrite_grammar("def f(x): return x\n") == CODE_BLOCK_GRAMMAR


def test_explicit_max_tokens_overrides_the_default(itertoolz, prompts):
    complete = Scripted(fenced(REWRITTEN_FREQUENCIES))
    propose_rewrite(itertoolz, "frequencies", complete, seed=0, prompts=prompts, max_tokens=64)
    assert complete.calls[0]["max_tokens"] == 64


def test_default_budget_is_twice_the_estimate_plus_fences_capped(itertoolz):
    assert len(shown_function(itertoolz, "frequencies")) == 346
    assert default_max_tokens("x" * 346) == 2 * 116 + 16
    assert default_max_tokens("x" * 10_000) == 1024


def test_missing_template_names_the_file_and_folder(tmp_path):
    (tmp_path / "l4_rewrite.j2").write_text("{{ function_source }}")
    with pytest.raises(FileNotFoundError, match=f"l4_retry.j2 is missing from {tmp_path}"):
        load_l4_prompts(tmp_path)


def test_proposal_is_frozen():
    proposal = Proposal(None, None, "no python code block", "")
    with pytest.raises(AttributeError):
        proposal.reason = None
