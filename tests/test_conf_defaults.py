"""One source of defaults: every default is a typed field (raydist/driver/config.py with
raydist.agents.AgentSettings, raydist/problems/config.py), and the YAML under raydist/conf only
selects and overrides. A YAML value equal to the schema's default is a second copy that can
drift from it, so it fails here unless ``RESTATED_ON_PURPOSE`` gives the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from raydist.driver.config import LaunchConfig
from raydist.problems.config import defaults as problems_defaults

CONF = Path(__file__).resolve().parents[1] / "raydist" / "conf"
CONF_FILES = sorted(str(p.relative_to(CONF)) for p in CONF.rglob("*.yaml"))

#: (file, dotted key) -> why that file writes the schema's own value.
RESTATED_ON_PURPOSE = {
    ("config.yaml", f"agents.{name}.kind"): "config.yaml lists the agents, each kind beside the comment saying what "
                                            "the agent does"
    for name in ("miniswe", "oracle", "null")
}


def schema_defaults() -> dict:
    """The defaults a file under conf/ is read against: the main job's schema (its agents
    included) and the problems settings (whose shared groups are the main schema's)."""
    return {**problems_defaults(), **OmegaConf.to_container(OmegaConf.structured(LaunchConfig))}


def restated(data: Any, defaults: Any, prefix: str = "") -> list[str]:
    """Dotted keys of ``data`` whose value equals the default at the same key (1 and 1.0 are
    equal, True and 1 are not); keys the schema does not have are not compared."""
    if isinstance(data, dict) and isinstance(defaults, dict):
        return [key for name, value in data.items() if name in defaults
                for key in restated(value, defaults[name], f"{prefix}{name}.")]
    same = data == defaults and isinstance(data, bool) == isinstance(defaults, bool)
    return [prefix.rstrip(".")] if same else []


def file_values(name: str) -> dict:
    """The settings ``conf/<name>`` writes, keyed from the config root: a group option's under
    its group (unless it is ``@package _global_``); Hydra's own ``defaults`` and ``hydra`` left out."""
    text = (CONF / name).read_text()
    data = yaml.safe_load(text) or {}
    data = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
    group = Path(name).parent.name
    return {group: data} if group and "@package _global_" not in text else data


@pytest.mark.parametrize("name", CONF_FILES)
def test_a_conf_file_restates_no_schema_default(name):
    keys = restated(file_values(name), schema_defaults())
    assert [k for k in keys if (name, k) not in RESTATED_ON_PURPOSE] == []


def test_every_value_restated_on_purpose_still_is():
    for name, key in RESTATED_ON_PURPOSE:
        assert key in restated(file_values(name), schema_defaults()), (name, key)


def test_a_group_value_equal_to_the_schema_default_is_found_and_a_different_one_is_not():
    defaults = schema_defaults()
    written = {"cluster": {"address": "auto", "max_concurrency": 2, "image_build_cpus": 1},
               "sandbox": {"limits": {"memory": "2g", "pids": 256}}, "gate": 1}
    assert restated(written, defaults) == ["cluster.max_concurrency", "cluster.image_build_cpus",
                                           "sandbox.limits.memory"]


def test_an_agent_limit_written_out_at_its_default_is_found():
    assert restated({"agents": {"miniswe": {"kind": "llm", "step_limit": 6, "max_tokens": 512}}},
                    schema_defaults()) == ["agents.miniswe.kind", "agents.miniswe.step_limit"]
