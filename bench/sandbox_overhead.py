"""Sandbox overhead per provider, side by side, each against its own engine's raw calls; the
two sides of each pair interleaved so drift hits both alike, N repetitions each:

- per unit: raydist's sandbox (``provider.create`` -> exec `true` -> remove) against a plain run of
  `true` through the same docker-SDK client (``containers.run(..., remove=True)``: create, start,
  wait, remove), with no network and nothing else the engine does not need;
- per step: ``Sandbox.exec("true")`` (time limit, process-group sweep, output file, and a trailer
  with the end marker and the exit status: ``raydist.sandbox.command``; exec_create +
  exec_start) against a raw exec of `bash -c true` through the same client (exec_create +
  exec_start + exec_inspect), in one running sandbox.

Usage: python bench/sandbox_overhead.py [--provider docker,podman] [--n 20] [--image TAG]
(``--provider docker`` or ``--provider podman`` measures one; a provider is reached at its
default address: ``DOCKER_HOST`` or Docker's socket, ``unix:///run/raydist-podman.sock``).
"""
from __future__ import annotations

import argparse
import statistics
import time

from docker.types import Ulimit

from raydist.sandbox import SandboxProvider, base_image_tag, connect, ensure_base_image
from raydist.sandbox.podman import service_rlimits


def time_sandbox(provider: SandboxProvider, image: str) -> float:
    start = time.perf_counter()
    with provider.create(image, name="bench") as box:
        result = box.exec("true", timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"`true` failed in the {provider.name} sandbox: {result.output}")
    return time.perf_counter() - start


def raw_run_options(provider: SandboxProvider) -> dict:
    """What the engine needs to start a container at all: on Podman as a root without
    CAP_SYS_RESOURCE, nofile/nproc within the service's own (``raydist.sandbox.podman``)."""
    if provider.name != "podman":
        return {}
    return {"ulimits": [Ulimit(name=n, soft=v, hard=v) for n, v in service_rlimits(provider.address).items()]}


def time_raw_run(provider: SandboxProvider, image: str, options: dict) -> float:
    start = time.perf_counter()
    provider.client.containers.run(image, ["true"], network_mode="none", remove=True, **options)
    return time.perf_counter() - start


def time_step(box) -> float:
    start = time.perf_counter()
    result = box.exec("true", timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"`true` failed in the sandbox: {result.output}")
    return time.perf_counter() - start


def time_raw_exec(client, container_id: str) -> float:
    api = client.api
    start = time.perf_counter()
    exec_id = api.exec_create(container_id, ["bash", "-c", "true"], workdir="/")["Id"]
    api.exec_start(exec_id)
    code = api.exec_inspect(exec_id)["ExitCode"]
    if code != 0:
        raise RuntimeError(f"raw exec of `true` exited {code}")
    return time.perf_counter() - start


def measure(provider: SandboxProvider, image: str, n: int) -> dict[str, list[float]]:
    """Seconds of each of the four measures, ``n`` each."""
    out: dict[str, list[float]] = {"unit": [], "raw run": [], "step": [], "raw exec": []}
    options = raw_run_options(provider)
    for _ in range(n):
        out["unit"].append(time_sandbox(provider, image))
        out["raw run"].append(time_raw_run(provider, image, options))
    with provider.create(image, name="bench-steps") as box:
        box.exec("true", timeout=30)  # warm: the log volume and the keep-alive exist
        for _ in range(n):
            out["step"].append(time_step(box))
            out["raw exec"].append(time_raw_exec(provider.client, box.container.id))
    return out


def report(results: dict[str, dict[str, list[float]]]) -> None:
    names = list(results)
    print(f"{'median ms (min-max)':32}" + "".join(f"{name:>24}" for name in names))
    rows = [("per unit: sandbox create/exec/rm", "unit"), ("per unit: raw run --rm true", "raw run"),
            ("per step: Sandbox.exec true", "step"), ("per step: raw exec bash -c true", "raw exec")]
    for label, key in rows:
        cells = [f"{statistics.median(r[key]) * 1e3:.1f} ({min(r[key]) * 1e3:.0f}-{max(r[key]) * 1e3:.0f})"
                 for r in results.values()]
        print(f"{label:32}" + "".join(f"{c:>24}" for c in cells))
    for label, num, den in (("ratio unit / raw run", "unit", "raw run"), ("ratio step / raw exec", "step", "raw exec")):
        cells = [f"{statistics.median(r[num]) / statistics.median(r[den]):.2f}" for r in results.values()]
        print(f"{label:32}" + "".join(f"{c:>24}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", default="docker,podman",
                        help="comma-separated providers to measure (default docker,podman)")
    parser.add_argument("--n", type=int, default=20, help="repetitions of each (default 20)")
    parser.add_argument("--image", default=None, help="image tag (default: the base image)")
    args = parser.parse_args()
    results = {}
    for name in [p.strip() for p in args.provider.split(",") if p.strip()]:
        provider = connect(name)
        image = ensure_base_image(provider, args.image or base_image_tag())
        results[name] = measure(provider, image, args.n)
    print(f"image {args.image or base_image_tag()}, n={args.n} each, each pair interleaved")
    report(results)


if __name__ == "__main__":
    main()
