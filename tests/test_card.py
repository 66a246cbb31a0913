"""``raydist export card``: one card per model from hand-made run directories (every value known
here), validated against ``card.schema.json``; a signal not measured is null with a reason, never
0; the SWE-bench export writes the card beside the predictions; and the session's shared oracle
and null launch give valid cards."""

from __future__ import annotations

import json

import jsonschema
import pytest

from raydist.cli import main as raydist_main
from raydist.reporting.card import CARD_SCHEMA, SIGNALS, build_cards
from tests.test_analysis_repositories import U, unit, write_run

R = "resolved"


@pytest.fixture
def runs(tmp_path):
    """Model m (agent a) on builtin: i1, i2 resolved at L0; at L2 only i1, i2 flagged for history
    mining, i1 typed a hidden name; on fresh at L0: 1 of 2 resolved. A recall probe of m."""
    flags = json.dumps([{"step": 2, "command": "git log --all", "rule": "git-all-refs",
                         "category": "history_mining"}])
    root = tmp_path / "runs"
    write_run(root / "builtin" / "a" / "m" / "L0_L2__s0", [
        unit("i1", "L0", integrity_flags="[]", integrity_flagged=False, memorised_count=0, memorised_names="[]",
             naming_contract='["new_api"]'),
        unit("i2", "L0", integrity_flags="[]", integrity_flagged=False, memorised_count=0, memorised_names="[]",
             naming_contract="[]"),
        unit("i1", "L2", integrity_flags="[]", integrity_flagged=False, memorised_count=1,
             memorised_names='["wcswidth"]'),
        unit("i2", "L2", outcome=U, integrity_flags=flags, integrity_flagged=True, memorised_count=0,
             memorised_names="[]")])
    write_run(root / "fresh" / "a" / "m" / "L0__s0", [
        unit("f1", "L0", key="f1"), unit("f2", "L0", outcome=U, key="f2")])
    recall = root / "recall" / "swebench" / "m"
    recall.mkdir(parents=True)
    (recall / "recall.parquet").write_bytes(b"")
    (recall / "summary.json").write_text(json.dumps({"models": [{
        "model": "m", "instances": 4, "answered": 4, "failed": 0, "no_answer": 0,
        "counts": {"none": 3, "files_symbols": 1, "repair_logic": 0, "patch_test": 0},
        "shares": {"none": 0.75, "files_symbols": 0.25, "repair_logic": 0.0, "patch_test": 0.0}}]}))
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"summary": {"benchmark": "builtin", "audited": 6, "rejecting": 1, "share": 1 / 6}}))
    return root, audit


def test_a_card_holds_every_measured_signal_with_its_exact_value(runs):
    root, audit = runs
    [card] = build_cards([root], audits=[audit]).values()
    jsonschema.validate(card, CARD_SCHEMA)
    signals = card["signals"]
    levels = {r["level"]: r for r in signals["levels"]["value"]}
    # Pass@1 at L0 over builtin and fresh together: 3 of 4; the paired Δ at L2 on i1, i2: (1-1 + 0-1)/2 = -50.
    assert levels["L2"]["delta_pp"] == -50.0 and levels["L0"]["delta_pp"] is None
    assert levels["L2"]["noise_floor_pp"] is None and levels["L2"]["exceeds_noise_floor"] is None  # one attempt
    assert signals["recall"]["value"]["shares"] == {"none": 0.75, "files_symbols": 0.25, "repair_logic": 0.0,
                                                    "patch_test": 0.0}
    assert signals["fresh_vs_static"]["value"] == {"fresh_pass_at_1": 0.5, "fresh_units": 2,
                                                   "static_pass_at_1": 1.0, "static_units": 2,
                                                   "static_benchmarks": ["builtin"]}
    # The fresh rows have no memorised-name record (null): 4 units counted, not 6.
    assert signals["memorised_names"]["value"] == {"units": 4, "units_with_memorised": 1, "names": ["wcswidth"]}
    # The fresh run's rows were written without integrity columns: unknown, not counted.
    assert signals["integrity"]["value"] == {"units": 4, "flagged": 1, "by_category": {"history_mining": 1}}
    assert signals["grader_false_rejections"]["value"] == [{"benchmark": "builtin", "audited": 6, "rejecting": 1,
                                                            "share": 1 / 6}]
    # Contracts from the rows that record them (the fresh rows do not: null, left out).
    assert signals["naming_contracts"]["value"] == {"instances": 2, "with_contract": 1, "names": {"i1": ["new_api"]}}
    assert card["provenance"]["instances"] == {"builtin": ["i1", "i2"], "fresh": ["f1", "f2"]}
    assert card["provenance"]["config_hashes"] == ["c"]


def test_an_unmeasured_signal_is_null_with_a_reason_never_zero(runs, tmp_path):
    root, _ = runs
    only = tmp_path / "only"
    write_run(only / "builtin" / "a" / "m" / "L0__s0", [unit("i1", "L0")])
    [card] = build_cards([only]).values()
    jsonschema.validate(card, CARD_SCHEMA)
    for name in SIGNALS:
        signal = card["signals"][name]
        if name == "memorised_names":
            continue
        assert signal["value"] is None and signal["reason"], name
    assert "no level other than L0" in card["signals"]["levels"]["reason"]
    assert card["signals"]["memorised_names"]["reason"].startswith("no finished unit records memorised names")
    # The schema refuses a 0 standing in for an unmeasured signal, and a null without its reason.
    for broken in ({"value": None, "reason": None}, {"value": 0, "reason": "not run"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(card | {"signals": card["signals"] | {"recall": broken}}, CARD_SCHEMA)


def test_the_command_writes_cards_and_the_schema_and_the_swebench_export_adds_the_card(runs, tmp_path, capsys):
    root, audit = runs
    out = tmp_path / "cards"
    assert raydist_main(["export", "card", str(root), "--out", str(out), "--audit-tests", str(audit)]) == 0
    assert capsys.readouterr().out.split() == [str(out / "m" / "card.json")]
    schema = json.loads((out / "card.schema.json").read_text())
    jsonschema.validate(json.loads((out / "m" / "card.json").read_text()), schema)
    assert "## grader false rejections" in (out / "m" / "card.md").read_text()
    run_dir = root / "builtin" / "a" / "m" / "L0_L2__s0"
    assert raydist_main(["export", "swebench", str(run_dir), "--out", str(tmp_path / "preds")]) == 0
    assert (tmp_path / "preds" / "card" / "m" / "card.json").is_file()
    assert raydist_main(["export", "card", str(tmp_path / "nothing-here")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


def test_the_shared_oracle_and_null_launch_give_valid_cards(builtin_launch, tmp_path):
    cards = build_cards([builtin_launch.output_root])
    assert sorted(cards) == ["null", "oracle"]
    for card in cards.values():
        jsonschema.validate(card, CARD_SCHEMA)
        assert card["signals"]["integrity"]["value"]["flagged"] == 0
        assert card["signals"]["naming_contracts"]["value"]["with_contract"] == 0  # none among the built-in
        assert card["signals"]["recall"]["value"] is None and card["signals"]["recall"]["reason"]
    oracle = {r["level"]: r for r in cards["oracle"]["signals"]["levels"]["value"]}
    assert {level: row["pass_at_1"] for level, row in oracle.items()} == dict.fromkeys(oracle, 1.0)
