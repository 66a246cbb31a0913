"""L3 keeps behaviour: definitions that are not known to be order-free keep their order.

SchrodingerRepo §III-D reorders definitions "while preserving repository behavior". Each
case below is a small module whose behaviour depends on definition order (a registry,
``functools.singledispatch``, ``atexit``, a metaclass, ``__init_subclass__``, a class body
with calls, pytest fixtures and tests, click commands...). For every case, over many seeds:

* the exact set of layouts L3 produces is the set of orders that keep every pinned
  definition in its relative order, keep blocks (overloads, property accessors) whole,
  respect the name dependencies and never cross a module-level statement: so pinned
  definitions never move relative to each other *and* order-free ones still move;
* the reordered module, imported in a fresh interpreter, behaves exactly like the original
  (same registry contents, same order, same output).
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from raydist.views.l3.reorder import pinned_definitions, reorder_source

SEEDS_PER_LAYOUT = 12
"""Seeds drawn per allowed layout: a uniform sampler misses one of n with odds below n * e**-12."""
BEHAVIOUR_SEEDS = range(12)


@dataclass(frozen=True)
class Case:
    source: str
    pinned: list[tuple[str, str]]
    """Exactly what ``pinned_definitions`` must report."""
    before: list[tuple[str, str]]
    """Name dependencies ``(a, b)``: ``a`` stays before ``b`` (same scope)."""
    probe: str
    """Code run after importing the module; ``RESULT`` is printed as JSON."""
    result: object
    """``RESULT`` of the original module (so the probe itself is checked)."""
    scopes: tuple[str, ...] = ("",)
    """Bodies whose layout is checked: ``""`` is the module, else a top-level class name."""


def layout(source: str, scope: str) -> tuple[str, ...]:
    """The statements of one body: definition names (a block's repeated name collapsed), other
    statements as ``|`` plus their code."""
    body = ast.parse(source).body
    if scope:
        body = next(s for s in body if isinstance(s, ast.ClassDef) and s.name == scope).body
    tokens: list[str] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not tokens or tokens[-1] != stmt.name:
                tokens.append(stmt.name)
        else:
            tokens.append("|" + ast.unparse(stmt).splitlines()[0])
    return tuple(tokens)


def allowed_layouts(original: tuple[str, ...], pinned: set[str], before: list[tuple[str, str]]) -> set[tuple[str, ...]]:
    """Every layout that keeps anchors in place and pinned names and ``before`` pairs in order."""
    runs: list[list[tuple[str, ...]]] = []
    for is_anchor, group in itertools.groupby(original, key=lambda t: t.startswith("|")):
        items = tuple(group)
        if is_anchor:
            runs.append([items])
            continue
        keep = [t for t in items if t in pinned]
        options = []
        for perm in itertools.permutations(items):
            pos = {t: i for i, t in enumerate(perm)}
            if [t for t in perm if t in pinned] == keep and all(
                pos[a] < pos[b] for a, b in before if a in pos and b in pos
            ):
                options.append(perm)
        runs.append(options)
    return {tuple(itertools.chain.from_iterable(choice)) for choice in itertools.product(*runs)}


def check_layouts(case: Case) -> None:
    source = textwrap.dedent(case.source)
    assert pinned_definitions(source) == case.pinned
    for scope in case.scopes:
        prefix = f"{scope}." if scope else ""
        pinned = {name[len(prefix):] for name, _ in case.pinned
                  if name.startswith(prefix) and "." not in name[len(prefix):]}
        original = layout(source, scope)
        expected = allowed_layouts(original, pinned, case.before)
        seeds = range(SEEDS_PER_LAYOUT * len(expected))
        seen = {layout(reorder_source(source, random.Random(seed)), scope) for seed in seeds}
        assert len(expected) > 1, f"case gives L3 nothing to move in {scope or 'the module'}"
        assert seen == expected, f"{scope or 'module'}: missing {expected - seen}, forbidden {seen - expected}"


RUNNER = textwrap.dedent(
    """\
    import importlib, json, sys
    sys.path.insert(0, sys.argv[1])
    module = importlib.import_module(sys.argv[2])
    scope = dict(vars(module))
    exec(sys.argv[3], scope)
    print("RESULT=" + json.dumps(scope["RESULT"], default=repr), flush=True)
    """
)


def run_module(directory: Path, name: str, source: str, probe: str) -> str:
    (directory / f"{name}.py").write_text(source)
    cmd = [sys.executable, "-c", RUNNER, str(directory), name, probe]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=directory, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def check_behaviour(case: Case, tmp_path: Path) -> None:
    source = textwrap.dedent(case.source)
    variants = {reorder_source(source, random.Random(seed)) for seed in BEHAVIOUR_SEEDS} - {source}
    assert variants, "no seed reorders the module"
    original = run_module(tmp_path, "original_module", source, case.probe)
    result = next(line for line in original.splitlines() if line.startswith("RESULT="))
    assert json.loads(result[len("RESULT="):]) == case.result
    for i, variant in enumerate(sorted(variants)):
        assert run_module(tmp_path, f"variant_{i}", variant, case.probe) == original, variant


SINGLEDISPATCH = Case(
    source='''
    import functools


    @functools.singledispatch
    def process(x):
        return "object"


    def helper_a():
        return 1


    @process.register
    def _int(x: int):
        return "int-first"


    @process.register(int)
    def _int_again(x):
        return "int-second"


    @process.register(float)
    def _float(x):
        return "float"


    class Free:
        pass
    ''',
    pinned=[("_int", "decorator: process.register"), ("_int_again", "decorator: process.register"),
            ("_float", "decorator: process.register")],
    before=[("process", "_int"), ("process", "_int_again"), ("process", "_float")],
    probe="RESULT = [process(1), process(1.0), process('s'), [t.__name__ for t in process.registry]]",
    result=["int-second", "float", "object", ["object", "int", "float"]],
)

REGISTRY = Case(
    source='''
    def register(f):
        REGISTRY.append(f.__name__)
        return f


    REGISTRY = []


    def register_as(name):
        def decorator(f):
            REGISTRY.append(name)
            return f
        return decorator


    __all__ = ["REGISTRY"]


    @register
    def first():
        pass


    def plain_a():
        pass


    @register_as("second")
    def second():
        pass


    @register
    class Third:
        pass


    class Plain:
        pass


    @register
    def fourth():
        pass
    ''',
    pinned=[("first", "decorator: register"), ("second", "decorator: register_as"),
            ("Third", "decorator: register"), ("fourth", "decorator: register")],
    before=[],
    probe="RESULT = REGISTRY",
    result=["first", "second", "Third", "fourth"],
)

ROUTES = Case(
    source='''
    class App:
        def __init__(self):
            self.rules = []

        def route(self, rule, **options):
            def decorator(f):
                self.rules.append([rule, options.get("methods", ["GET"]), f.__name__])
                return f
            return decorator


    app = App()


    @app.route("/")
    def index():
        return "index"


    def util():
        return 0


    @app.route("/item/<id>", methods=["GET", "POST"])
    def item(id):
        return id


    @app.route("/")
    def index_shadowed():
        return "never reached"
    ''',
    pinned=[("index", "decorator: app.route"), ("item", "decorator: app.route"),
            ("index_shadowed", "decorator: app.route")],
    before=[],
    probe="RESULT = app.rules",
    result=[["/", ["GET"], "index"], ["/item/<id>", ["GET", "POST"], "item"], ["/", ["GET"], "index_shadowed"]],
)

ATEXIT = Case(
    source='''
    import atexit


    @atexit.register
    def bye_first():
        print("first handler")


    def plain():
        pass


    @atexit.register
    def bye_second():
        print("second handler")


    class Free:
        pass
    ''',
    pinned=[("bye_first", "decorator: atexit.register"), ("bye_second", "decorator: atexit.register")],
    before=[],
    probe="RESULT = 'imported'",
    result="imported",
)

INIT_SUBCLASS = Case(
    source='''
    class Plugin:
        registry = []

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            Plugin.registry.append(cls.__name__)


    class Zeta(Plugin):
        pass


    class Free:
        pass


    class Alpha(Plugin):
        pass


    def helper():
        pass
    ''',
    pinned=[("Zeta", "base_hook: Plugin"), ("Alpha", "base_hook: Plugin")],
    before=[("Plugin", "Zeta"), ("Plugin", "Alpha")],
    probe="RESULT = Plugin.registry",
    result=["Zeta", "Alpha"],
)

METACLASS = Case(
    source='''
    class Registry(type):
        seen = []

        def __new__(mcs, name, bases, namespace):
            Registry.seen.append([name, [k for k in namespace if not k.startswith("__")]])
            return super().__new__(mcs, name, bases, namespace)

        def plain(cls):
            return cls

        def other(cls):
            return cls


    class First(metaclass=Registry):
        def beta(self):
            pass

        def alpha(self):
            pass


    def helper():
        pass


    class Second(First):
        def gamma(self):
            pass

        def delta(self):
            pass
    ''',
    pinned=[("First", "metaclass: Registry"), ("First.beta", "metaclass_namespace: Registry"),
            ("First.alpha", "metaclass_namespace: Registry"), ("Second", "base_hook: First"),
            ("Second.gamma", "metaclass_namespace: Registry"), ("Second.delta", "metaclass_namespace: Registry")],
    before=[("Registry", "First"), ("First", "Second")],
    probe="RESULT = Registry.seen",
    result=[["First", ["beta", "alpha"]], ["Second", ["gamma", "delta"]]],
    scopes=("", "Registry"),
)

CLASS_BODY = Case(
    source='''
    LOG = []


    class Loud:
        LOG.append("Loud")


    def plain():
        pass


    class Louder:
        print("Louder created")
        LOG.append("Louder")


    class Quiet:
        x = 1
        name: str = "q"
    ''',
    pinned=[("Loud", "class_body: call: LOG.append"), ("Louder", "class_body: call: print")],
    before=[],
    probe="RESULT = LOG",
    result=["Loud", "Louder"],
)

PROPERTY = Case(
    source='''
    import functools


    class Temperature:
        def describe(self):
            return "t"

        @property
        def celsius(self):
            return self._c

        @celsius.setter
        def celsius(self, value):
            self._c = value

        @celsius.deleter
        def celsius(self):
            del self._c

        @functools.lru_cache(maxsize=8)
        def cached(self):
            return 1

        @staticmethod
        def unit():
            return "C"
    ''',
    pinned=[],
    before=[],
    probe=(
        "t = Temperature(); t.celsius = 5; got = t.celsius; del t.celsius\n"
        "RESULT = [got, hasattr(t, '_c'), t.cached(), Temperature.unit(), t.describe()]"
    ),
    result=[5, False, 1, "C", "t"],
    scopes=("Temperature",),
)

OVERLOADS = Case(
    source='''
    from typing import final, get_overloads, overload


    @overload
    def parse(x: int) -> int: ...


    @overload
    def parse(x: str) -> str: ...


    def parse(x):
        return x


    def other():
        return 1


    @final
    def sealed():
        return 2
    ''',
    pinned=[],
    before=[],
    probe="RESULT = [[f.__annotations__['x'].__name__ for f in get_overloads(parse)], parse(3), sealed()]",
    result=[["int", "str"], 3, 2],
)

DATACLASS = Case(
    source='''
    import dataclasses
    from dataclasses import dataclass, field


    @dataclass(frozen=True)
    class Point:
        x: int

        def norm(self):
            return abs(self.x) + abs(self.y)

        y: int = 0

        def shifted(self):
            return Point(self.x + 1, self.y)

        def scaled(self):
            return Point(self.x * 2, self.y * 2)

        tags: tuple = field(default=())


    def origin():
        return Point(0)
    ''',
    pinned=[],
    before=[],
    probe=("RESULT = [[f.name for f in dataclasses.fields(Point)], Point(1, 2).shifted().scaled().norm(), "
           "repr(origin())]"),
    result=[["x", "y", "tags"], 8, "Point(x=0, y=0, tags=())"],
    scopes=("", "Point"),
)

MODULE_STATEMENTS = Case(
    source='''
    HANDLERS = []


    def on_start():
        return "start"


    HANDLERS.append(on_start)


    def on_stop():
        return "stop"


    def unused():
        return None


    HANDLERS.append(on_stop)


    def later():
        return len(HANDLERS)
    ''',
    pinned=[],
    before=[],
    probe="RESULT = [h() for h in HANDLERS] + [later()]",
    result=["start", "stop", 2],
)

DECORATOR_ARGUMENTS = Case(
    source='''
    import functools

    CALLS = []


    def compute_size(tag):
        CALLS.append(tag)
        return 4


    @functools.lru_cache(maxsize=compute_size("sized"))
    def sized():
        return 1


    @functools.lru_cache(maxsize=2)
    def small():
        return 2


    def with_default(x=compute_size("default")):
        return x


    @functools.cache
    def cached():
        return 3
    ''',
    pinned=[("sized", "call: compute_size"), ("with_default", "call: compute_size")],
    before=[("compute_size", "sized"), ("compute_size", "with_default")],
    probe="RESULT = [CALLS, sized(), small(), with_default(), cached(), sized.cache_info().maxsize]",
    result=[["sized", "default"], 1, 2, 4, 3, 4],
)

CLICK = Case(
    source='''
    import click


    @click.group()
    def cli():
        pass


    @cli.command()
    def zeta():
        pass


    def helper():
        return 1


    @cli.command()
    @click.option("--n", default=1)
    def alpha(n):
        pass


    class Free:
        pass
    ''',
    pinned=[("cli", "decorator: click.group"), ("zeta", "decorator: cli.command"), ("alpha", "decorator: cli.command")],
    before=[("cli", "zeta"), ("cli", "alpha")],
    probe="RESULT = list(cli.commands)",
    result=["zeta", "alpha"],
)

CASES = {
    "singledispatch": SINGLEDISPATCH, "registry": REGISTRY, "routes": ROUTES, "atexit": ATEXIT,
    "init_subclass": INIT_SUBCLASS, "metaclass": METACLASS, "class_body": CLASS_BODY, "property": PROPERTY,
    "overloads": OVERLOADS, "dataclass": DATACLASS, "module_statements": MODULE_STATEMENTS,
    "decorator_arguments": DECORATOR_ARGUMENTS, "click": CLICK,
}


@pytest.mark.parametrize("name", CASES)
def test_pinned_definitions_keep_their_order_and_free_ones_move(name):
    check_layouts(CASES[name])


@pytest.mark.parametrize("name", CASES)
def test_reordered_module_behaves_like_the_original(name, tmp_path):
    check_behaviour(CASES[name], tmp_path)


def test_atexit_handlers_run_in_the_same_order(tmp_path):
    source = textwrap.dedent(ATEXIT.source)
    out = run_module(tmp_path, "original_module", source, ATEXIT.probe)
    assert out == 'RESULT="imported"\nsecond handler\nfirst handler\n'


def test_property_accessors_stay_together_getter_first():
    source = textwrap.dedent(PROPERTY.source)
    for seed in range(200):
        lines = [line.strip() for line in reorder_source(source, random.Random(seed)).splitlines()]
        at = lines.index("@property")
        assert lines[at:at + 9:4] == ["@property", "@celsius.setter", "@celsius.deleter"]


PYTEST_MODULE = '''
import pytest

ORDER = []


@pytest.fixture(autouse=True)
def zeta_setup():
    ORDER.append("zeta")
    yield


def helper():
    return 1


@pytest.fixture(autouse=True)
def alpha_setup():
    ORDER.append("alpha")
    yield


def test_defined_first():
    ORDER.append("t1")


class Free:
    pass


def test_defined_second():
    ORDER.append("t2")


def test_report():
    print("ORDER=" + ",".join(ORDER))
'''


def test_pytest_fixtures_and_tests_keep_their_order():
    check_layouts(Case(
        source=PYTEST_MODULE,
        pinned=[("zeta_setup", "decorator: pytest.fixture"), ("alpha_setup", "decorator: pytest.fixture"),
                ("test_defined_first", "pytest_order"), ("test_defined_second", "pytest_order"),
                ("test_report", "pytest_order")],
        before=[], probe="", result=None,
    ))


def pytest_run(directory: Path, source: str) -> list[str]:
    (directory / "test_order_sensitive.py").write_text(source)
    (directory / "pytest.ini").write_text("[pytest]\n")
    cmd = [sys.executable, "-m", "pytest", "-v", "-s", "-p", "no:cacheprovider", "test_order_sensitive.py"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # the venv's plugins cost seconds per run
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=directory, env=env, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line or line.startswith("ORDER=")]


def test_pytest_runs_the_reordered_module_in_the_same_order(tmp_path):
    original = pytest_run(tmp_path, PYTEST_MODULE)
    assert [line.split(" ")[0] for line in original] == [
        "test_order_sensitive.py::test_defined_first", "test_order_sensitive.py::test_defined_second",
        "test_order_sensitive.py::test_report",
    ]
    assert "ORDER=alpha,zeta,t1,alpha,zeta,t2,alpha,zeta" in original[-1]
    variants = {reorder_source(PYTEST_MODULE, random.Random(seed)) for seed in range(6)} - {PYTEST_MODULE}
    assert variants
    for variant in sorted(variants):
        assert pytest_run(tmp_path, variant) == original, variant
