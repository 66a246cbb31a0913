"""A ``local_models`` entry the Ray cluster cannot hold is refused before anything starts: the
shipped vLLM entry (``num_gpus: 1``) on this machine, which has no GPU, and replica counts that
are not a whole number of servers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from raydist.cluster.serving import replica_count, serve_model
from raydist.models.process import ModelServerError

ROOT = Path(__file__).resolve().parents[1]
VLLM = "qwen2.5-coder-0.5b-vllm"


@pytest.fixture(scope="module")
def vllm_entry() -> dict:
    conf = OmegaConf.load(ROOT / "raydist" / "conf" / "local_models.yaml")
    return OmegaConf.to_container(conf.local_models[VLLM], resolve=True)


def test_the_vllm_entry_is_served_by_the_same_actor_with_the_vllm_grammar_field(vllm_entry):
    assert vllm_entry["command"][:2] == ["vllm", "serve"]
    assert (vllm_entry["grammar_server"], vllm_entry["num_gpus"], vllm_entry["replicas"]) == ("vllm", 1, 1)


@pytest.mark.ray
def test_a_gpu_entry_on_a_cluster_without_gpus_is_refused_before_any_server_starts(ray_local, vllm_entry):
    import ray

    assert ray.cluster_resources().get("GPU", 0) == 0, "this test needs a machine without a GPU"
    actors_before = ray.util.list_named_actors(all_namespaces=True)
    with pytest.raises(ModelServerError) as refused, serve_model(VLLM, vllm_entry):
        pass

    assert str(refused.value) == (f"local_models.{VLLM}: num_gpus=1 but the Ray cluster has 0 GPUs in all; serve it "
                                  "on a cluster with GPUs (cluster=remote) or lower num_gpus")
    assert ray.util.list_named_actors(all_namespaces=True) == actors_before


@pytest.mark.ray
def test_replicas_that_need_more_cpus_than_the_cluster_has_are_refused(ray_local, gemma_entry):
    refusal = r"^local_models.gemma3-270m: num_cpus=1 x replicas=3 but the Ray cluster has 2 CPUs in all;"
    with pytest.raises(ModelServerError, match=refusal), serve_model("gemma3-270m", {**gemma_entry, "replicas": 3}):
        pass


@pytest.mark.parametrize("value", [0, -1, 1.5, "two", True])
def test_replicas_must_be_a_whole_number_of_servers(value):
    with pytest.raises(ModelServerError, match=rf"^local_models.m.replicas={value!r}: give a whole number"):
        replica_count("m", {"replicas": value})


def test_replicas_default_to_one():
    assert (replica_count("m", {}), replica_count("m", {"replicas": 2})) == (1, 2)


@pytest.mark.ray
def test_a_launch_of_the_gpu_entry_exits_2_naming_it_before_building_images_or_starting_a_server(tmp_path):
    done = subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", f"model={VLLM}",
                           "benchmark.limit=1", "levels=[L0]", "gate=false"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)

    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"raydist: error: local_models.{VLLM}: num_gpus=1 but the Ray cluster has 0 GPUs in all; serve it on a "
        "cluster with GPUs (cluster=remote) or lower num_gpus")
    assert "image" not in (done.stdout + done.stderr).lower()
    assert not list(tmp_path.rglob("*.parquet"))
