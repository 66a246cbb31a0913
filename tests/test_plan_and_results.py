"""Plan keys, resume bookkeeping and the summary table: pure logic, no Ray or Docker."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.cluster.unit_key import RunUnit, build_plan, stable_hash, unit_config_hash
from raydist.results import ResultStore, action_mix, action_mix_markdown, error_counts, redact, summarise, to_markdown
from raydist.views import implemented_levels, level_specs


@dataclass
class FakeInstance:
    instance_id: str
    body: str

    def content_hash(self) -> str:
        return stable_hash({"id": self.instance_id, "body": self.body})


def _units(agent="miniswe", model="gemma3-270m", config_hash="c0"):
    instances = [FakeInstance("a__x-1", "p1"), FakeInstance("b__y-2", "p2")]
    return build_plan(instances, model=model, agent=agent, levels=["L0", "L3"], seeds=[0, 1, 2],
                      config_hash=config_hash)


def _row(unit: RunUnit, **extra) -> dict:
    row = {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
           "level": unit.level, "seed": unit.seed, "attempt": unit.attempt, "config_hash": unit.config_hash,
           "resolved": False, "outcome": "resolved" if extra.get("resolved") else "unresolved"}
    row.update(extra)
    return row


def test_plan_is_instances_times_levels_times_seeds_in_stable_order():
    units = _units()
    assert len(units) == 12
    assert [(u.instance_id, u.level, u.seed) for u in units[:4]] == [
        ("a__x-1", "L0", 0), ("a__x-1", "L0", 1), ("a__x-1", "L0", 2), ("a__x-1", "L3", 0)]
    assert len({u.key for u in units}) == 12


def test_keys_are_stable_across_builds_and_change_with_settings_that_matter():
    assert [u.key for u in _units()] == [u.key for u in _units()]
    assert {u.key for u in _units(config_hash="c1")}.isdisjoint(u.key for u in _units())
    assert {u.key for u in _units(model="openai/gpt-4o-mini")}.isdisjoint(u.key for u in _units())


def test_scripted_agents_ignore_the_model():
    oracle_a = _units(agent="oracle", model="gemma3-270m")
    oracle_b = _units(agent="oracle", model="openai/gpt-4o-mini")
    assert [u.key for u in oracle_a] == [u.key for u in oracle_b]
    assert {u.model for u in oracle_a} == {"-"}


def test_config_hash_covers_agent_settings_and_view_options():
    base = unit_config_hash("miniswe", {"step_limit": 8}, {"l3_files": "patch"})
    assert base == unit_config_hash("miniswe", {"step_limit": 8}, {"l3_files": "patch"})
    assert base != unit_config_hash("miniswe", {"step_limit": 9}, {"l3_files": "patch"})
    assert base != unit_config_hash("miniswe", {"step_limit": 8}, {"l3_files": "all"})


def test_config_hash_leaves_out_the_view_model_timing_options():
    base = unit_config_hash("miniswe", {"step_limit": 8}, {"l3_files": "patch"})
    timed = {"l3_files": "patch", "request_timeout_base_s": 30, "request_min_tokens_per_s": 1.5}
    assert unit_config_hash("miniswe", {"step_limit": 8}, timed) == base


def test_level_specs_resolve_implemented_and_reject_unknown_names():
    assert level_specs("implemented") == implemented_levels()
    assert level_specs(["L3", "L0+L3"]) == ["L3", "L0+L3"]
    with pytest.raises(ValueError, match=r"unknown level 'L9' in 'L0\+L9'.*L0, L1, L2, L3"):
        level_specs(["L0+L9"])


def test_rows_are_durable_and_a_rewrite_never_duplicates(tmp_path):
    store = ResultStore(tmp_path)
    units = _units()
    store.write_row(_row(units[0], resolved=True, steps=3))
    store.write_row(_row(units[0], resolved=True, steps=3))  # the same unit again
    store.write_row(_row(units[1], error="docker died", outcome="infrastructure_error", error_cause="docker"))
    store.write_row(_row(units[2], error="test patch does not apply", outcome="input_error",
                         error_cause="test_patch_does_not_apply"))
    store.write_row(_row(units[3], error="KeyError: 'x'\nTraceback...", outcome="bug", error_cause="KeyError"))
    keys = [u.key for u in units]
    # Only infrastructure errors run again: input errors and bugs would fail the same way.
    assert store.finished_keys(keys, retry_errors=True) == {units[0].key, units[2].key, units[3].key}
    assert store.finished_keys(keys, retry_errors=False) == {units[0].key, units[1].key, units[2].key, units[3].key}
    table = store.compile(keys)
    assert table.num_rows == 4
    assert pq.read_table(tmp_path / "runs.parquet").column("key").to_pylist() == keys[:4]
    assert not (tmp_path / "preds.jsonl").exists()  # one instance four times: the harness would keep the last
    files = sorted(p.name for p in (tmp_path / "preds").iterdir())
    assert files == ["gemma3-270m__miniswe__L0__s0.jsonl", "gemma3-270m__miniswe__L0__s1.jsonl",
                     "gemma3-270m__miniswe__L0__s2.jsonl", "gemma3-270m__miniswe__L3__s0.jsonl"]
    for path in (tmp_path / "preds").iterdir():
        preds = [json.loads(line) for line in path.read_text().splitlines()]
        assert [set(p) for p in preds] == [{"instance_id", "model_name_or_path", "model_patch"}]
    assert not list((tmp_path / "rows").glob("*.tmp*"))


def test_a_damaged_row_file_counts_as_not_finished(tmp_path):
    store = ResultStore(tmp_path)
    unit = _units()[0]
    store.row_path(unit.key).write_bytes(b"not parquet")
    assert store.finished_keys([unit.key], retry_errors=True) == set()


def test_summary_rates_and_means_are_over_finished_units_with_errors_counted_apart(tmp_path):
    store = ResultStore(tmp_path)
    units = _units()
    store.write_row(_row(units[0], resolved=True, steps=2, input_tokens=100, output_tokens=10, cost=0.5))
    store.write_row(_row(units[1], resolved=False, steps=4, input_tokens=300, output_tokens=30, cost=0.25))
    # Errors: their steps, tokens and cost must not enter the means, nor the unit the rate.
    store.write_row(_row(units[2], steps=40, input_tokens=9000, output_tokens=900, cost=7.0, error="docker died",
                         outcome="infrastructure_error", error_cause="docker"))
    store.write_row(_row(units[3], resolved=False, steps=6, input_tokens=50, output_tokens=5, cost=0.0,
                         error="x", outcome="infrastructure_error", error_cause="model_unreachable"))
    store.write_row(_row(units[4], error="KeyError: 'a'\nTraceback", outcome="bug", error_cause="KeyError"))
    store.write_row(_row(units[5], error="test patch does not apply: t", outcome="input_error",
                         error_cause="test_patch_does_not_apply"))
    table = store.compile([u.key for u in units])
    rows = summarise(table)
    assert rows == [
        {"model": "gemma3-270m", "agent": "miniswe", "level": "L0", "units": 3, "finished": 2, "resolved": 1,
         "resolved_rate": 0.5, "resolved_rate_all": 1 / 3, "answered": 0, "mean_score": None, "mean_steps": 3.0,
         "mean_input_tokens": 200.0, "mean_output_tokens": 20.0,
         "cost": 0.75, "input_error": 0, "infrastructure_error": 1, "bug": 0},
        {"model": "gemma3-270m", "agent": "miniswe", "level": "L3", "units": 3, "finished": 0, "resolved": 0,
         "resolved_rate": 0.0, "resolved_rate_all": 0.0, "answered": 0, "mean_score": None, "mean_steps": 0.0,
         "mean_input_tokens": 0.0, "mean_output_tokens": 0.0,
         "cost": 0.0, "input_error": 1, "infrastructure_error": 1, "bug": 1},
    ]
    errors = error_counts(table)
    assert errors == [
        {"outcome": "input_error", "error_cause": "test_patch_does_not_apply", "units": 1,
         "example": "a__x-1 L3 seed 2: test patch does not apply: t"},
        {"outcome": "infrastructure_error", "error_cause": "docker", "units": 1,
         "example": "a__x-1 L0 seed 2: docker died"},
        {"outcome": "infrastructure_error", "error_cause": "model_unreachable", "units": 1,
         "example": "a__x-1 L3 seed 0: x"},
        {"outcome": "bug", "error_cause": "KeyError", "units": 1, "example": "a__x-1 L3 seed 1: KeyError: 'a'"},
    ]
    md = to_markdown(rows, title="t", planned=12, errors=errors)
    assert ("6 of 12 units ran: 2 finished (resolved or unresolved), 4 ended in an error. "
            "Rates, means and cost are over finished units; the second rate counts every unit, an error as "
            "unresolved, as SWE-bench's harness does") in md
    assert "| gemma3-270m | miniswe | L0 | 2 | 1 | 50.0% | 33.3% | 3.0 | 200 | 20 | 0.7500 | 0 | 1 | 0 |" in md
    assert "| gemma3-270m | miniswe | L3 | 0 | 0 | 0.0% | 0.0% | 0.0 | 0 | 0 | 0.0000 | 1 | 1 | 1 |" in md
    assert "| infrastructure_error | docker | 1 | a__x-1 L0 seed 2: docker died |" in md
    assert "| bug | KeyError | 1 | a__x-1 L3 seed 1: KeyError: 'a' |" in md
    assert "## Errors" not in to_markdown(rows, title="t", planned=12)


def _record(step: int, command: str, category: str, **extra) -> dict:
    """A ViewEnvironment step record (an identity view: executed as written)."""
    return {"step": step, "command": command, "executed": command, "category": category, "returncode": 0,
            "seconds": 0.5, "timed_out": False, "input_tokens": 0, "output_tokens": 0, "leak_count": 0} | extra


def _step_row(unit: RunUnit, record: dict) -> dict:
    audit = {"leaked_names": None, "memorised_count": None, "memorised_names": None}  # not in these records
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "attempt": unit.attempt} | record | audit


def test_steps_are_stored_with_their_row_survive_a_new_store_and_compile_in_plan_order(tmp_path):
    units = _units()
    first = [_record(1, "ls", "navigate", input_tokens=100, output_tokens=7),
             _record(2, "cat a.py", "read", leak_count=1)]
    second = [_record(1, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "submit", input_tokens=120, output_tokens=3)]
    store = ResultStore(tmp_path)
    store.write_row(_row(units[1], steps=1, step_records=second))  # written before units[0]
    store.write_row(_row(units[0], steps=2, step_records=first))
    store.write_row(_row(units[2], error="image build failed", outcome="input_error", error_cause="x"))  # no steps
    keys = [u.key for u in units]
    resumed = ResultStore(tmp_path)
    assert resumed.finished_keys(keys, retry_errors=True) == {units[0].key, units[1].key, units[2].key}
    assert resumed.read_steps(units[0].key) == [_step_row(units[0], r) for r in first]
    assert resumed.read_steps(units[2].key) == []
    assert resumed.read_row(units[0].key)["steps"] == 2
    resumed.compile(keys)
    expected = [_step_row(units[0], r) for r in first] + [_step_row(units[1], r) for r in second]
    assert pq.read_table(tmp_path / "steps.parquet").to_pylist() == expected
    assert not list((tmp_path / "steps").glob("*.tmp*"))


def test_a_rewritten_row_without_steps_drops_the_steps_of_the_earlier_attempt(tmp_path):
    store = ResultStore(tmp_path)
    unit = _units()[0]
    store.write_row(_row(unit, step_records=[_record(1, "ls", "navigate")], error="docker died",
                         outcome="infrastructure_error", error_cause="docker"))
    store.write_row(_row(unit, error="docker died before the agent", outcome="infrastructure_error",
                         error_cause="docker"))
    assert store.read_steps(unit.key) == []
    store.compile([unit.key])
    assert pq.read_table(tmp_path / "steps.parquet").num_rows == 0


def test_a_damaged_steps_file_counts_as_not_finished(tmp_path):
    store = ResultStore(tmp_path)
    unit = _units()[0]
    store.write_row(_row(unit, step_records=[_record(1, "ls", "navigate")]))
    store.steps_path(unit.key).write_bytes(b"not parquet")
    assert store.finished_keys([unit.key], retry_errors=False) == set()


def test_action_mix_gives_mean_commands_per_category_per_level_and_the_total_leaks(tmp_path):
    store = ResultStore(tmp_path)
    units = _units()
    counts = {f"actions_{c}": 0 for c in ("navigate", "search", "read", "probe", "edit", "test", "submit", "other")}
    store.write_row(_row(units[0], **counts | {"actions_read": 3, "actions_edit": 1, "actions_submit": 1},
                         leak_count=0))
    store.write_row(_row(units[1], **counts | {"actions_read": 1, "actions_search": 2}, leak_count=2))
    store.write_row(_row(units[3], **counts | {"actions_edit": 2, "actions_submit": 1}, leak_count=0))
    store.write_row(_row(units[4], error="docker died", outcome="infrastructure_error",
                         error_cause="docker"))  # ran no agent
    mix = action_mix(store.compile([u.key for u in units]))
    zero = {f"mean_{c}": 0.0 for c in ("navigate", "search", "read", "probe", "edit", "test", "submit", "other")}
    assert mix == [
        {"model": "gemma3-270m", "agent": "miniswe", "level": "L0", "units": 2,
         **zero | {"mean_search": 1.0, "mean_read": 2.0, "mean_edit": 0.5, "mean_submit": 0.5}, "leaks": 2,
         "memorised": 0, "unmapped": 0},
        {"model": "gemma3-270m", "agent": "miniswe", "level": "L3", "units": 1,
         **zero | {"mean_edit": 2.0, "mean_submit": 1.0}, "leaks": 0, "memorised": 0, "unmapped": 0},
    ]
    md = action_mix_markdown(mix)
    assert ("| model | agent | level | units | navigate | search | read | probe | edit | test | submit | other | leaks "
            "| memorised | unmapped |") in md
    assert "| gemma3-270m | miniswe | L0 | 2 | 0.0 | 1.0 | 2.0 | 0.0 | 0.5 | 0.0 | 0.5 | 0.0 | 2 | 0 | 0 |" in md
    # No level here remaps names: the L0 tokens are the baseline, not a leak to call out.
    assert "at levels that remap names" not in md and "the leaks column is the baseline" in md
    assert action_mix_markdown([]) == ""


def test_the_exposure_audit_calls_out_a_name_shown_at_l2_and_not_the_l0_baseline():
    row = {"model": "m", "agent": "miniswe", "units": 1, **{f"mean_{c}": 0.0 for c in
           ("navigate", "search", "read", "probe", "edit", "test", "submit", "other")}}
    md = action_mix_markdown([row | {"level": "L0", "leaks": 7, "memorised": 0, "unmapped": 14},
                              row | {"level": "L1+L2", "leaks": 1, "memorised": 2, "unmapped": 1}])
    assert ("Exposure audit (§III-F) at levels that remap names: 1 shown: see leaked_names in runs.parquet and "
            "steps.parquet, and view_meta.audit for the names each view left unmapped and why; 2 hidden names "
            "typed by agents before being shown (memorised_names).") in md
    clean = action_mix_markdown([row | {"level": "full", "leaks": 0, "memorised": 0, "unmapped": 0}])
    assert "at levels that remap names: none shown; 0 hidden names" in clean


def test_redact_masks_credential_fields_and_secret_values():
    secret = "sk-live-0123456789abcdef"
    data = {"model": {"api_key": secret, "max_tokens": 10},
            "messages": [{"content": f"key is {secret}"}], "input_tokens": 5}
    out = redact(data, secrets=[secret])
    assert out == {"model": {"api_key": "<redacted>", "max_tokens": 10},
                   "messages": [{"content": "key is <redacted>"}], "input_tokens": 5}


def test_trajectory_file_name_cannot_leave_the_run_directory():
    from raydist.cluster.outputs import trajectory_name

    unit = RunUnit("../../etc/x y", "h", "m", "oracle", "L0", 0, "c")
    name = trajectory_name(unit)
    assert name == f"etc_x_y__L0__s0__{unit.key[:8]}.traj.json"
    assert "/" not in trajectory_name(RunUnit("/tmp/a/b", "h", "m", "oracle", "L3", 2, "c"))


def sb_cli_predictions(path: Path) -> list[dict]:
    """What sb-cli 0.1.5 checks before it submits a file (``sb_cli/submit.py``,
    ``process_predictions``; not a dependency: it pins click<8.2): every line a JSON object
    with ``instance_id``, ``model_patch`` and ``model_name_or_path``, one model per file, no
    instance twice. Raises as sb-cli does (``KeyError``, ``ValueError``)."""
    preds = [{k: p[k] for k in ("instance_id", "model_patch", "model_name_or_path")}
             for p in map(json.loads, path.read_text().splitlines())]
    if len({p["model_name_or_path"] for p in preds}) > 1:
        raise ValueError("All predictions must be for the same model")
    if len({p["instance_id"] for p in preds}) != len(preds):
        raise ValueError("Duplicate instance IDs found in predictions - please remove duplicates before submitting")
    return preds


def test_prediction_files_hold_one_cell_each_and_load_in_the_harness_and_sb_cli(tmp_path):
    from swebench.harness.utils import get_predictions_from_file

    from raydist.results.export import run_tag

    store = ResultStore(tmp_path)
    units = _units()
    for unit in units:
        store.write_row(_row(unit, model_patch=f"patch of {unit.instance_id} {unit.level} {unit.seed}"))
    store.compile([u.key for u in units])
    files = sorted(p.name for p in (tmp_path / "preds").iterdir())
    assert files == [f"gemma3-270m__miniswe__{level}__s{seed}.jsonl" for level in ("L0", "L3") for seed in (0, 1, 2)]
    name = f"gemma3-270m__miniswe__L3__s1__{run_tag(tmp_path)}"
    path = tmp_path / "preds" / "gemma3-270m__miniswe__L3__s1.jsonl"
    assert get_predictions_from_file(str(path), "unused", "test") == [
        {"instance_id": "a__x-1", "model_name_or_path": name, "model_patch": "patch of a__x-1 L3 1"},
        {"instance_id": "b__y-2", "model_name_or_path": name, "model_patch": "patch of b__y-2 L3 1"},
    ]
    for path in (tmp_path / "preds").iterdir():
        assert [p["instance_id"] for p in sb_cli_predictions(path)] == ["a__x-1", "b__y-2"]
    # The check fails on what it exists to catch: a file mixing two cells (the old top-level preds.jsonl).
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join((tmp_path / "preds" / f).read_text() for f in files[:2]))
    with pytest.raises(ValueError, match="All predictions must be for the same model"):
        sb_cli_predictions(mixed)


def test_two_runs_never_share_a_model_name_and_an_old_layouts_files_go(tmp_path):
    from raydist.results.export import export_swebench

    names = []
    for run in ("one", "two"):
        store = ResultStore(tmp_path / run)
        units = _units()[:1]
        store.write_row(_row(units[0], model_patch="p"))
        (tmp_path / run / "preds").mkdir(parents=True, exist_ok=True)
        (tmp_path / run / "preds" / "L0.s0.jsonl").write_text("{}\n")  # an earlier layout's file
        store.compile([units[0].key])
        assert sorted(p.name for p in (tmp_path / run / "preds").iterdir()) == ["gemma3-270m__miniswe__L0__s0.jsonl"]
        names.append(json.loads((tmp_path / run / "preds" / "gemma3-270m__miniswe__L0__s0.jsonl").read_text())[
            "model_name_or_path"])
    assert names[0] != names[1] and names[0].startswith("gemma3-270m__miniswe__L0__s0__")
    # Exporting again writes the same file, byte for byte, elsewhere.
    written = export_swebench(tmp_path / "one", tmp_path / "out")
    assert written == [(tmp_path / "out" / "gemma3-270m__miniswe__L0__s0.jsonl", 1)]
    assert written[0][0].read_bytes() == (
        tmp_path / "one" / "preds" / "gemma3-270m__miniswe__L0__s0.jsonl").read_bytes()
