"""Hostile input for the sandbox providers and the image footprint (issue 31): each is refused in
one line naming the input and what to do, with the documented exit status, and loses nothing a
launch already did.

* ``sandbox.podman_socket`` / ``sandbox.docker_host`` that are no engine address (empty, a bare
  path, no port) are settings (exit status 2, before anything starts), not an engine that
  cannot be reached (1); an empty one no longer falls back to the default socket.
* A provider pointed at the other engine (``sandbox.provider=podman`` at Docker's daemon,
  ``docker`` at Podman's service, where Docker's options leave ``/tmp`` unbounded) is refused
  by its ``check``, before any sandbox.
* The image ledger: an entry of another shape is named (file and image) by ``raydist images``
  and by a launch's plan; a ledger damaged while a launch runs costs it neither its summary nor
  its exit status.
* ``raydist images --match`` finds Podman's names (``docker.io/raydist/...``,
  ``localhost/raydist/...``) by the names Docker gives them.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raydist import launcher
from raydist.driver.drive import _stamp_ledger
from raydist.driver.preflight import plan_launch
from raydist.images_command import matches
from raydist.launch import cli
from raydist.sandbox import Limits, SandboxUnavailable, base_image_tag, connect
from raydist.sandbox.engine import DEFAULT_ADDRESS
from raydist.sandbox.footprint import ImageInfo, short_name
from raydist.sandbox.image_ledger import ledger_path, read_ledger, stamp
from raydist.sandbox.podman import DEFAULT_SOCKET
from tests.conftest import _unavailable

ROOT = Path(__file__).resolve().parents[1]
SMALL = ("agent=oracle", "levels=[L0]", "seeds=[0]", "benchmark.limit=1", "dry_run=true")
IMAGE = "sha256:" + "ab" * 32
GOOD = {"tags": ["raydist/instance:k"], "last_use": 1_700_000_000.0, "origin": "built", "launches": ["runs/a"]}


def _refused(capsys, *args: str) -> str:
    """The one line the main launch prints when it refuses ``args`` with exit status 2."""
    assert cli(list(args)) == launcher.EXIT_SETTING
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _images(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raydist.cli", "images", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def _write_ledger(cache_dir: Path, text: str) -> Path:
    path = ledger_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- engine addresses --------------------------------------------------------------------------

@pytest.mark.parametrize(("setting", "why", "example"), [
    ("sandbox.podman_socket=", "it is empty", "unix:///run/raydist-podman.sock"),
    ("sandbox.podman_socket=garbage", "Invalid bind address format: port is required: garbage",
     "unix:///run/raydist-podman.sock"),
    ("sandbox.podman_socket=/run/raydist-podman.sock", "Invalid bind address format: /run/raydist-podman.sock",
     "unix:///run/raydist-podman.sock"),
    ("sandbox.docker_host=tcp://127.0.0.1", "Invalid bind address format: port is required: tcp://127.0.0.1",
     "unix:///run/raydist-podman.sock"),
])
def test_an_address_that_is_no_engine_url_is_a_setting_refused_with_exit_2(capsys, tmp_path, setting, why, example):
    key, _, value = setting.partition("=")
    line = _refused(capsys, "sandbox.provider=podman", setting, f"output_root={tmp_path}", *SMALL)
    assert line == (f"raydist: error: {key}={value!r} is not an engine address ({why}): give a URL such as "
                    f"{example} or tcp://host:2375")
    assert list(tmp_path.iterdir()) == []


# --- a provider at the other engine ---------------------------------------------------------------

@pytest.mark.docker
def test_podman_provider_at_a_docker_daemon_is_refused_by_check():
    try:
        provider = connect("podman", DEFAULT_ADDRESS, timeout=5)  # Docker answers the compat API
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    with pytest.raises(ValueError) as refused:
        provider.check(Limits())
    assert str(refused.value) == (
        f"sandbox.provider=podman at {DEFAULT_ADDRESS}: the service there is not Podman (it answers no libpod API: "
        "/v4.0.0/libpod/info is 404); set sandbox.podman_socket to Podman's socket, or sandbox.provider=docker for "
        "a Docker daemon")


@pytest.mark.podman
def test_docker_provider_at_podmans_service_is_refused_by_check_before_any_sandbox():
    try:
        provider = connect("docker", DEFAULT_SOCKET, timeout=5)
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    with pytest.raises(ValueError) as refused:
        provider.create(base_image_tag(), name="hostile-docker-at-podman")
    assert str(refused.value) == (
        f"sandbox.provider=docker at {DEFAULT_SOCKET}: that is Podman's API service, where Docker's options leave "
        f"/tmp and /testbed unbounded; set sandbox.provider=podman sandbox.podman_socket={DEFAULT_SOCKET}")
    assert provider.client.containers.list(all=True, filters={"name": "hostile-docker-at-podman"}) == []


# --- the image ledger ------------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "problem"), [
    (5, "int instead of an object"),
    ({**GOOD, "last_use": "abc"}, "'last_use' 'abc' is not Unix seconds"),
    ({k: v for k, v in GOOD.items() if k != "last_use"}, "'last_use' None is not Unix seconds"),
    ({**GOOD, "last_use": 1e300}, "'last_use' 1e+300 is not Unix seconds"),
    ({**GOOD, "last_use": True}, "'last_use' True is not Unix seconds"),
    ({**GOOD, "launches": 7}, "'launches' is not a list of strings"),
    ({**GOOD, "tags": [1]}, "'tags' is not a list of strings"),
    ({**GOOD, "origin": 3}, "'origin' 3 is none of built, pulled, present"),
])
def test_a_ledger_entry_of_another_shape_is_named_with_its_image(tmp_path, entry, problem):
    path = _write_ledger(tmp_path, json.dumps({"images": {IMAGE: entry}}))
    with pytest.raises(ValueError) as refused:
        read_ledger(tmp_path)
    assert str(refused.value) == (f"{path} is not an image ledger (image {IMAGE}: {problem}); move it away and the "
                                  "next launch starts a new one")


def test_stamp_writes_entries_read_ledger_accepts(tmp_path):
    stamp(tmp_path, [{"tag": "raydist/instance:k", "id": IMAGE, "new": True}], when=1_700_000_000.5, launch="runs/a")
    assert read_ledger(tmp_path) == {IMAGE: {"tags": ["raydist/instance:k"], "last_use": 1_700_000_000.5,
                                             "origin": "built", "launches": ["runs/a"]}}


@pytest.mark.docker
def test_images_names_a_damaged_ledger_entry_in_one_line_with_exit_1(client, tmp_path):
    base = client.images.get(base_image_tag()).id  # listed, never removed
    path = _write_ledger(tmp_path, json.dumps({"images": {base: {**GOOD, "last_use": "abc"}}}))
    done = _images("--match", "raydist/base:*", "--cache-dir", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == (f"raydist: error: {path} is not an image ledger (image {base}: 'last_use' 'abc' is not "
                           "Unix seconds); move it away and the next launch starts a new one\n")


def test_images_refuses_an_empty_cache_dir_with_exit_2():
    done = _images("prune", "--keep-gb", "1", "--dry-run", "--match", "raydist/none-such:*", "--cache-dir=")
    assert done.returncode == 2
    assert done.stderr == ("raydist: error: --cache-dir is empty: give the launches' cache_dir, or leave it out for "
                           "RAYDIST_CACHE_DIR, else ~/.cache/raydist\n")


@pytest.mark.parametrize(("flag", "line"), [
    ("--provider=", "--provider '' is not a sandbox provider; choose one of: docker, podman"),
    ("--provider=Docker", "--provider 'Docker' is not a sandbox provider; choose one of: docker, podman"),
    ("--docker-host=", "--docker-host '' is not an engine address (it is empty): give a URL such as "
                       "unix:///run/raydist-podman.sock or tcp://host:2375"),
    ("--docker-host=/run/raydist-podman.sock", "--docker-host '/run/raydist-podman.sock' is not an engine address "
     "(Invalid bind address format: /run/raydist-podman.sock): give a URL such as unix:///run/raydist-podman.sock "
     "or tcp://host:2375"),
])
def test_images_refuses_a_bad_provider_or_address_with_exit_2(tmp_path, flag, line):
    done = _images(flag, "--match", "raydist/none-such:*", "--cache-dir", str(tmp_path))
    assert (done.returncode, done.stderr) == (2, f"raydist: error: {line}\n")


@pytest.mark.parametrize("text", ['{"images": {"sha', '{"images": {"%s": 5}}' % IMAGE])
def test_a_launch_with_a_damaged_ledger_is_refused_by_its_plan(capsys, tmp_path, text):
    cache = tmp_path / "cache"
    path = _write_ledger(cache, text)
    line = _refused(capsys, f"output_root={tmp_path / 'out'}", f"cache_dir={cache}", *SMALL)
    assert line.startswith(f"raydist: error: cache_dir={cache}: {path} is not an image ledger (")
    assert line.endswith("); move it away and the next launch starts a new one")
    assert not (tmp_path / "out").exists()


def test_a_ledger_damaged_during_a_launch_costs_only_a_warning(capsys, tmp_path):
    [planned] = plan_launch([f"output_root={tmp_path / 'out'}", f"cache_dir={tmp_path / 'cache'}", *SMALL])
    path = _write_ledger(tmp_path / "cache", '{"images": {"sha')  # damaged after the plan read it
    run_dir = planned.job.run_dir
    _stamp_ledger(planned.job, {"images": [{"tag": "raydist/instance:k", "id": IMAGE, "new": True}], "started": 1.0})
    err = capsys.readouterr().err
    assert err == (f"raydist: warning: the image ledger was not updated ({path} is not an image ledger (Unterminated "
                   "string starting at: line 1 column 13 (char 12)); move it away and the next launch starts a new "
                   f"one); the run's images are in {run_dir / 'images.json'}\n")
    assert path.read_text() == '{"images": {"sha'


# --- Podman's image names ------------------------------------------------------------------------

@pytest.mark.parametrize(("tag", "short"), [
    ("docker.io/raydist/instance:k", "raydist/instance:k"),
    ("localhost/raydist/base:t", "raydist/base:t"),
    ("docker.io/library/debian:12", "debian:12"),
    ("raydist/instance:k", "raydist/instance:k"),
    ("ghcr.io/raydist/instance:k", "ghcr.io/raydist/instance:k"),  # another registry's is not raydist's
])
def test_short_name_drops_only_the_registry_podman_adds(tag, short):
    assert short_name(tag) == short


def test_match_and_is_raydist_take_podmans_names_as_dockers():
    assert matches(("docker.io/raydist/instance:k",), "raydist/instance:*")
    assert not matches(("docker.io/other/instance:k",), "raydist/instance:*")
    info = ImageInfo(IMAGE, ("docker.io/raydist/instance:k",), (), 0, 0.0, {})
    assert info.is_raydist
    assert not ImageInfo(IMAGE, ("ghcr.io/raydist/instance:k",), (), 0, 0.0, {}).is_raydist


@pytest.mark.podman
def test_images_match_finds_the_base_image_in_podmans_store(tmp_path):
    try:
        podman = connect("podman", timeout=5)
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    stored = podman.client.images.get(base_image_tag())
    done = _images("--provider", "podman", "--match", "raydist/base:*", "--json", "--cache-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["images"]
    assert [(row["id"], row["tags"]) for row in listed] == [(stored.id, stored.tags)]
    assert stored.tags[0].startswith("localhost/raydist/base:")
