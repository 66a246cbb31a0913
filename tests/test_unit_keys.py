"""Unit keys cover everything that can change a result and nothing that cannot: the real
config (Hydra compose of conf/config.yaml) through ``plan_job``, one setting changed at
a time. A setting that changes a result and leaves the keys alone would reuse stale rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import raydist.launch  # noqa: F401 - registers the config's resolvers
from raydist.driver.config import check_config
from raydist.driver.plan import plan_job
from raydist.launch import job_subdir

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    """A stand-in model weights file (its bytes are what the key hashes, not its meaning)."""
    path = tmp_path_factory.mktemp("weights") / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory, weights) -> list[str]:
    """The keys of the default settings (with the stand-in weights), computed once."""
    return keys(tmp_path_factory.mktemp("base"), f"local_models.gemma3-270m.model_path={weights}")


@pytest.fixture
def prompts(tmp_path) -> Path:
    folder = tmp_path / "prompts"
    shutil.copytree(ROOT / "raydist" / "conf" / "prompts", folder)
    return folder


def keys(tmp_path: Path, *overrides: str, agent: str = "miniswe") -> list[str]:
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"agent={agent}", "benchmark.limit=2", "levels=[L0,L3]",
                                           f"cache_dir={tmp_path / 'cache'}", *overrides])
    job = plan_job(check_config(cfg), run_dir=tmp_path / "run")
    return [u.key for u in job.units]


RESULT_SETTINGS = [
    "agents.miniswe.step_limit=7",
    "agents.miniswe.cost_limit=1.5",
    "agents.miniswe.wall_time_limit_s=300",
    "agents.miniswe.command_timeout_s=30",
    "agents.miniswe.output_limit_chars=1000",
    "agents.miniswe.max_tokens=256",
    "agents.miniswe.temperature=0.7",
    "agents.miniswe.grammar=false",
    "sandbox.limits.cpus=2.0",
    "sandbox.limits.memory=4g",
    "sandbox.limits.pids=256",
    "sandbox.network=bridge",
    "sandbox.base_image=raydist-base:other",
    "sandbox.grading_timeout_s=60",
    "view.l3_files=all",
    "local_models.gemma3-270m.command=[llama-server,--model,'{model_path}',--port,'{port}',--temp,'0.5']",
    "local_models.gemma3-270m.grammar_server=vllm",
]


@pytest.mark.parametrize("setting", RESULT_SETTINGS)
def test_a_setting_that_can_change_the_result_gives_every_unit_a_new_key(tmp_path, weights, base, setting):
    changed = keys(tmp_path, f"local_models.gemma3-270m.model_path={weights}", setting)
    assert len(changed) == len(base) == 4
    assert set(changed).isdisjoint(base), setting


@pytest.mark.parametrize("setting", RESULT_SETTINGS)
def test_a_setting_that_can_change_the_result_names_the_directory_of_its_sweep_job(setting):
    assert job_subdir([setting]).startswith("/" + setting.split("=")[0] + "=")


KEYLESS_SETTINGS = [
    "cluster.max_concurrency=1",
    "cluster.cpus_per_unit=1.0",
    "cluster.sandbox_resource=docker_slot",
    "cluster.sandbox_per_unit=2",
    "cluster.dashboard=true",
    "output_root=/tmp/elsewhere",
    "+agents.miniswe.request_timeout_s=30",
    "+agents.miniswe.model_retries=5",
    "view.request_timeout_base_s=10",
    "resume.max_attempts=5",
    "local_models.gemma3-270m.host=0.0.0.0",
]


@pytest.mark.parametrize("setting", KEYLESS_SETTINGS)
def test_a_setting_that_cannot_change_the_result_leaves_the_directory_of_its_sweep_job(setting):
    assert job_subdir([setting]) == ""


@pytest.mark.parametrize("setting", [*KEYLESS_SETTINGS, "gate=false"])
def test_a_setting_that_cannot_change_the_result_keeps_every_key(tmp_path, weights, base, setting):
    assert keys(tmp_path, f"local_models.gemma3-270m.model_path={weights}", setting) == base


def test_the_cache_dir_is_no_part_of_the_key(tmp_path, weights, base):
    other = tmp_path / "other"
    other.mkdir()
    assert keys(other, f"local_models.gemma3-270m.model_path={weights}") == base


def test_changing_the_bytes_of_one_agent_prompt_file_gives_new_keys(tmp_path, weights, prompts):
    args = (f"local_models.gemma3-270m.model_path={weights}", f"agents.miniswe.prompts_dir={prompts}")
    base = keys(tmp_path, *args)
    assert keys(tmp_path, *args) == base
    observation = prompts / "observation.j2"
    observation.write_text(observation.read_text() + "\nRemember: run the tests.\n")
    assert set(keys(tmp_path, *args)).isdisjoint(base)


def test_changing_the_model_weights_file_gives_new_keys(tmp_path):
    weights = tmp_path / "own.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    arg = f"local_models.gemma3-270m.model_path={weights}"
    base = keys(tmp_path, arg)
    weights.write_bytes(weights.read_bytes()[::-1])  # same size, other bytes
    assert set(keys(tmp_path, arg)).isdisjoint(base)


def test_scripted_agents_keys_follow_the_sandbox_but_not_the_llm_agents_settings(tmp_path):
    base = keys(tmp_path, agent="oracle")
    assert keys(tmp_path, "agents.miniswe.step_limit=99", "model=openai/gpt-4o-mini", agent="oracle") == base
    assert set(keys(tmp_path, "sandbox.grading_timeout_s=60", agent="oracle")).isdisjoint(base)
    assert set(keys(tmp_path, "sandbox.limits.memory=4g", agent="oracle")).isdisjoint(base)


@pytest.mark.parametrize("agent, digest", [("oracle", "13110efe0d44b0b0"), ("null", "0952bb1ad6c768a3")])
def test_the_default_launchs_unit_keys_are_those_its_earlier_rows_carry(tmp_path, agent, digest):
    """The 12 keys of the default launch (built-in set, L0 + L3, seed 0) of a scripted agent,
    pinned: a refactoring that changes them would orphan every finished row of that launch."""
    import hashlib
    import json

    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"agent={agent}", f"cache_dir={tmp_path / 'cache'}"])
    units = plan_job(check_config(cfg), run_dir=tmp_path / "run").units
    assert len(units) == 12
    assert hashlib.sha256(json.dumps([u.key for u in units]).encode()).hexdigest()[:16] == digest


EVERY_LEVEL = "[L0,L1,L2,L3,L4,full,L1+L2,L2+L3,L1+L3+L4,L2+L4]"


# L1's preparation version 6 (the rule restatement) gave the units of L1, L1+L2, L1+L3+L4 and
# full new keys, as it must (their rows were built on other statements); the other levels kept theirs.
# Pinning the grading environment (raydist.grading.environment) gave every unit a new key: rows
# graded under the host's TZ, hash seed and locale are not results of the pinned grading.
# The embedded model's command now runs one compute thread per reserved CPU (--threads "{num_cpus}"
# for "2"); the command is part of the model's identity, so every unit whose view (L1, L4) or
# answers came from it has a new key.
@pytest.mark.parametrize("agent, digest, gate_digest", [("oracle", "7733adbf77728a0a", None),
                                                        ("null", "eaae34c944ee53a1", None),
                                                        ("miniswe", "bc6b88fb18c7b0a6", "3ed5737ea398ad2b")])
def test_the_keys_of_every_level_are_those_its_earlier_rows_carry(tmp_path, agent, digest, gate_digest):
    """The keys of the built-in set at every level and some compositions, seeds 0 and 1 (120
    units per agent; the LLM agent's with its validity gate's 240; the embedded model), pinned: the unit key is
    assembled in ``raydist.cluster.unit_key`` and a refactoring of it must leave every key as
    it was."""
    import hashlib
    import json

    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"agent={agent}", f"levels={EVERY_LEVEL}", "seeds=[0,1]",
                                           f"cache_dir={tmp_path / 'cache'}"])
    job = plan_job(check_config(cfg), run_dir=tmp_path / "run")
    assert len(job.units) == 120
    assert hashlib.sha256(json.dumps([u.key for u in job.units]).encode()).hexdigest()[:16] == digest
    gate = None if job.gate is None else hashlib.sha256(json.dumps([u.key for u in job.gate.units]).encode())
    assert (gate and gate.hexdigest()[:16]) == gate_digest


def test_the_node_that_ran_a_unit_is_no_part_of_its_key(tmp_path):
    """A unit that ran again on another node (its first node lost) is the same unit: one key,
    one stored row, the last node's."""
    from dataclasses import fields

    from raydist.cluster.unit_key import RunUnit, build_plan
    from raydist.results import ResultStore
    from raydist.tasks import load_instances

    assert not {"node", "node_ip"} & {f.name for f in fields(RunUnit)}
    [unit] = build_plan(load_instances("builtin", limit=1), model="-", agent="null", levels=["L0"], seeds=[0],
                        config_hash="c")
    store = ResultStore(tmp_path)
    for node, ip in (("a" * 56, "10.0.0.1"), ("b" * 56, "10.0.0.2")):
        store.write_row({"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
                         "level": unit.level, "seed": unit.seed, "config_hash": "c", "resolved": False,
                         "outcome": "unresolved", "node": node, "node_ip": ip})
    assert store.finished_keys([unit.key], retry_errors=True) == {unit.key}
    [row] = store.compile([unit.key]).to_pylist()
    assert (row["key"], row["node"], row["node_ip"]) == (unit.key, "b" * 56, "10.0.0.2")
