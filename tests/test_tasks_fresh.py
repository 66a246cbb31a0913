"""Fresh instances, the pure parts: each mutation operator on a tiny source, the keep rule,
the statement check, the release rule, the build's seeded order and its resumable files."""

from __future__ import annotations

import json
import subprocess
from datetime import date

import pytest

from raydist.tasks.fresh.build import sample_order
from raydist.tasks.fresh.keep import Verdict, confirm, keep_or_drop
from raydist.tasks.fresh.mutations import (
    Mutation,
    MutationMismatch,
    apply_mutation,
    enumerate_mutations,
    is_test_file,
    library_files,
    scan_tree,
)
from raydist.tasks.fresh.releases import (
    ReleaseNotFound,
    choose_release,
    parse_spec,
    source_repo,
)
from raydist.tasks.fresh.statement import (
    check_statement,
    copied_share,
    fallback_statement,
    frames_of_tests,
    write_statement,
)
from raydist.tasks.fresh.store import append_line, read_lines
from raydist.views.recover import recover_patch

SOURCE = '''\
def f(a, b):
    if a < b:
        return True
    elif a == b:
        x = g(a, b)
    else:
        return False
    y = a and b
    return s[1:]
'''


def changes(source: str = SOURCE) -> list[tuple[str, int, int, str, str]]:
    return [(m.kind, m.line, m.end_line, m.before, m.after) for m in enumerate_mutations(source, "m.py")]


def test_every_operator_gives_its_exact_candidates_in_line_order():
    assert changes() == [
        ("flip_comparison", 2, 2, "    if a < b:\n", "    if a >= b:\n"),
        ("invert_return", 3, 3, "        return True\n", "        return False\n"),
        ("flip_comparison", 4, 4, "    elif a == b:\n", "    elif a != b:\n"),
        ("drop_branch", 4, 5, "    elif a == b:\n        x = g(a, b)\n", ""),
        ("swap_arguments", 5, 5, "        x = g(a, b)\n", "        x = g(b, a)\n"),
        ("drop_branch", 6, 7, "    else:\n        return False\n", ""),
        ("invert_return", 7, 7, "        return False\n", "        return True\n"),
        ("swap_and_or", 8, 8, "    y = a and b\n", "    y = a or b\n"),
        ("off_by_one", 9, 9, "    return s[1:]\n", "    return s[0:]\n"),
        ("off_by_one", 9, 9, "    return s[1:]\n", "    return s[2:]\n"),
    ]


def test_flip_comparison_covers_identity_and_membership_and_each_link_of_a_chain():
    flips = [after for kind, _, _, _, after in changes("ok = a is None\nin_ = 0 <= x in y\n")
             if kind == "flip_comparison"]
    assert flips == ["ok = a is not None\n", "in_ = 0 <= x not in y\n", "in_ = 0 > x in y\n"]


def test_an_if_without_else_is_dropped_whole_unless_it_is_the_only_statement():
    source = "def f(x):\n    if x:\n        x = 1\n    return x\n\ndef g(x):\n    if x:\n        return 1\n"
    assert [(k, line, end) for k, line, end, _, _ in changes(source) if k == "drop_branch"] == [("drop_branch", 2, 3)]


def test_integers_in_collection_literals_and_keyword_arguments_are_not_swapped():
    source = "TABLE = (1, 2)\nr = h(a, key=b)\n"
    assert changes(source) == []


def test_a_mutation_whose_program_does_not_change_is_not_a_candidate():
    assert changes("x = f(a, a)\n") == []


def test_a_file_libcst_cannot_parse_is_named_not_raised(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "good.py").write_text("def f(a, b):\n    return a < b\n")
    (tmp_path / "pkg" / "py2.py").write_text("print 'hello'\n")
    (tmp_path / "pkg" / "test_good.py").write_text("assert 1 < 2\n")
    candidates, unparsed = scan_tree(tmp_path)
    assert [(m.file, m.after) for m in candidates] == [("pkg/good.py", "    return a >= b\n")]
    assert [u.file for u in unparsed] == ["pkg/py2.py"]
    assert unparsed[0].error.startswith("Syntax Error @ 1:")


def test_test_files_setup_and_docs_are_never_mutated(tmp_path):
    for rel in ("setup.py", "lib.py", "tests/helpers.py", "docs/conf.py", "pkg/conftest.py", "pkg/core_test.py",
                "pkg/core.py", "lib.egg-info/x.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    assert library_files(tmp_path) == ["lib.py", "pkg/core.py"]
    assert is_test_file("test_six.py") and not is_test_file("six.py")


def test_applying_a_mutation_to_another_text_is_refused():
    mutation = enumerate_mutations(SOURCE, "m.py")[0]
    assert apply_mutation(SOURCE, mutation).splitlines()[1] == "    if a >= b:"
    with pytest.raises(MutationMismatch, match="m.py:2-2"):
        apply_mutation(SOURCE.replace("a < b", "a <= b"), mutation)


def test_the_bug_diff_and_its_reverse_apply_with_git(tmp_path):
    mutation = enumerate_mutations(SOURCE, "pkg/m.py")[5]  # the dropped else branch
    buggy = apply_mutation(SOURCE, mutation)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    for diff, expected in ((recover_patch({"pkg/m.py": SOURCE}, {"pkg/m.py": buggy}), buggy),
                           (recover_patch({"pkg/m.py": buggy}, {"pkg/m.py": SOURCE}), SOURCE)):
        subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=diff, text=True, check=True)
        assert (tmp_path / "pkg" / "m.py").read_text() == expected
    assert recover_patch({"m.py": SOURCE}, {"m.py": SOURCE}) == ""


def test_a_last_line_without_newline_is_marked_as_git_marks_it(tmp_path):
    (tmp_path / "m.py").write_text("x = 1 < 2")
    diff = recover_patch({"m.py": "x = 1 < 2"}, {"m.py": "x = 1 >= 2"})
    assert "\\ No newline at end of file\n" in diff
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=diff, text=True, check=True)
    assert (tmp_path / "m.py").read_text() == "x = 1 >= 2"


BASE = frozenset({"t::a", "t::b", "t::c", "t::d"})


def test_keep_rule_keeps_a_bug_that_fails_some_tests_and_leaves_the_others_passing():
    bug = {"t::a": "FAILED", "t::b": "PASSED", "t::c": "PASSED", "t::d": "PASSED", "t::new": "FAILED"}
    assert keep_or_drop(BASE, bug) == Verdict(True, None, ("t::a",), ("t::b", "t::c", "t::d"))


def test_keep_rule_rejects_a_bug_that_breaks_no_test():
    assert keep_or_drop(BASE, dict.fromkeys(BASE, "PASSED")) == Verdict(False, "no_test_fails")


def test_keep_rule_rejects_a_bug_that_skips_a_test_it_does_not_fail():
    bug = {"t::a": "FAILED", "t::b": "SKIPPED", "t::c": "PASSED", "t::d": "PASSED"}
    assert keep_or_drop(BASE, bug) == Verdict(False, "non_target_changed", ("t::a",))


def test_keep_rule_rejects_a_bug_that_stops_tests_from_running():
    assert keep_or_drop(BASE, {"t::a": "FAILED", "t::b": "PASSED"}).reason == "breaks_collection"
    assert keep_or_drop(BASE, {}).reason == "breaks_collection"


def test_keep_rule_rejects_too_many_failures_and_a_timeout():
    bug = {"t::a": "FAILED", "t::b": "ERROR", "t::c": "FAILED", "t::d": "PASSED"}
    assert keep_or_drop(BASE, bug, max_fail_fraction=0.5).reason == "too_many_fail"
    assert keep_or_drop(BASE, bug, max_fail_fraction=0.75).kept
    assert keep_or_drop(BASE, dict.fromkeys(BASE, "FAILED"), timed_out=True).reason == "timeout"


def test_a_second_run_with_other_failures_makes_the_bug_unstable():
    first = keep_or_drop(BASE, {"t::a": "FAILED", "t::b": "PASSED", "t::c": "PASSED", "t::d": "PASSED"})
    again = keep_or_drop(BASE, {"t::a": "FAILED", "t::b": "FAILED", "t::c": "PASSED", "t::d": "PASSED"})
    assert confirm(first, first) == first
    assert confirm(first, again) == Verdict(False, "unstable", ("t::a",))


MUTATION = Mutation("flip_comparison", "lib.py", 2, 2, "    if x < lo:\n", "    if x >= lo:\n")
PATCH = recover_patch({"lib.py": "def c(x, lo):\n    if x < lo:\n        return lo\n"},
                      {"lib.py": "def c(x, lo):\n    if x >= lo:\n        return lo\n"})
GOOD = "clamp(-1, 0, 5) returns -1 instead of the lower bound 0, so values below the range are not clamped at all."


def test_statement_check_accepts_a_report_of_the_behaviour():
    assert check_statement(GOOD, MUTATION, PATCH) is None


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("It fails.", "empty"),
    (GOOD + "\nThe fix: change `if x  >=  lo:` back.", "names_fix"),
    (GOOD + "\nThe code reads `if x < lo:` which looks right.", "names_fix"),
    (GOOD + "\n" + PATCH, "diff"),
    (GOOD + "\n-    if x >= lo:\n+    if x < lo:\n", "diff"),
    ("1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.", "garbage"),
    ("\n".join(["The clamp is wrong."] * 8), "garbage"),
])
def test_statement_check_rejects_what_leaks_the_fix_or_is_not_prose(text, reason):
    assert check_statement(text, MUTATION, PATCH) == reason


def test_without_a_model_the_statement_is_the_recorded_test_output_fallback():
    excerpt = "test_clamp_low\n    def test_clamp_low():\n>       assert clamp(-1, 0, 5) == 0\nE       assert -1 == 0\n"
    written = write_statement(None, model=None, template="{{ failures }}", library="lib", version="1.0",
                              failing=["test_lib.py::test_clamp_low"], excerpt=excerpt, mutation=MUTATION,
                              patch=PATCH, seed=0)
    assert (written.source, written.model, written.attempt, written.rejected) == ("fallback_test_output", None, 0, ())
    assert written.text == fallback_statement("lib", "1.0", ["test_lib.py::test_clamp_low"], excerpt)
    assert "test_lib.py::test_clamp_low" in written.text and "assert -1 == 0" in written.text
    assert check_statement(written.text, MUTATION, PATCH) is None


def payload(*files):
    releases = {}
    for version, day, yanked in files:
        releases.setdefault(version, []).append({
            "packagetype": "sdist", "yanked": yanked, "filename": f"lib-{version}.tar.gz",
            "digests": {"sha256": version.replace(".", "") * 8}, "upload_time_iso_8601": f"{day}T10:00:00.000Z"})
    return {"info": {"name": "lib", "project_urls": {"Source": "https://github.com/owner/lib"}}, "releases": releases}


def test_the_newest_final_unyanked_sdist_uploaded_after_the_date_is_chosen():
    data = payload(("1.0", "2023-01-01", False), ("1.2", "2024-06-01", False), ("1.3", "2024-07-01", True),
                   ("2.0rc1", "2024-08-01", False), ("1.10", "2024-05-01", False))
    release = choose_release(data, released_after=date(2024, 1, 1))
    assert (release.version, release.upload_time, release.repo) == ("1.10", "2024-05-01T10:00:00.000Z", "owner/lib")
    assert choose_release(data, released_after=None, version="1.0").version == "1.0"
    with pytest.raises(ReleaseNotFound, match="on or after 2024-01-01"):
        choose_release(data, released_after=date(2024, 1, 1), version="1.0")
    with pytest.raises(ReleaseNotFound, match="newest sdist upload: 2024-07-01"):
        choose_release(payload(("1.3", "2024-07-01", False)), released_after=date(2025, 1, 1))


def test_library_specs_and_source_repositories():
    assert parse_spec("six==1.17.0") == ("six", "1.17.0") and parse_spec(" six ") == ("six", None)
    with pytest.raises(ValueError):
        parse_spec("six>=1")
    assert source_repo({"name": "x", "home_page": "https://github.com/a/b.git"}) == "a/b"
    assert source_repo({"name": "x", "project_urls": {"Docs": "https://x.readthedocs.io"}}) == "pypi/x"


def test_the_order_is_seeded_and_takes_the_kinds_in_turn():
    candidates = enumerate_mutations(SOURCE, "m.py")
    order = sample_order(candidates, seed=0)
    assert sorted(order, key=candidates.index) == candidates
    assert [m.kind for m in order[:6]] == ["flip_comparison", "drop_branch", "off_by_one", "swap_arguments",
                                           "swap_and_or", "invert_return"]
    assert sample_order(candidates, seed=0) == order
    assert {tuple(sample_order(candidates, seed=s)) for s in range(5)} != {tuple(order)}


def test_a_line_cut_short_by_a_killed_writer_is_dropped_and_appending_goes_on(tmp_path):
    path = tmp_path / "out.jsonl"
    append_line(path, {"a": 1})
    with open(path, "a") as fh:
        fh.write('{"b": 2, "c"')
    assert read_lines(path) == [{"a": 1}]
    append_line(path, {"d": 4})
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"a": 1}, {"d": 4}]


def test_library_frames_of_a_traceback_keep_only_their_error_lines():
    block = ["    def test_low():", ">       assert clamp(-1, 0, 5) == 0", "", "test_lib.py:5: ",
             "    def clamp(x, lo, hi):", ">       if x >= lo:", "E       TypeError: boom", "",
             "pkg/lib.py:7: TypeError"]
    assert frames_of_tests(block) == ["    def test_low():", ">       assert clamp(-1, 0, 5) == 0", "",
                                      "test_lib.py:5: ", "E       TypeError: boom"]


def test_a_statement_that_parrots_the_prompt_is_rejected():
    prompt = ("Here is the output of failing tests of the Python library lib 1.0:\n\ntest_clamp_low\n"
              "E       assert -1 == 0\n\nIn 3 to 5 sentences, describe the bug as a user of lib would report it.")
    parrot = "Here is the output of failing tests of the python library lib 1.0: test_clamp_low E assert -1 == 0"
    assert check_statement(parrot, MUTATION, PATCH, prompt) == "echoes_prompt"
    assert copied_share(parrot, prompt) == 1.0
    assert check_statement(GOOD + " The test reports assert -1 == 0.", MUTATION, PATCH, prompt) is None


def test_tasks_build_runs_in_process_and_its_help_names_every_rejection_reason(capsys):
    from raydist.cli import command
    from raydist.tasks.fresh.keep import REASONS

    exec_argv, args = command(["tasks", "build", "--libraries", "six==1.17.0", "--per-library", "3"])
    assert exec_argv is None
    assert (args.libraries, args.per_library, args.model, args.statement_attempts) == (
        "six==1.17.0", 3, "gemma3-270m", 2)
    with pytest.raises(SystemExit) as done:
        command(["tasks", "build", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert [reason for reason in REASONS if f"  {reason} " not in out] == []


def test_a_library_pypi_does_not_have_is_one_error_line_and_exit_2_not_a_traceback(tmp_path):
    import sys

    out = tmp_path / "fresh" / "instances.jsonl"
    done = subprocess.run([sys.executable, "-m", "raydist.cli", "tasks", "build", "--libraries", "nosuchlib-zz-123",
                           "--released-after", "2020-01-01", "--per-library", "1", "--out", str(out), "--model", "none",
                           "--no-container-check"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "raydist tasks build: error: nosuchlib-zz-123: PyPI has no project 'nosuchlib-zz-123'")
    assert out.with_name("instances.summary.json").read_text().strip() == "[]"
