"""Image footprint: bytes on the node with shared layers counted once, the run record, the
ledger of last use, ``raydist images`` and ``raydist images prune`` (issue 31, item 5).

The Docker tests build three tiny images offline from the base image: ``common`` (the base plus
one layer of 300000 random bytes) and ``one`` / ``two`` on top of it (100000 / 200000 more), all
tagged ``raydist/test-footprint-<random>`` and removed at the end.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from docker.errors import ImageNotFound

from raydist.sandbox import base_image_tag
from raydist.sandbox.footprint import (
    ImageInfo,
    Layer,
    chain_ids,
    inspect,
    layer_sizes,
    node_layers,
    prune_plan,
    run_record,
    shared_bytes,
    union_bytes,
)
from raydist.sandbox.image_ledger import ledger_path, read_ledger, stamp

ROOT = Path(__file__).resolve().parents[1]
COMMON, ONE, TWO = 300_000, 100_000, 200_000


def _image(image_id: str, *layers: tuple[str, int]) -> ImageInfo:
    return ImageInfo(image_id, (f"raydist/t:{image_id}",), tuple(Layer(c, s) for c, s in layers),
                     sum(s for _, s in layers), 0.0, {})


# --- the arithmetic, no engine ---------------------------------------------------------------

def test_chain_id_of_the_first_layer_is_its_diff_id_and_the_next_hashes_both():
    second = "sha256:" + hashlib.sha256(b"sha256:a sha256:b").hexdigest()
    assert chain_ids(["sha256:a", "sha256:b"]) == ["sha256:a", second]


def test_layer_sizes_skip_metadata_entries_and_keep_a_zero_size_run():
    history = [(1000, "/bin/sh -c #(nop) ADD file:abc in / "), (0, "/bin/sh -c #(nop)  CMD [\"bash\"]"),
               (0, "/bin/sh -c true"), (0, "ENV A=1"), (500, "RUN /bin/sh -c make")]
    assert layer_sizes(history, 3) == [1000, 0, 500]


def test_a_metadata_entry_between_layers_does_not_shift_the_sizes_after_it():
    history = [(1000, "ADD rootfs"), (0, "ENV A=1"), (0, "RUN /bin/sh -c true"), (500, "RUN make"), (0, "CMD [\"x\"]")]
    assert layer_sizes(history, 3) == [1000, 0, 500]


def test_layer_sizes_take_zero_entries_from_the_base_up_when_the_count_differs():
    # a commit's history entry has no instruction: counted as a layer; one too many -> the first zero dropped
    assert layer_sizes([(10, "x"), (0, ""), (0, ""), (7, "y")], 3) == [10, 0, 7]
    assert layer_sizes([(10, "x"), (0, "ENV A=1"), (7, "y")], 3) == [10, 0, 7]


def test_layer_sizes_refuse_a_history_with_more_sized_entries_than_layers():
    with pytest.raises(ValueError, match="3 history entries have a size but the image has 2 layers"):
        layer_sizes([(1, "a"), (2, "b"), (3, "c")], 2)


def test_union_counts_a_shared_layer_once():
    one, two = _image("1", ("base", 100), ("x", 10)), _image("2", ("base", 100), ("y", 20))
    assert union_bytes([one, two]) == 130
    assert shared_bytes(one, [one, two]) == 100
    assert shared_bytes(two, [two]) == 0


def test_prune_removes_the_least_recently_used_until_the_rest_fit():
    a, b, c = _image("a", ("base", 100), ("x", 10)), _image("b", ("base", 100), ("y", 20)), _image("c", ("z", 5))
    last = {"a": 3.0, "b": 1.0, "c": 2.0}
    assert prune_plan([a, b, c], last, {"a", "b", "c"}, 115) == (["b"], 115)
    assert prune_plan([a, b, c], last, {"a", "b", "c"}, 110) == (["b", "c"], 110)
    assert prune_plan([a, b, c], last, {"a", "b", "c"}, 135) == ([], 135)


def test_prune_never_chooses_an_image_that_is_not_removable():
    a, b = _image("a", ("x", 10)), _image("b", ("y", 20))
    assert prune_plan([a, b], {"a": 2.0, "b": 1.0}, {"a"}, 0) == (["a"], 20)


# --- the ledger ----------------------------------------------------------------------------------

def test_stamp_moves_last_use_forward_and_keeps_origin_and_launches(tmp_path):
    stamp(tmp_path, [{"tag": "raydist/instance:k", "id": "sha256:1", "new": True}], when=200.0, launch="runs/a")
    stamp(tmp_path, [{"tag": "raydist/instance:k", "id": "sha256:1", "new": False},
                     {"tag": "swebench/x:latest", "id": "sha256:2", "new": False}], when=100.0, launch="runs/b")
    stamp(tmp_path, [{"tag": "raydist/instance:k", "id": "sha256:1", "new": False}], when=300.0, launch="runs/a")
    stamp(tmp_path, [{"tag": "raydist/instance:k", "id": "sha256:1", "new": False}], when=250.0, launch="runs/c")
    assert read_ledger(tmp_path) == {
        "sha256:1": {"tags": ["raydist/instance:k"], "last_use": 300.0, "origin": "built",
                     "launches": ["runs/b", "runs/a", "runs/c"]},
        "sha256:2": {"tags": ["swebench/x:latest"], "last_use": 100.0, "origin": "present", "launches": ["runs/b"]},
    }


def test_a_damaged_ledger_is_named(tmp_path):
    ledger_path(tmp_path).parent.mkdir(parents=True)
    ledger_path(tmp_path).write_text("[1, 2")
    with pytest.raises(ValueError, match=r"ledger.json is not an image ledger"):
        read_ledger(tmp_path)


# --- the real engine -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(client):
    """``{name: tag}`` of the three test images and the node's layers before they were built."""
    repo = f"raydist/test-footprint-{uuid.uuid4().hex[:10]}"
    before = node_layers(client)
    tags = {"common": f"{repo}:common", "one": f"{repo}:one", "two": f"{repo}:two"}
    steps = {"common": (base_image_tag(), COMMON), "one": (tags["common"], ONE), "two": (tags["common"], TWO)}
    try:
        for name, (parent, size) in steps.items():
            dockerfile = f"FROM {parent}\nUSER root\nRUN head -c {size} /dev/urandom > /{name}.bin\n"
            # nocache: a cached step would give the layers (and the image id) of an identical build left
            # on the node by an earlier, killed run, and the images would not be new
            client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tags[name], network_mode="none",
                                rm=True, forcerm=True, pull=False, nocache=True)
        yield tags, before
    finally:
        for tag in reversed(tags.values()):
            try:
                client.images.remove(tag, force=True)
            except ImageNotFound:
                pass


def _df(client, image_id: str) -> dict:
    return next(i for i in client.df()["Images"] if i["Id"] == image_id)


def test_layer_sizes_add_up_to_the_image_size_the_engine_reports(client, built):
    tags, _ = built
    for tag in tags.values():
        info = inspect(client, tag)
        assert sum(layer.size for layer in info.layers) == info.size == _df(client, info.id)["Size"]
    one = inspect(client, tags["one"])
    assert one.layers[-1].size == ONE  # the RUN's layer: the file's bytes
    assert one.layers[-2].size == COMMON


def test_two_images_sharing_a_base_take_the_union_of_their_layers(client, built):
    tags, _ = built
    common, one, two = (inspect(client, tags[n]) for n in ("common", "one", "two"))
    assert union_bytes([one, two]) == common.size + ONE + TWO
    assert union_bytes([one, two]) == one.size + two.size - shared_bytes(two, [one])
    # docker system df: what is not shared with any other image is the top layer alone
    assert _df(client, one.id)["Size"] - _df(client, one.id)["SharedSize"] == ONE
    assert _df(client, two.id)["Size"] - _df(client, two.id)["SharedSize"] == TWO


def test_the_run_record_counts_bytes_once_and_only_new_layers_as_built(client, built):
    tags, before = built
    base = base_image_tag()
    record = run_record(client, [base, tags["one"], tags["two"], "raydist/absent:none"], before)
    one, two = inspect(client, tags["one"]), inspect(client, tags["two"])
    base_size = inspect(client, base).size
    assert record["missing"] == ["raydist/absent:none"]
    assert [(i["tag"], i["bytes"], i["new"]) for i in record["images"]] == [
        (base, base_size, False), (tags["one"], one.size, True), (tags["two"], two.size, True)]
    assert record["bytes_used"] == base_size + one.size + two.size
    assert record["bytes_on_node"] == base_size + COMMON + ONE + TWO
    assert record["bytes_built_or_pulled"] == COMMON + ONE + TWO


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raydist.cli", "images", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def test_images_lists_the_matched_images_with_last_use_and_launches(client, built, tmp_path):
    tags, _ = built
    one = inspect(client, tags["one"])
    stamp(tmp_path, [{"tag": tags["one"], "id": one.id, "new": True}], when=1_700_000_000.0, launch="runs/x")
    repo = tags["one"].split(":")[0]
    done = _cli("--cache-dir", str(tmp_path), "--match", f"{repo}:*", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    common = inspect(client, tags["common"])
    assert listed["bytes_on_node"] == common.size + ONE + TWO
    row = next(r for r in listed["images"] if r["tags"] == [tags["one"]])
    assert (row["bytes"], row["shared_bytes"], row["last_use"], row["launches"]) == (
        one.size, common.size, 1_700_000_000.0, ["runs/x"])
    table = _cli("--cache-dir", str(tmp_path), "--match", f"{repo}:*").stdout
    assert f"{tags['one']:<48} {one.id[7:19]:<12}" in table and "2023-11-14 22:13:20 1: runs/x" in table


@pytest.mark.parametrize("bad", ["-1", "ten", "nan", "inf"])
def test_a_bad_keep_gb_exits_2_with_one_line(bad, tmp_path):
    # a dry run over no image: were the value let through, nothing on the node could be removed
    done = _cli("prune", "--keep-gb", bad, "--dry-run", "--match", "raydist/none-such:*", "--cache-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == (f"raydist: error: --keep-gb {bad!r} is not a size: give a number of GB >= 0, "
                           "e.g. --keep-gb 30\n")


def test_prune_removes_the_least_recently_used_and_keeps_one_in_use(client, built, tmp_path):
    tags, _ = built
    common, one, two = (inspect(client, tags[n]) for n in ("common", "one", "two"))
    repo = tags["one"].split(":")[0]
    for name, when in (("two", 100.0), ("one", 200.0), ("common", 300.0)):
        info = inspect(client, tags[name])
        stamp(tmp_path, [{"tag": tags[name], "id": info.id, "new": True}], when=when, launch="runs/x")
    box = client.containers.create(tags["two"], "sleep 600", labels={"raydist.role": "test-footprint"})
    try:
        box.start()
        # two is the least recently used but in use: one goes, and the rest (common + two) fits
        keep = f"{(common.size + TWO) / 1e9:.9f}"
        dry = _cli("prune", "--keep-gb", keep, "--dry-run", "--cache-dir", str(tmp_path), "--match", f"{repo}:*")
        assert dry.returncode == 0, dry.stderr
        assert [line.split(" (")[0] for line in dry.stdout.splitlines()[:-1]] == [f"would remove {tags['one']}"]
        assert inspect(client, tags["one"]) is not None
        done = _cli("prune", "--keep-gb", keep, "--cache-dir", str(tmp_path), "--match", f"{repo}:*")
        assert done.returncode == 0, done.stderr
        rest = common.size + TWO
        assert done.stdout.splitlines()[-1] == (f"raydist's images take {rest / 1e6:.1f} MB ({rest} B) "
                                                f"<= {float(keep):g} GB after the removals above")
        assert inspect(client, tags["one"]) is None and inspect(client, tags["two"]) is not None
        # nothing removable is left that would help: common's layers are held by two
        short = _cli("prune", "--keep-gb", "0", "--cache-dir", str(tmp_path), "--match", f"{repo}:*")
        assert short.returncode == 1
        assert f"in use by a container: {tags['two']} by {box.name} (running)" in short.stderr
        assert inspect(client, tags["two"]) is not None
    finally:
        box.remove(force=True)


def test_a_launch_records_its_images_and_stamps_them_in_the_ledger(client, builtin_launch):
    from raydist.driver.benchmark import load_benchmark
    from raydist.sandbox.images import instance_tag

    run_dir = builtin_launch.oracle.run_dir
    record = json.loads((run_dir / "images.json").read_text())
    expected = sorted({base_image_tag(), *(instance_tag(i.recipe) for i in load_benchmark({"source": "builtin"}))})
    assert [i["tag"] for i in record["images"]] == expected and record["missing"] == []
    infos = [inspect(client, tag) for tag in expected]
    assert [i["id"] for i in record["images"]] == [i.id for i in infos]
    assert record["bytes_used"] == sum(i.size for i in infos)
    assert record["bytes_on_node"] == union_bytes(infos) < record["bytes_used"]
    ledger = read_ledger(os.environ.get("RAYDIST_CACHE_DIR") or Path.home() / ".cache" / "raydist")  # its cache_dir
    for info in infos:
        assert str(run_dir) in ledger[info.id]["launches"]
        assert ledger[info.id]["last_use"] >= record["started"]
