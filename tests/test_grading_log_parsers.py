"""The log channel parses a test log with the parser swebench uses for the instance: the row's
``log_parser`` name, else its repository's (django's runner, sympy's), else pytest's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raydist.grading.rules import UnknownLogParser, log_parser_for, parse_test_log
from raydist.tasks.records import instance_from_record

DJANGO_LOG = """\
test_get_prep_value (model_fields.test_decimalfield.DecimalFieldTests) ... ok
test_to_python (model_fields.test_decimalfield.DecimalFieldTests) ... FAIL
test_invalid_value (model_fields.test_decimalfield.DecimalFieldTests) ... ERROR
test_needs_db (model_fields.test_decimalfield.DecimalFieldTests) ... skipped 'no database'
"""

SYMPY_LOG = """\
============================= test process starts ==============================
sympy/core/tests/test_numbers.py[3]
test_Integer_new ok
test_Rational_new F
test_Float E
________________________________________________________________________________
"""


def _instance(repo: str, **extra):
    return SimpleNamespace(instance_id=f"{repo.replace('/', '__')}-1", repo=repo, version="1.0", extra=extra)


def test_a_django_instance_is_parsed_by_djangos_runner_parser():
    statuses = parse_test_log(DJANGO_LOG, _instance("django/django"))
    assert statuses == {
        "test_get_prep_value (model_fields.test_decimalfield.DecimalFieldTests)": "PASSED",
        "test_to_python (model_fields.test_decimalfield.DecimalFieldTests)": "FAILED",
        "test_invalid_value (model_fields.test_decimalfield.DecimalFieldTests)": "ERROR",
        "test_needs_db (model_fields.test_decimalfield.DecimalFieldTests)": "SKIPPED",
    }
    # pytest's parser, which raydist used for every repository, finds none of them
    assert parse_test_log(DJANGO_LOG) == {}


def test_a_sympy_instance_is_parsed_by_sympys_parser():
    assert parse_test_log(SYMPY_LOG, _instance("sympy/sympy")) == {
        "test_Integer_new": "PASSED", "test_Rational_new": "FAILED", "test_Float": "ERROR"}
    assert parse_test_log(SYMPY_LOG, _instance("pallets/flask")) == {}


def test_the_rows_log_parser_wins_over_the_repository_and_an_unknown_name_is_refused():
    row = {"instance_id": "acme__widgets-7", "repo": "django/django", "base_commit": "0" * 40,
           "patch": "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
           "test_patch": "", "problem_statement": "x", "FAIL_TO_PASS": ["test_Float"], "PASS_TO_PASS": [],
           "log_parser": "parse_log_sympy"}
    instance = instance_from_record(row, "row")
    assert log_parser_for(instance)[0] == "parse_log_sympy"
    assert parse_test_log(SYMPY_LOG, instance)["test_Float"] == "ERROR"
    assert log_parser_for(_instance("django/django"))[0] == "parse_log_django"
    assert log_parser_for(_instance("acme/unknown"))[0] == "parse_log_pytest"
    assert log_parser_for(None)[0] == "parse_log_pytest"
    bad = instance_from_record({**row, "log_parser": "parse_log_nothing"}, "row")
    with pytest.raises(UnknownLogParser, match=r"^instance 'acme__widgets-7': log_parser 'parse_log_nothing' is not"):
        parse_test_log(SYMPY_LOG, bad)
