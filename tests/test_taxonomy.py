"""The RQ2 action taxonomy on commands in the style of SWE-bench agent trajectories."""

from __future__ import annotations

import pytest

from raydist.agents.taxonomy import PRIORITY, classify, classify_parts, count_categories

REPRO = """cat <<'EOF' > reproduce.py
from sympy import symbols
x = symbols('x')
print(x + 1)
EOF"""

REPRO_THEN_RUN = """cat > /testbed/repro.py << "EOF"
import astropy
print(astropy.__version__)
EOF
python /testbed/repro.py"""

PY_HEREDOC_EDIT = """python - <<'PY'
from pathlib import Path
p = Path('src/m.py')
p.write_text(p.read_text().replace('a', 'b'))
PY"""

PY_HEREDOC_PROBE = """python3 <<EOF
import django
django.setup()
print(django.VERSION)
EOF"""

TABLE = [
    # navigate
    ("ls", "navigate"),
    ("ls -la /testbed", "navigate"),
    ("cd /testbed && ls -R src | head -50", "navigate"),
    ("tree -L 2 /testbed/astropy", "navigate"),
    ("pwd", "navigate"),
    ("find /testbed -type d -maxdepth 2", "navigate"),
    ("git ls-files | head -100", "navigate"),
    # search
    ('grep -rn "def foo" --include=*.py src/ | head -20', "search"),
    ("cd /testbed && grep -rn 'class Quantity' astropy/units/", "search"),
    ("find /testbed -name '*.py' -path '*units*' | head", "search"),
    ('find . -name "*.py" | xargs grep -l "separability_matrix"', "search"),
    ("rg -n 'def _cstack' astropy/", "search"),
    ("git grep -n 'HttpResponse' -- django/http", "search"),
    ("find . -name '*.py' -exec grep -l 'autodoc_typehints' {} \\;", "search"),
    ("ag 'def test_' tests/", "search"),
    # read
    ("cat django/db/models/fields/__init__.py", "read"),
    ("nl -ba sympy/core/basic.py | sed -n '10,40p'", "read"),
    ("sed -n '120,180p' /testbed/src/_pytest/python.py", "read"),
    ("head -n 60 setup.py", "read"),
    ("cd /testbed && tail -30 CHANGES.rst", "read"),
    ("awk 'NR>=100 && NR<=140 {print NR\": \"$0}' lib/matplotlib/axes/_base.py", "read"),
    ("python -c \"print(open('setup.cfg').read())\"", "read"),
    ("cat -n sklearn/utils/validation.py | grep -n 'def check_array' ", "read"),
    # probe
    ('python -c "import sympy; print(sympy.sqrt(8))"', "probe"),
    ("cd /testbed && python reproduce.py", "probe"),
    ("python3 reproduce_issue.py 2>&1 | tail -20", "probe"),
    ("pip show django", "probe"),
    ("pip list | grep -i numpy", "probe"),
    ("git log --oneline -5", "probe"),
    ("git diff", "probe"),
    ("cd /testbed && git status", "probe"),
    ("timeout 60 python repro.py", "probe"),
    (PY_HEREDOC_PROBE, "probe"),
    (REPRO_THEN_RUN, "edit"),
    # edit
    ("sed -i 's/a/b/' f.py && python -c \"import m; print(m.f(1))\"", "edit"),
    (REPRO, "edit"),
    ("echo 'print(1)' > /tmp/t.py", "edit"),
    ("printf 'x\\n' >> notes.txt", "edit"),
    ("cd /testbed && git apply fix.patch", "edit"),
    ("patch -p1 < fix.diff", "edit"),
    ("rm -f reproduce.py", "edit"),
    ("mkdir -p tests/data && touch tests/data/__init__.py", "edit"),
    ("cp astropy/io/fits/card.py /tmp/card_backup.py", "edit"),
    ("echo hi | tee out.log", "edit"),
    ("python -c \"open('a.txt','w').write('x')\"", "edit"),
    ("perl -pi -e 's/foo/bar/g' src/m.py", "edit"),
    (PY_HEREDOC_EDIT, "edit"),
    ("git checkout -- sympy/core/expr.py", "edit"),
    ("find . -name '*.pyc' -delete", "edit"),
    # test
    ("cd /testbed && python -m pytest tests/test_x.py -x -q 2>&1 | tail -20", "test"),
    ("pytest -xvs tests/test_units.py::test_quantity", "test"),
    ("cd /testbed && ./tests/runtests.py migrations --verbosity 2", "test"),
    ("python tests/runtests.py admin_views.tests", "test"),
    ("PYTHONPATH=. python -m unittest tests.test_core -v", "test"),
    ("timeout 300 tox -e py311", "test"),
    ("make test", "test"),
    ("python test_fix.py", "test"),
    ("DJANGO_SETTINGS_MODULE=settings python manage.py test auth_tests", "test"),
    # submit and other
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "submit"),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "submit"),
    ("echo done", "other"),
    ("", "other"),
]


@pytest.mark.parametrize(("command", "expected"), TABLE, ids=[f"{i:02d}-{e}" for i, (_, e) in enumerate(TABLE)])
def test_command_gets_its_category(command, expected):
    assert classify(command) == expected


def test_table_covers_every_category_with_forty_commands():
    assert len(TABLE) >= 40
    assert {e for _, e in TABLE} == set(PRIORITY)


def test_parts_list_every_simple_command_in_order():
    assert classify_parts("cd /testbed && grep -rn foo src | head -5; python -m pytest -q") == [
        "navigate",
        "search",
        "other",
        "test",
    ]


def test_parts_reach_into_subshells_and_substitutions():
    assert classify_parts("(cd src && ls)") == ["navigate", "navigate"]
    assert classify_parts("cat $(find . -name conf.py)") == ["read", "search"]


def test_bash_c_is_classified_by_its_script():
    assert classify("bash -c 'cd /testbed && pytest -q'") == "test"


def test_edit_outranks_test_in_one_step():
    assert classify("sed -i 's/x/y/' a.py && pytest -q") == "edit"


def test_redirect_to_dev_null_is_not_an_edit():
    assert classify("python repro.py > /dev/null 2>&1") == "probe"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('grep -rn "unterminated src/', "search"),
        ("cat 'a.py", "read"),
        ("sed -i 's/a/b f.py && pytest", "edit"),
        ("python -c \"print(1)", "probe"),
        ("cd /x && (ls", "navigate"),
        ("|| ;;", "other"),
    ],
)
def test_malformed_commands_classify_without_raising(command, expected):
    assert classify(command) == expected


def test_count_categories_has_every_category():
    counts = count_categories(["ls", "pytest", "pytest -x", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    assert counts == {
        "submit": 1,
        "edit": 0,
        "test": 2,
        "probe": 0,
        "read": 0,
        "search": 0,
        "navigate": 1,
        "other": 0,
    }
