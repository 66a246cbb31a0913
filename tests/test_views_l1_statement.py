"""Level 1 (SchrodingerRepo §III-B) without a model: protected spans on real problem statements,
and the paraphrase-check-verify-refine loop driven by a scripted `complete`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raydist.views.l1.statement import (
    VERIFIER_GRAMMAR,
    VERIFY_MAX_TOKENS,
    L1Prompts,
    StatementResult,
    clean_candidate,
    form_problem,
    load_l1_prompts,
    missing_spans,
    paraphrase_budget,
    parse_verdict,
    protected_spans,
    reconstruct_statement,
    rule_paraphrase,
)

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "raydist" / "tasks" / "builtin" / "instances.jsonl"
OFFLINE = ROOT.parent / "shared" / "data" / "swebench" / "offline.jsonl"
needs_offline = pytest.mark.skipif(not OFFLINE.is_file(), reason=f"{OFFLINE} (shared reference data) is absent")


def statements(path: Path) -> dict[str, str]:
    return {record["instance_id"]: record["problem_statement"]
            for record in map(json.loads, path.read_text().splitlines())}


HUMANIZE = statements(BUILTIN)["jpvanhal__inflection-humanize-id-anchor"]
HUMANIZE_BLOCK = (
    '>>> import inflection\n>>> inflection.humanize("user_identity")\n\'User entity\'\n'
    '>>> inflection.humanize("valid_ids")\n\'Valids\''
)
# A faithful paraphrase of HUMANIZE, written by hand: every protected span kept.
HUMANIZE_PARAPHRASE = f"""Words that only contain `_id` get mangled by `inflection.humanize`.

Calling `humanize("author_id")` gives `"Author"` as it should, since `humanize()` is documented to \
remove a *trailing* `"_id"`. The trouble is that an `_id` anywhere else in the string disappears too:

```python
{HUMANIZE_BLOCK}
```

The results should be `'User identity'` and `'Valid ids'`. Because of this, `titleize()` is broken as \
well for column names like `user_identity`, which serve as table headers."""
ALL_YES = "BUG: YES\nREQUIREMENTS: YES\nSUCCESS: YES\nREASON: same bug, same expectations."

# Templates that show every variable, so a test can read exactly what the loop passed.
PROBE_PROMPTS = L1Prompts(
    paraphrase="PARAPHRASE {{ statement }}",
    refine="REFINE candidate={{ candidate }} | missing={{ missing | join(';') }} | "
           "verdicts={{ verdicts | dictsort }} | reason={{ reason }} | unchanged={{ unchanged }}",
    verify="VERIFY {{ candidate }}",
    system="SYSTEM",
)


class Script:
    """`complete` that returns (or raises) the given answers in order and records each request."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[dict] = []

    def __call__(self, messages, *, seed, max_tokens, grammar=None):
        self.requests.append({"messages": messages, "seed": seed, "max_tokens": max_tokens, "grammar": grammar})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def users(self) -> list[str]:
        return [request["messages"][-1]["content"] for request in self.requests]


# --- protected spans on real statements ------------------------------------------------------


def test_builtin_humanize_statement_has_exactly_its_code_spans():
    assert protected_spans(HUMANIZE) == [
        "inflection.humanize", "_id", "humanize()", '"_id"', 'humanize("author_id")', '"Author"',
        HUMANIZE_BLOCK, "'User identity'", "'Valid ids'", "titleize()", "user_identity",
    ]


def test_builtin_table_bound_statement_keeps_code_points_and_its_example():
    text = statements(BUILTIN)["jquast__wcwidth-table-upper-bound"]
    assert protected_spans(text) == [
        "U+3FFFD", "U+E01EF", "wcwidth",
        ">>> from wcwidth import wcwidth\n>>> wcwidth(chr(0x3FFFC)), wcwidth(chr(0x3FFFD))\n(2, 1)\n"
        ">>> wcwidth(chr(0xE01EE)), wcwidth(chr(0xE01EF))\n(0, 1)",
    ]


def test_builtin_six_statement_keeps_the_traceback_inside_its_code_block():
    spans = protected_spans(statements(BUILTIN)["benjaminp__six-ensure-text-errors"])
    assert spans[:3] == ["six.ensure_text()", "errors", "ensure_text(s, encoding='utf-8', errors='strict')"]
    assert spans[3].startswith(">>> import six\n") and spans[3].endswith("unexpected end of data")
    assert spans[4:] == ["'caf\\ufffd'", "'caf'", "errors='ignore'", "b'caf\\xe9'.decode('utf-8', 'replace')",
                         "ensure_binary()", "ensure_str()", "ensure_text()"]


@needs_offline
def test_offline_flask_routes_statement_keeps_names_hosts_and_both_listings():
    spans = protected_spans(statements(OFFLINE)["pallets__flask-5063"])
    assert spans[:8] == ["SERVER_NAME", "test.local", "test.test.local", "admin.test.local",
                         "app.register_blueprint", "admin_blueprint", "url_prefix", "test_subdomain_blueprint"]
    assert [span.split("\n")[2].split()[0] for span in spans[8:]] == ["Endpoint", "Domain"]
    assert len(spans) == 10  # "method(s)", bold prose and sub-domains stay prose


@needs_offline
def test_offline_flask_from_file_statement_keeps_calls_and_the_error_block():
    spans = protected_spans(statements(OFFLINE)["pallets__flask-4992"])
    assert spans[:6] == ["flask.Config.from_file", "tomllib", "flask.Config.from_file()",
                         'app.config.from_file("config.toml", tomllib.load)', "tomllib.load()",
                         "TypeError: File must be opened in binary mode, e.g. use `open('foo.toml', 'rb')`"]
    assert spans[-1] == 'app.config.from_file("config.toml", tomllib.load, mode="b")'


@needs_offline
def test_offline_xarray_statement_keeps_code_facts_and_leaves_markdown_prose():
    spans = protected_spans(statements(OFFLINE)["pydata__xarray-7393"])
    for kept in ("i4", "i8", "MultiIndex", "LC_ALL", "nc_time_axis", "x86_64", "warnings.warn",
                 "https://mybinder.org/v2/gh/pydata/xarray/main?urlpath=lab/tree/doc/examples/blank_template.ipynb",
                 "/Users/icarroll/Library/Caches/pypoetry/virtualenvs/dotfiles-S-yQfRXO-py3.10/lib/python3.10/"
                 "site-packages/_distutils_hack/__init__.py"):
        assert kept in spans
    for prose in ("_No", "response_", "No response", "/details", "details", "What", "happened", "Minimal",
                  "example", "GitHub Issues", "python", "int32"):
        assert prose not in spans


def test_prose_yields_no_spans():
    prose = ("I.e. the result is wrong, e.g. for negative numbers; it's slow and/or wrong (see the docs). "
             "The method(s) we call don't help. This is the \"right\" way, isn't it? Version 3.11 fails too. "
             "We've tried it 3 times... IDs and URLs are fine, _really fine_.")
    assert protected_spans(prose) == []


def test_traceback_lines_outside_code_blocks_are_kept_whole():
    text = ("It crashes:\n\nTraceback (most recent call last):\n  File \"/srv/app.py\", line 3, in <module>\n"
            "    main()\n  File \"/srv/app.py\", line 9, in main\nKeyError: 'user'\n")
    assert protected_spans(text) == ["Traceback (most recent call last):",
                                     'File "/srv/app.py", line 3, in <module>\n    main()',
                                     'File "/srv/app.py", line 9, in main', "KeyError: 'user'"]


def test_spans_are_deduplicated_in_order_of_first_appearance():
    assert protected_spans("Call `foo_bar` then foo_bar() and `foo_bar` in pkg/a.py and pkg/a.py.") == [
        "foo_bar", "pkg/a.py"]


def test_missing_spans_lists_what_the_candidate_lost():
    assert missing_spans(HUMANIZE, HUMANIZE_PARAPHRASE) == []
    lost = HUMANIZE_PARAPHRASE.replace("`'Valid ids'`", "the same for the other").replace("`titleize()`", "titleize")
    assert missing_spans(HUMANIZE, lost) == ["'Valid ids'", "titleize()"]


def test_code_blocks_compare_line_normalised_but_keep_indentation():
    original = "Run this:\n\n```\nif x:\n    y()\n```\n"
    assert missing_spans(original, "Please run:\r\n```\r\nif x:   \r\n    y()\r\n```") == []
    assert missing_spans(original, "Please run:\n```\nif x:\n  y()\n```") == ["if x:\n    y()"]


# --- the loop ----------------------------------------------------------------------------------


def test_a_faithful_paraphrase_is_accepted_on_the_first_attempt():
    script = Script(HUMANIZE_PARAPHRASE, ALL_YES)
    result = reconstruct_statement(HUMANIZE, script, attempts=3, seed=0, prompts=PROBE_PROMPTS, max_tokens=300)
    assert result == StatementResult(text=HUMANIZE_PARAPHRASE, source="paraphrase", attempts=1, history=({
        "attempt": 1, "prompt": "paraphrase", "request_seed": 1, "candidate": HUMANIZE_PARAPHRASE, "missing": [],
        "verdicts": {"BUG": "YES", "REQUIREMENTS": "YES", "SUCCESS": "YES"},
        "reason": "same bug, same expectations.", "error": None, "rejected": None,
    },))
    assert [(r["seed"], r["max_tokens"], r["grammar"]) for r in script.requests] == [
        (1, 300, None), (1, VERIFY_MAX_TOKENS, VERIFIER_GRAMMAR)]
    assert script.requests[0]["messages"] == [{"role": "system", "content": "SYSTEM"},
                                              {"role": "user", "content": f"PARAPHRASE {HUMANIZE.strip()}"}]
    assert script.users()[1] == f"VERIFY {HUMANIZE_PARAPHRASE}"


def test_a_candidate_missing_spans_is_refined_without_asking_the_verifier():
    lossy = HUMANIZE_PARAPHRASE.replace("`'Valid ids'`", "the same for the other")
    script = Script("Here is the rewritten statement:\n" + lossy, HUMANIZE_PARAPHRASE, ALL_YES)
    result = reconstruct_statement(HUMANIZE, script, attempts=3, prompts=PROBE_PROMPTS)
    assert (result.source, result.attempts, result.text) == ("paraphrase", 2, HUMANIZE_PARAPHRASE)
    first = result.history[0]
    assert (first["candidate"], first["missing"], first["verdicts"], first["rejected"]) == (
        lossy, ["'Valid ids'"], {}, "missing_spans")
    assert len(script.requests) == 3  # paraphrase, refine, verify: no verdict on the lossy one
    assert script.users()[1] == (f"REFINE candidate={lossy} | missing='Valid ids' | verdicts=[] | reason= | "
                                 "unchanged=False")
    assert [r["seed"] for r in script.requests] == [1, 2, 2]


def test_verifier_saying_no_every_time_leaves_the_rule_restatement_marked_disputed():
    no = "BUG: YES\nREQUIREMENTS: NO\nSUCCESS: YES\nREASON: the table headers use case is gone."
    script = Script(HUMANIZE_PARAPHRASE, no, HUMANIZE_PARAPHRASE, no, HUMANIZE_PARAPHRASE, no, no)
    result = reconstruct_statement(HUMANIZE, script, attempts=3, prompts=PROBE_PROMPTS)
    rule = rule_paraphrase(HUMANIZE, 0)
    assert (result.source, result.text, result.attempts, len(result.history)) == ("rule", rule, 3, 4)
    assert [entry["prompt"] for entry in result.history] == ["paraphrase", "refine", "refine", "rule"]
    assert [entry["rejected"] for entry in result.history] == ["verifier", "verifier", "verifier", None]
    assert (result.history[3]["verdicts"]["REQUIREMENTS"], result.history[3]["disputed"]) == ("NO", True)
    assert script.users()[6] == f"VERIFY {rule}"  # the verifier judged the rule one
    assert result.history[2]["verdicts"] == {"BUG": "YES", "REQUIREMENTS": "NO", "SUCCESS": "YES"}
    assert script.users()[2].endswith(
        "| verdicts=[('BUG', 'YES'), ('REQUIREMENTS', 'NO'), ('SUCCESS', 'YES')] | "
        "reason=the table headers use case is gone. | unchanged=False")


def test_a_failing_model_call_is_recorded_and_the_rule_restatement_stands_unjudged():
    # (prepare_statement refuses to cache this: every paraphrase call failed, the server is down.)
    script = Script(ConnectionError("server at http://127.0.0.1:9/v1 refused"), TimeoutError("no answer in 120 s"),
                    ConnectionError("refused again"))
    result = reconstruct_statement(HUMANIZE, script, attempts=2, seed=3, prompts=PROBE_PROMPTS)
    rule = rule_paraphrase(HUMANIZE, 3)
    assert (result.source, result.text, result.attempts) == ("rule", rule, 2)
    assert [(e["prompt"], e["request_seed"], e["candidate"], e["error"], e["rejected"]) for e in result.history] == [
        ("paraphrase", 3001, None, "ConnectionError: server at http://127.0.0.1:9/v1 refused", "error"),
        ("paraphrase", 3002, None, "TimeoutError: no answer in 120 s", "error"),
        ("rule", 3003, rule, "ConnectionError: refused again", None),
    ]


def test_a_failing_verifier_call_fails_the_attempt():
    script = Script(HUMANIZE_PARAPHRASE, RuntimeError("verifier down"), RuntimeError("verifier down"))
    result = reconstruct_statement(HUMANIZE, script, attempts=1, prompts=PROBE_PROMPTS)
    assert (result.source, result.history[0]["rejected"]) == ("rule", "error")
    assert (result.history[0]["candidate"], result.history[0]["error"]) == (HUMANIZE_PARAPHRASE,
                                                                            "RuntimeError: verifier down")


def test_empty_and_unchanged_candidates_are_rejected_without_the_verifier():
    script = Script("Sure, here is the rewritten issue:\n", "  " + HUMANIZE + "\n\n", HUMANIZE_PARAPHRASE, ALL_YES)
    result = reconstruct_statement(HUMANIZE, script, attempts=3, prompts=PROBE_PROMPTS)
    assert [entry["rejected"] for entry in result.history] == ["empty", "unchanged", None]
    assert [entry["prompt"] for entry in result.history] == ["paraphrase", "paraphrase", "refine"]
    assert script.users()[2].endswith("unchanged=True")


def test_an_unparsable_verdict_counts_as_no():
    script = Script(HUMANIZE_PARAPHRASE, "Looks good to me!", "Looks good to me!")
    result = reconstruct_statement(HUMANIZE, script, attempts=1, prompts=PROBE_PROMPTS)
    assert result.history[0]["verdicts"] == {"BUG": None, "REQUIREMENTS": None, "SUCCESS": None}
    assert result.history[0]["rejected"] == "verifier"
    # the rule restatement is rejected only by a NO: an unparsable verdict on it says nothing
    assert (result.source, result.history[1]["rejected"]) == ("rule", None)


def test_seeds_change_the_requests_and_equal_inputs_repeat_them():
    def requests(seed):
        script = Script(HUMANIZE_PARAPHRASE, "BUG: NO\nREQUIREMENTS: NO\nSUCCESS: NO\nREASON: x",
                        HUMANIZE_PARAPHRASE, ALL_YES)
        reconstruct_statement(HUMANIZE, script, attempts=2, seed=seed, prompts=PROBE_PROMPTS)
        return script.requests

    assert [r["seed"] for r in requests(0)] == [1, 1, 2, 2]
    assert [r["seed"] for r in requests(7)] == [7001, 7001, 7002, 7002]
    assert requests(7) == requests(7)


def test_fewer_than_one_attempt_is_refused():
    with pytest.raises(ValueError, match="attempts must be between 1 and 999, got 0"):
        reconstruct_statement(HUMANIZE, Script(), attempts=0, prompts=PROBE_PROMPTS)


def test_result_survives_a_json_round_trip():
    script = Script(HUMANIZE_PARAPHRASE.replace("`titleize()`", "titleize"), HUMANIZE_PARAPHRASE, ALL_YES)
    result = reconstruct_statement(HUMANIZE, script, attempts=2, seed=5, prompts=PROBE_PROMPTS)
    assert StatementResult.from_json(result.to_json()) == result
    with pytest.raises(ValueError, match="not a StatementResult"):
        StatementResult.from_json('{"text": "x", "source": "canonical"}')


# --- answer parsing, budget and prompts ------------------------------------------------------------


def test_clean_candidate_drops_an_announcement_line_and_a_wrapping_fence():
    assert clean_candidate("Here is the rewritten statement:\n\nThe bug.\n") == "The bug."
    assert clean_candidate("**Rewritten report:**\n```markdown\nThe bug.\n```") == "The bug."
    kept = "Here is how to reproduce it:\n```\nx()\n```"
    assert clean_candidate(kept) == kept  # the first line is content: it does not name the rewrite
    assert clean_candidate("```\nx()\n```\nThe bug.\n```\ny()\n```") == "```\nx()\n```\nThe bug.\n```\ny()\n```"


def test_parse_verdict_reads_the_grammar_format_and_lenient_variants():
    assert parse_verdict(ALL_YES) == ({"BUG": "YES", "REQUIREMENTS": "YES", "SUCCESS": "YES"},
                                      "same bug, same expectations.")
    assert parse_verdict("- **Bug**: yes\nSUCCESS = no\nreason: lost the example") == (
        {"BUG": "YES", "REQUIREMENTS": None, "SUCCESS": "NO"}, "lost the example")


def test_paraphrase_budget_is_one_and_a_half_statement_lengths_capped():
    assert paraphrase_budget("x" * 600) == 332
    assert paraphrase_budget("x" * 10_000, cap=512) == 512


def test_the_shipped_prompts_load_and_render_every_variable():
    prompts = load_l1_prompts(ROOT / "raydist" / "conf" / "prompts")
    paraphrase = prompts.messages("paraphrase", statement=HUMANIZE)[1]["content"]
    assert HUMANIZE in paraphrase
    for rule in ("different words and with a different structure", "verbatim", "every requirement",
                 "Add no new information", "Output only the rewritten report"):
        assert rule in paraphrase
    refine = prompts.messages("refine", statement=HUMANIZE, candidate="C", missing=["'Valid ids'", "a\nb"],
                              verdicts={"BUG": "YES", "REQUIREMENTS": "NO", "SUCCESS": None}, reason="R",
                              unchanged=False)[1]["content"]
    assert "  'Valid ids'\n```\na\nb\n```\n" in refine
    assert "- Some requirements are missing or weakened.\n- Some success criteria" in refine
    assert "bug description is not" not in refine and "Reviewer's note: R" in refine
    verify = prompts.messages("verify", statement=HUMANIZE, candidate="C")[1]["content"]
    assert verify.endswith("BUG: YES or NO\nREQUIREMENTS: YES or NO\nSUCCESS: YES or NO\n"
                           "REASON: one sentence saying what differs, or that nothing does")


def test_missing_template_names_the_file_and_the_folder(tmp_path):
    (tmp_path / "l1_paraphrase.j2").write_text("{{ statement }}")
    with pytest.raises(FileNotFoundError, match=f"l1_refine.j2 is missing from {tmp_path}"):
        load_l1_prompts(tmp_path)


# --- a small model's copies are rejected before any verifier is asked ----------------------

REAL_PROMPTS = load_l1_prompts(ROOT / "raydist" / "conf" / "prompts")


def test_an_answer_that_copies_the_refine_request_is_rejected_whatever_the_verifier_says():
    """What Gemma 3 270M answered to the refine prompt for a real-fix statement: the request
    itself, statement included; its verifier said YES three times."""
    messages = REAL_PROMPTS.messages("refine", statement=HUMANIZE, candidate="Short.", missing=["`_id`"],
                                     verdicts={}, reason="", unchanged=False)
    copy = messages[-1]["content"]
    assert form_problem(HUMANIZE, copy, messages, "Short.").startswith("repeats the request instead of restating")
    script = Script(copy, ALL_YES)
    result = reconstruct_statement(HUMANIZE, script, attempts=1, prompts=REAL_PROMPTS)
    assert (result.source, result.history[0]["rejected"]) == ("rule", "form")
    assert len(script.requests) == 2  # the verifier was asked of the rule restatement only


def test_the_statement_itself_or_a_near_copy_is_not_a_paraphrase():
    messages = REAL_PROMPTS.messages("paraphrase", statement=HUMANIZE)
    assert form_problem(HUMANIZE, "Note:\n" + HUMANIZE, messages) == "contains the original statement verbatim"
    near = HUMANIZE.replace("mangles", "breaks")
    assert form_problem(HUMANIZE, near, messages).startswith("too close to the original statement (similarity 0.9")
    assert form_problem(HUMANIZE, HUMANIZE_PARAPHRASE, messages) is None
    assert "is outside 0.4-2.5 times" in form_problem(HUMANIZE, HUMANIZE_PARAPHRASE * 4, messages)
