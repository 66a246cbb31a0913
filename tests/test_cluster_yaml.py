"""cluster.yaml is a config the installed Ray's cluster launcher accepts, and its commands
point at scripts that exist in the repository."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

REPO = Path(__file__).resolve().parent.parent
CLUSTER_YAML = REPO / "cluster.yaml"
# The project is copied to this directory on every node (file_mounts).
REMOTE_ROOT = "~/raydist"

COMMAND_FIELDS = (
    "initialization_commands",
    "setup_commands",
    "head_setup_commands",
    "worker_setup_commands",
    "head_start_ray_commands",
    "worker_start_ray_commands",
)
# Keys the AWS example replaces in the local config, as its comment says.
LOCAL_ONLY_KEYS = ("provider", "auth", "file_mounts", "rsync_filter", "rsync_exclude")


def _text() -> str:
    return CLUSTER_YAML.read_text()


def _local_config() -> dict:
    return yaml.safe_load(_text())


def _aws_config() -> dict:
    """The commented-out AWS example, uncommented and put in place of the local-only keys."""
    match = re.search(r"^# aws-example-begin\n(.*?)^# aws-example-end$", _text(), re.MULTILINE | re.DOTALL)
    assert match, "cluster.yaml lost its '# aws-example-begin' / '# aws-example-end' markers"
    block = "".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in match[1].splitlines(True))
    config = {k: v for k, v in _local_config().items() if k not in LOCAL_ONLY_KEYS}
    config.update(yaml.safe_load(block))
    return config


def _validate(config: dict) -> None:
    # `ray up` prepares (fills defaults, adds the local provider's node type) and then
    # validates against ray/autoscaler/ray-schema.json; do the same on a copy.
    validate_config(prepare_config(copy.deepcopy(config)))


def _scripts(config: dict) -> list[tuple[str, str]]:
    """(command, repository-relative path) for every launch/ script the commands run."""
    found = []
    for field in COMMAND_FIELDS:
        for command in config.get(field, []):
            for path in re.findall(r"(?:~/raydist/)?(launch/[\w./-]+\.sh)", command):
                found.append((command, path))
    return found


def test_local_config_passes_ray_schema_validation():
    assert _validate(_local_config()) is None


def test_aws_example_passes_ray_schema_validation():
    assert _validate(_aws_config()) is None


def test_aws_example_defines_cpu_and_gpu_worker_types():
    node_types = _aws_config()["available_node_types"]
    assert sorted(node_types) == ["cpu_worker", "gpu_worker", "head"]
    assert node_types["cpu_worker"]["resources"] == {"sandbox": 32}
    assert node_types["gpu_worker"]["node_config"]["InstanceType"] == "g5.2xlarge"


def test_provider_is_local_with_placeholder_addresses():
    provider = _local_config()["provider"]
    assert provider == {
        "type": "local",
        "head_ip": "HEAD_NODE_IP",
        "worker_ips": ["WORKER_NODE_IP_1", "WORKER_NODE_IP_2"],
    }


def test_project_is_mounted_at_the_remote_root_from_the_repository_root():
    assert _local_config()["file_mounts"] == {REMOTE_ROOT: "."}


def test_every_node_runs_setup_and_puts_the_projects_ray_on_path_before_ray_starts():
    assert _local_config()["setup_commands"] == [
        "cd ~/raydist && bash launch/setup.sh setup",
        "grep -qs raydist/.venv ~/.bashrc || echo 'export PATH=$HOME/raydist/.venv/bin:$PATH' >> ~/.bashrc",
    ]


def test_start_commands_use_the_ray_start_helper_per_role():
    config = _local_config()
    assert config["head_start_ray_commands"] == [
        "bash ~/raydist/launch/ray_start.sh head --port=6379 --autoscaling-config=~/ray_bootstrap_config.yaml"
    ]
    assert config["worker_start_ray_commands"] == [
        "bash ~/raydist/launch/ray_start.sh worker --address=$RAY_HEAD_IP:6379"
    ]


def test_commands_reference_scripts_that_exist():
    scripts = _scripts(_local_config())
    assert sorted({path for _, path in scripts}) == ["launch/ray_start.sh", "launch/setup.sh"]
    for command, path in scripts:
        assert (REPO / path).is_file(), f"{command!r} runs {path}, which is not in the repository"


@pytest.mark.parametrize("script", ["launch/setup.sh", "launch/ray_start.sh", "launch/local_cluster.sh", ".ci/run"])
def test_scripts_parse_as_bash(script):
    result = subprocess.run(["bash", "-n", str(REPO / script)], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr) == (0, "")


def test_ray_start_rejects_an_unknown_role():
    result = subprocess.run(
        ["bash", str(REPO / "launch/ray_start.sh"), "leader"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert result.stderr == "ray_start.sh: error: first argument must be 'head' or 'worker', got 'leader'\n"


def test_setup_rejects_an_unknown_mode_before_doing_anything():
    result = subprocess.run(["bash", str(REPO / "launch/setup.sh"), "deploy"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 1
    assert result.stderr.endswith("setup.sh: error: unknown mode 'deploy': give one of setup, run, test\n")
    assert result.stdout == ""
