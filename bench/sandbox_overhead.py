"""Per-unit sandbox overhead: raydist's Sandbox (create -> exec `true` -> remove) against a
plain `docker run --rm <image> true`, N repetitions each, interleaved so drift hits both alike.

Usage: python bench/sandbox_overhead.py [--n 20] [--image TAG]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from raydist.sandbox import Sandbox, base_image_tag, connect, ensure_base_image


def time_sandbox(client, image: str) -> float:
    start = time.perf_counter()
    with Sandbox.create(client, image, name="bench") as box:
        result = box.exec("true", timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"`true` failed in the sandbox: {result.output}")
    return time.perf_counter() - start


def time_docker_run(image: str) -> float:
    start = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                   capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="repetitions of each (default 20)")
    parser.add_argument("--image", default=None, help="image tag (default: the base image)")
    args = parser.parse_args()
    client = connect()
    image = ensure_base_image(client, args.image or base_image_tag())
    sandbox, plain = [], []
    for _ in range(args.n):
        sandbox.append(time_sandbox(client, image))
        plain.append(time_docker_run(image))
    ms_sandbox, ms_plain = statistics.median(sandbox) * 1e3, statistics.median(plain) * 1e3
    print(f"image {image}, n={args.n} each, interleaved")
    print(f"{'':28}{'median ms':>10}{'min ms':>10}{'max ms':>10}")
    for label, xs in (("Sandbox create/exec/remove", sandbox), ("docker run --rm true", plain)):
        print(f"{label:28}{statistics.median(xs) * 1e3:10.1f}{min(xs) * 1e3:10.1f}{max(xs) * 1e3:10.1f}")
    print(f"ratio (Sandbox / docker run): {ms_sandbox / ms_plain:.2f}")


if __name__ == "__main__":
    main()
