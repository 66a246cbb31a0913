"""Sandbox overhead, interleaved so drift hits both sides alike, N repetitions each:

- per unit: raydist's Sandbox (create -> exec `true` -> remove) against a plain
  `docker run --rm <image> true`;
- per step: `Sandbox.exec("true")` (time limit, process-group sweep, output file, and a trailer
  with the end marker and the exit status: ``raydist.sandbox.command``; exec_create +
  exec_start) against a raw `docker exec` of `bash -c true` through the same Docker SDK client
  (exec_create + exec_start + exec_inspect), in one running container.

Usage: python bench/sandbox_overhead.py [--n 20] [--image TAG]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from raydist.sandbox import as_provider, base_image_tag, connect, ensure_base_image


def time_sandbox(client, image: str) -> float:
    start = time.perf_counter()
    with as_provider(client).create(image, name="bench") as box:
        result = box.exec("true", timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"`true` failed in the sandbox: {result.output}")
    return time.perf_counter() - start


def time_docker_run(image: str) -> float:
    start = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                   capture_output=True)
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
        raise RuntimeError(f"raw docker exec of `true` exited {code}")
    return time.perf_counter() - start


def report(title: str, rows: list[tuple[str, list[float]]]) -> None:
    print(title)
    print(f"{'':34}{'median ms':>10}{'min ms':>10}{'max ms':>10}")
    for label, xs in rows:
        print(f"{label:34}{statistics.median(xs) * 1e3:10.1f}{min(xs) * 1e3:10.1f}{max(xs) * 1e3:10.1f}")
    (_, first), (_, second) = rows
    print(f"ratio ({rows[0][0].strip()} / {rows[1][0].strip()}): "
          f"{statistics.median(first) / statistics.median(second):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="repetitions of each (default 20)")
    parser.add_argument("--image", default=None, help="image tag (default: the base image)")
    args = parser.parse_args()
    provider = connect()
    client = provider.client
    image = ensure_base_image(client, args.image or base_image_tag())
    sandbox, plain = [], []
    for _ in range(args.n):
        sandbox.append(time_sandbox(client, image))
        plain.append(time_docker_run(image))
    print(f"image {image}, n={args.n} each, interleaved")
    report("per unit", [("Sandbox create/exec/remove", sandbox), ("docker run --rm true", plain)])
    steps, raw = [], []
    with as_provider(client).create(image, name="bench-steps") as box:
        box.exec("true", timeout=30)  # warm: the log volume and the keep-alive exist
        for _ in range(args.n):
            steps.append(time_step(box))
            raw.append(time_raw_exec(client, box.container.id))
    report("per step (one running container)", [("Sandbox.exec true", steps), ("raw docker exec bash -c true", raw)])

if __name__ == "__main__":
    main()
