"""The shared prompt-template module: reading, load-time checks, the relative folder, and
rendering exactly as jinja2 does for each consumer (rendered messages key request caches)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from raydist.agents import load_prompts
from raydist.problems import load_dyc_prompts
from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates, render, resolve_prompts_dir
from raydist.views.l1.statement import load_l1_prompts
from raydist.views.l4.llm import load_l4_prompts

ROOT = Path(__file__).resolve().parents[1]
STEMS = {"first": "a_first", "second": "a_second"}


def test_templates_come_back_by_field_in_the_given_order(tmp_path):
    (tmp_path / "a_first.j2").write_text("one {{ x }}\n")
    (tmp_path / "a_second.j2").write_text("two\n")
    assert read_templates(tmp_path, STEMS, "Test") == {"first": "one {{ x }}\n", "second": "two\n"}
    assert list(read_templates(tmp_path, STEMS, "Test")) == ["first", "second"]


def test_a_missing_file_is_named_with_its_folder_and_the_expected_files(tmp_path):
    (tmp_path / "a_first.j2").write_text("one")
    with pytest.raises(FileNotFoundError) as caught:
        read_templates(tmp_path, STEMS, "Test")
    assert str(caught.value) == (f"Test prompt template a_second.j2 is missing from {tmp_path}; "
                                 "the folder must hold a_first.j2, a_second.j2")


def test_a_missing_folder_is_said_to_be_missing(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        read_templates(tmp_path / "nowhere", STEMS, "Test")
    assert str(caught.value) == (f"Test prompt template a_first.j2 is missing from {tmp_path / 'nowhere'} "
                                 "(no such folder); the folder must hold a_first.j2, a_second.j2")


def test_a_template_that_does_not_parse_fails_at_load_naming_its_file(tmp_path):
    (tmp_path / "a_first.j2").write_text("fine")
    (tmp_path / "a_second.j2").write_text("line one\n{% if x %}never closed\n")
    with pytest.raises(jinja2.TemplateSyntaxError) as caught:
        read_templates(tmp_path, STEMS, "Test")
    assert (caught.value.filename, caught.value.lineno) == (str(tmp_path / "a_second.j2"), 2)
    assert str(caught.value) == (
        "Test prompt template a_second.j2 does not parse: Unexpected end of template. Jinja was looking for the "
        "following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'.\n"
        f'  File "{tmp_path / "a_second.j2"}", line 2')


@pytest.mark.parametrize("load", [load_prompts, load_l1_prompts, load_l4_prompts, load_dyc_prompts])
def test_every_loader_fails_at_load_on_a_syntax_error(tmp_path, load):
    for name in ("system", "instance", "observation", "format_error", "l1_paraphrase", "l1_refine", "l1_verify",
                 "l4_rewrite", "l4_retry", "dyc_scenario", "dyc_context", "dyc_rewrite", "dyc_validate_semantic",
                 "dyc_validate_solution"):
        (tmp_path / f"{name}.j2").write_text("{{ unclosed ")
    with pytest.raises(jinja2.TemplateSyntaxError):
        load(tmp_path)


def test_a_relative_folder_is_the_checkouts_not_the_working_directorys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_prompts_dir("conf/prompts") == ROOT / "raydist" / "conf" / "prompts" == DEFAULT_PROMPTS_DIR
    assert resolve_prompts_dir(tmp_path) == tmp_path
    shipped = (ROOT / "raydist" / "conf" / "prompts" / "l4_retry.j2").read_text()
    assert read_templates("conf/prompts", {"retry": "l4_retry"}, "L4") == {"retry": shipped}


@pytest.mark.parametrize("load", [load_prompts, load_l1_prompts, load_l4_prompts, load_dyc_prompts])
def test_every_loader_reads_the_shipped_templates_from_a_relative_folder(tmp_path, monkeypatch, load):
    monkeypatch.chdir(tmp_path)
    assert load("conf/prompts") == load(ROOT / "raydist" / "conf" / "prompts")


REFINE = {"statement": "It breaks.\n\nSee `x`.", "candidate": "C", "missing": ["'Valid ids'", "a\nb"],
          "verdicts": {"BUG": "YES", "REQUIREMENTS": "NO", "SUCCESS": None}, "reason": "R", "unchanged": True}
CONTEXT = {"prompt": "def f(a, b):\n    pass\n", "param_types": {"a": "int", "b": "list[str]"}, "scenario": "retail"}


def test_l1_renders_byte_for_byte_as_a_plain_jinja2_environment():
    text = (ROOT / "raydist" / "conf" / "prompts" / "l1_refine.j2").read_text()
    direct = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(text).render(**REFINE)
    assert render(text, REFINE) == direct
    system, user = load_l1_prompts(ROOT / "raydist" / "conf" / "prompts").messages("refine", **REFINE)
    assert user == {"role": "user", "content": direct.strip()}


def test_dycodeeval_renders_byte_for_byte_with_trimmed_blocks():
    text = (ROOT / "raydist" / "conf" / "prompts" / "dyc_context.j2").read_text()
    direct = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                autoescape=False).from_string(text).render(**CONTEXT)
    assert render(text, CONTEXT, trim_blocks=True, lstrip_blocks=True) == direct
    assert render(text, CONTEXT) != direct  # the options matter for this template, so the check has teeth
    assert load_dyc_prompts().messages("context", **CONTEXT) == [{"role": "user", "content": direct.strip()}]


def test_an_undefined_variable_raises():
    with pytest.raises(jinja2.UndefinedError, match="'missing' is undefined"):
        render("{{ missing }}", {})
