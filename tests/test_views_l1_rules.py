"""L1 without a capable model: the seeded rule restatement changes the statement's surface,
keeps every protected span verbatim (checked by ``missing_spans``), differs between seeds and
repeats for a seed. Checked on the built-in statements and, where the shared data is present,
on every real-fix and offline SWE-bench statement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raydist.tasks import load_instances
from raydist.views.l1._spans import normalise
from raydist.views.l1.rules import LEAD_INS, rule_paraphrase
from raydist.views.l1.statement import missing_spans, protected_spans

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SETS = {"realfix": SHARED / "tasks" / "realfix.jsonl", "offline": SHARED / "swebench" / "offline.jsonl"}


def _statements(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["instance_id"]: r["problem_statement"] for r in rows}


@pytest.mark.parametrize("instance", load_instances("builtin"), ids=lambda i: i.instance_id)
def test_every_builtin_statement_is_restated_differently_per_seed_keeping_every_span(instance):
    statement = instance.problem_statement
    texts = [rule_paraphrase(statement, seed) for seed in (0, 1, 2)]
    assert all(missing_spans(statement, text) == [] for text in texts)
    assert all(normalise(text).strip() != normalise(statement).strip() for text in texts)
    assert len(set(texts)) == 3  # different seeds, different statements
    assert texts == [rule_paraphrase(statement, seed) for seed in (0, 1, 2)]  # and the same again


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_shared_statement_keeps_its_spans(name):
    if not SETS[name].is_file():
        pytest.skip(f"{SETS[name]} (shared reference data) is absent")
    statements = _statements(SETS[name])
    assert statements
    for instance_id, statement in statements.items():
        for seed in (0, 1):
            text = rule_paraphrase(statement, seed)
            assert missing_spans(statement, text) == [], instance_id
            assert normalise(text).strip() != normalise(statement).strip(), instance_id


TEMPLATE = """Hi all,

### Describe the bug
The parser does not accept `--strict` and, for example, `parse("a_b")` fails.

<!-- A clear and concise description -->

### Steps to reproduce
1. run `tool --strict`
2. see the error:

```
ValueError: bad flag
```

Thanks!
"""


def test_scaffolding_goes_headings_become_lines_and_phrases_change_outside_code_only():
    text = rule_paraphrase(TEMPLATE, 0)
    assert missing_spans(TEMPLATE, text) == []
    assert "Hi all" not in text and "Thanks!" not in text and "<!--" not in text and "###" not in text
    assert "Describe the bug:" in text and "Steps to reproduce:" in text
    assert "for instance, `parse(\"a_b\")`" in text and "doesn't accept `--strict`" in text
    assert "```\nValueError: bad flag\n```" in text  # the code block, whole and unchanged
    # the list's numbers are kept or written 1) 2), as the seed says; its text is not touched
    assert ("1. run `tool --strict`" in text) != ("1) run `tool --strict`" in text)
    assert text.split("\n", 1)[0].startswith(LEAD_INS)


def test_a_phrase_inside_code_or_quotes_is_never_rewritten():
    statement = 'Summary line\n\nThe flag `does not` and the message "does not exist" stay; but this does not.'
    text = rule_paraphrase(statement, 0)
    assert "`does not`" in text and '"does not exist"' in text and "this doesn't." in text
    assert set(protected_spans(statement)) <= {s for s in protected_spans(text)}


def test_an_indented_code_block_is_code_too():
    statement = "Summary line\n\nIt fails:\n\n    if value is not None:\n        run(value)\n\nBut it should not."
    text = rule_paraphrase(statement, 1)
    assert "    if value is not None:\n        run(value)" in text  # "is not" stays inside the code
    assert "However, it should not." in text or "Yet it should not." in text


def test_a_rule_that_would_change_a_protected_span_is_dropped_for_that_statement():
    # A traceback line outside code is a protected span; the lexicon would turn its "does not"
    # into "doesn't". The check sees the lost span and the restatement goes without the lexicon.
    statement = "Summary line\n\nIt fails with\nKeyError: key does not exist\nBut only on Linux."
    assert "KeyError: key does not exist" in protected_spans(statement)
    text = rule_paraphrase(statement, 0)
    assert "KeyError: key does not exist" in text and missing_spans(statement, text) == []
    assert "But only on Linux." in text  # the lexicon ("But" -> ...) was dropped with it
