"""View costs: the L2 translator's throughput against a `str.replace` loop, and view build
times per level against libcst parsing alone, on the largest built-in repository (or --repo,
or --instance), each the median of --repeat runs measured in the same process.

Usage: python bench/views.py [--repeat 3] [--seed 0] [--repo PATH | --instance ID [--tasks FILE]]
"""
from __future__ import annotations

import argparse
import ast
import random
import re
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import libcst

from raydist.tasks import load_instances
from raydist.views import Prepared, RepoFiles, ViewOptions, build_view
from raydist.views.l2.namespace import namespace_mapping, repository_identity
from raydist.views.l2.translator import NamespaceTranslator
from raydist.views.l4.prepare import rewrite_targets
from raydist.views.l4.rewrite import rewrite_function_source

BUILTIN = Path(__file__).resolve().parents[1] / "raydist" / "tasks" / "builtin" / "instances.jsonl"
CACHE = Path.home() / ".cache" / "raydist"


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- which repository ----------------------------------------------------------------------------

def repo_dir_of(instance) -> Path | None:
    """The host copy of ``instance``'s repository when its image exists, else None (never builds)."""
    from raydist.sandbox import SandboxUnavailable, connect, ensure_instance_image
    from raydist.sandbox.images import instance_tag

    if instance.recipe is None:
        return None
    try:
        client = connect().client
    except SandboxUnavailable:
        return None
    if not client.images.list(name=instance_tag(instance.recipe)):
        return None
    return ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id).repo_dir


def python_size(root: Path) -> tuple[int, int]:
    """(number of .py files, their total bytes)."""
    repo = RepoFiles(root)
    paths = repo.python_files()
    return len(paths), sum((root / p).stat().st_size for p in paths)


def largest_builtin():
    """(instance, repo_dir) of the built-in repository with the most .py bytes whose image exists."""
    found = [(i, d) for i in load_instances(str(BUILTIN)) if (d := repo_dir_of(i)) is not None]
    if not found:
        sys.exit("no built-in instance image exists; build them with `bash launch/setup.sh`, or pass --repo PATH")
    return max(found, key=lambda pair: python_size(pair[1])[1])


def pick(args):
    if args.repo:
        root = Path(args.repo).resolve()
        stand_in = SimpleNamespace(instance_id=root.name, repo=root.name, patch="", test_patch="",
                                   problem_statement="")
        return stand_in, root
    if args.instance:
        instance = load_instances(args.tasks, ids=[args.instance])[0]
        root = repo_dir_of(instance)
        if root is None:
            print(f"skipped: no image of {args.instance} in the Docker daemon (or no daemon); nothing measured")
            sys.exit(0)
        return instance, root
    return largest_builtin()


# --- the texts -----------------------------------------------------------------------------------

def functions_of(repo: RepoFiles) -> list[tuple[str, str, int, str]]:
    """(path, function name, line, first source line) of every module-level def that parses."""
    out = []
    for path in repo.python_files():
        text = repo.read(path) or ""
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines()
        out += [(path, n.name, n.lineno, lines[n.lineno - 1].strip()) for n in tree.body
                if isinstance(n, ast.FunctionDef)]
    return out


def pytest_output(functions) -> str:
    """A pytest -rA style log: one PASSED line per test function, one traceback frame per function."""
    tests = [f"PASSED {p}::{name}" for p, name, _, _ in functions if name.startswith("test")]
    frames = [f'  File "/testbed/{p}", line {line}, in {name}\n    {src}' for p, name, line, src in functions]
    return "\n".join(["=" * 30 + " test session starts " + "=" * 30, "rootdir: /testbed", *tests,
                      "Traceback (most recent call last):", *frames, "AssertionError: assert 1 == 2",
                      *[f"FAILED {p}::{name} - AssertionError" for p, name, _, _ in functions[:1]], ""])


def observation_corpus(repo: RepoFiles, functions) -> str:
    """Every .py file as `cat` prints it, then a pytest log over the same repository."""
    return "".join(repo.read(p) or "" for p in repo.python_files()) + pytest_output(functions)


def command_corpus(translator: NamespaceTranslator, paths: list[str]) -> list[str]:
    """One command per virtual name, in the shapes agents type (grep, sed, python -c, heredoc)."""
    rng = random.Random(0)
    shapes = ["grep -rn '{v}' {p} | head -n 20", "sed -n '{a},{b}p' {p}",
              "python -c 'from {m} import {v}; print({v})'", "cat <<'EOF' > probe.py\nfrom {m} import {v}\n{v}()\nEOF"]
    commands = []
    for i, virtual in enumerate(sorted(translator.mapping.backward)):
        path = translator.to_view(rng.choice(paths))
        module = path[:-3].replace("/", ".")
        a = rng.randint(1, 300)
        commands.append(shapes[i % len(shapes)].format(v=virtual, p=path, m=module, a=a, b=a + 40))
    return commands


def substring_hit(text: str, names) -> str:
    """A name of ``text`` that stands inside a longer identifier, as ``name in token``, or "none"."""
    for token in sorted(set(re.findall(r"[A-Za-z0-9_]+", text)) - set(names)):
        inside = [n for n in names if n in token]
        if inside:
            return f"`{max(inside, key=len)}` in `{token}`"
    return "none"


def replace_loop(text: str, pairs: list[tuple[str, str]]) -> str:
    """The baseline: plain substring replacement, name by name (longest first)."""
    for old, new in pairs:
        text = text.replace(old, new)
    return text


# --- measurements --------------------------------------------------------------------------------

def print_translator(translator: NamespaceTranslator, corpus: str, commands: list[str], repeat: int) -> None:
    """Measure and print to_view / to_original throughput beside the str.replace loop."""
    forward = sorted(translator.mapping.forward.items(), key=lambda kv: -len(kv[0]))
    backward = sorted(translator.mapping.backward.items(), key=lambda kv: -len(kv[0]))
    mb_text, mb_cmds = len(corpus.encode()) / 1e6, len("\n".join(commands).encode()) / 1e6
    translator.to_view(corpus)  # warm-up, so no measured run pays a one-time cost
    view_s = median_seconds(lambda: translator.to_view(corpus), repeat)
    view_base = median_seconds(lambda: replace_loop(corpus, forward), repeat)
    orig_s = median_seconds(lambda: [translator.to_original(c) for c in commands], repeat)
    orig_base = median_seconds(lambda: [replace_loop(c, backward) for c in commands], repeat)
    rows = [("to_view, observations", mb_text / view_s, mb_text / view_base),
            ("to_original, commands", mb_cmds / orig_s, mb_cmds / orig_base)]
    wrong_lines = sum(a != b for a, b in zip(translator.to_view(corpus).splitlines(),
                                             replace_loop(corpus, forward).splitlines()))
    wrong_cmds = sum(translator.to_original(c) != replace_loop(c, backward) for c in commands)
    print(f"\ntranslator: observations {mb_text:.2f} MB (.py files + pytest log), {len(commands)} commands "
          f"({mb_cmds * 1e3:.1f} kB)")
    print(f"{'':28}{'raydist MB/s':>14}{'str.replace MB/s':>18}{'ratio':>8}")
    for label, ours, base in rows:
        print(f"{label:28}{ours:14.2f}{base:18.2f}{ours / base:8.2f}")
    print(f"the str.replace loop is not a correct translator: it rewrites names inside longer identifiers\n"
          f"  (e.g. {substring_hit(corpus, translator.mapping.forward)}); its output differs from to_view on "
          f"{wrong_lines} of {corpus.count(chr(10))} lines\n  and from to_original on {wrong_cmds} of "
          f"{len(commands)} commands")


def l4_row(instance, repo: RepoFiles, seed: int, repeat: int):
    """(label, seconds or None): the deterministic L4 rewrite of the functions around the gold
    patch (what preparation computes before its test gate, which runs tests in Docker and is
    not timed here)."""
    targets = rewrite_targets(instance, repo)
    label = f"L4 rewrite, {len(targets)} gold fn (test gate not timed)"
    if not targets:
        return label, None
    texts = {p: repo.read(p) for p, _ in targets}
    return label, median_seconds(lambda: [rewrite_function_source(texts[p], q, seed) for p, q in targets], repeat)


def full_row(instance, repo: RepoFiles, seed: int, repeat: int):
    """(label, seconds): ``build_view(full)`` from prepared records (canonical statement,
    deterministic rewrites), i.e. L2 + L3 + L4 presentation without LLM or Docker."""
    files = {}
    for path, qualname in rewrite_targets(instance, repo):
        files[path] = rewrite_function_source(files.get(path) or repo.read(path), qualname, seed)
    prepared = Prepared(statement=instance.problem_statement, statement_source="canonical",
                        rewrites=files, rewrite_meta={})
    return "full from prepared records", median_seconds(
        lambda: build_view(instance, repo, "full", seed, None, prepared), repeat)


def print_builds(instance, root: Path, seed: int, repeat: int) -> None:
    """Measure and print view build times per level beside parsing every .py file with libcst."""
    repo = RepoFiles(root)
    sources = [repo.read(p) or "" for p in repo.python_files()]
    identity = repository_identity(instance)
    every = ViewOptions(l3_files="all")
    base = median_seconds(lambda: [libcst.parse_module(s) for s in sources], repeat)
    rows = [("libcst.parse_module, every .py (baseline)", base),
            ("namespace_mapping alone", median_seconds(lambda: namespace_mapping(repo, identity, seed), repeat))]
    for label, level, options in (("L0", "L0", None), ("L2", "L2", None), ("L3, gold-patch files", "L3", None),
                                  ("L3, every .py file", "L3", every)):
        rows.append((label, median_seconds(
            lambda level=level, options=options: build_view(instance, repo, level, seed, options), repeat)))
    rows.append(l4_row(instance, repo, seed, repeat))
    rows.append(full_row(instance, repo, seed, repeat))
    print(f"\nview build of {instance.instance_id}")
    print(f"{'':52}{'ms':>10}{'x libcst':>10}")
    for label, seconds in rows:
        shown = f"{'n/a':>10}" if seconds is None else f"{seconds * 1e3:10.1f}{seconds / base:10.3f}"
        print(f"{label:52}{shown}")


# --- output --------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per measurement, the median is shown (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="view seed (default 0)")
    parser.add_argument("--repo",
                        help="bench this repository folder instead (no gold patch: L3 gold files and L4 empty)")
    parser.add_argument("--instance", help="bench this instance's repository, when its image exists")
    parser.add_argument("--tasks", default=str(BUILTIN),
                        help="instances file for --instance (e.g. ../shared/data/swebench/offline.jsonl)")
    args = parser.parse_args()
    instance, root = pick(args)
    repo = RepoFiles(root)
    n_files, n_bytes = python_size(root)
    translator = NamespaceTranslator(namespace_mapping(repo, repository_identity(instance), args.seed))
    print(f"{instance.instance_id}: {root}, {n_files} .py files, {n_bytes / 1e6:.2f} MB; "
          f"{len(translator.mapping.forward)} names; seed {args.seed}; median of {args.repeat}")
    corpus = observation_corpus(repo, functions_of(repo))
    print_translator(translator, corpus, command_corpus(translator, repo.python_files()), args.repeat)
    print_builds(instance, root, args.seed, args.repeat)


if __name__ == "__main__":
    main()
