"""Words that are Python's, the shell's, test output's or plain English, never one repository's.

L2 never remaps them (``raydist.views.l2.names``) and the exposure audit never counts them as
the repository's identity (``raydist.views.audit``, SchrodingerRepo §III-C, §III-F), so both
read the same tables from here. Also here: how an identifier splits into subwords, and which
top-level import names a repository's paths provide.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import keyword
import re
import sys
import types
from collections.abc import Iterable
from pathlib import PurePosixPath

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STDLIB = frozenset(sys.stdlib_module_names)
BUILTINS = frozenset(dir(builtins))
KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
#: The shell's vocabulary: command names and bash reserved words. No virtual word takes one, and
#: no repository name that is one is remapped, so translation in either direction leaves every
#: command head and keyword of a command line (``... | tail -n 3``, ``then ... fi``) as typed.
COMMAND_WORDS = frozenset("""
awk bash base64 cat cd chmod cp curl cut diff du echo env find git grep gunzip gzip head kill less ln ls
make mkdir more mv nano patch perl pip pip3 printf ps pwd python python3 pytest rg rm rmdir sed
seq sh sleep sort stat sudo tail tar tee test timeout touch tox tr true false uniq vi vim wc wget which
xargs yes zip
case coproc do done elif else esac fi for function if in select then time until while
""".split())
#: Words of the fixed framing of Python tracebacks and pytest reports. A repository name that
#: is one of them stays visible: renaming it would garble every traceback header ("most recent
#: call last") and test summary the agent reads, and the word says little about the repository.
OUTPUT_WORDS = frozenset("""
Traceback most recent call last File line module During handling above exception another occurred
direct cause following assert where passed failed error errors skipped xfailed xpassed warnings
deselected seconds collected items session starts short summary info platform rootdir plugins
configfile cachedir FAILED PASSED ERROR SKIPPED XFAIL XPASS
""".split())
#: Common English and programming words. A repository name that is one of them is not an
#: identity token (``raydist.views.audit``) and L2 does not remap it: it says little about the project, and renaming it
#: would garble every sentence it stands in ("the docs say", "the first line").
GENERIC_WORDS = frozenset("""
about above abstract accumulate complement flip fold frequencies identity iterate keywords partition raises access
accessor action actions active adapter add added adding address after again against
algorithm alias aliases align all allow alpha also alternative always analysis and annotations another answer any
api app append application apply arg args argument arguments array arrays ascii assert asserts async attr attribute
attributes auth author auto available back backend backends background bad bar base basic batch before begin below
benchmark benchmarks best beta better between big binary bind bits block blocks body bool boolean both bottom bound
bounds box branch break buffer bug build builder builtin bytes cache cached calc call callable callback called calls
can cancel capture case cases cast catch cell change changed changes char character characters chars check checker
checks child children choice choices chunk chunks class classes clean clear cli client clone close code codec codes
collection collections color column columns combine command commands comment comments common compare compat
compatibility compile complete complex component compose compute concat condition config configuration connect
connection console const constant constants construct container contains content contents context contrib control
convert converter copy core count counter create current cursor custom data database date datetime debug decimal
decode decorator decorators default defaults define delete delta demo depth description detail details dict
dictionary diff digit digits dir directory disable display dist doc docs document documentation does done double
down draft draw drop dump dumps each edit element elements else empty enable encode encoding end engine entries entry
env environment equal error errors event events example examples except exception exceptions exec execute exists exit
expand expected export expr expression ext extend extension extensions extra extract factory fail failure fake false
feature features field fields file filename files fill filter filters final find first fix fixed flag flags float
flush fmt folder font for force form format formats formatter forward frame free from front full func function
functions future general generate generator generic get getter global globals graph group groups handle handler
handlers hash head header headers height hello help helper helpers hidden history hook hooks host html http icon
index info init inner input insert inspect install instance int integer interface internal interval introduction
invalid item items iter iterator join json just keep key keys kind label last layout lazy left legacy length level
lib library limit line lines link list listen load loader local lock log logger logging long look lookup loop low
lower main make manager many map mapping mark match matches math max maximum memory merge message messages meta
method methods middle min minimum misc missing mixin mode model models modify module modules more move multi name
named names native need nested new next node nodes none normal normalize not note null num number numbers object
objects offset old one only open operator operators option optional options order other out outer output over
override package packages page pair pairs parallel param params parent parse parser part partial parts pass patch
path paths pattern peek pipe platform plot plugin plugins point pointer pool pop port position post pre prefix
previous print private process product profile program project property protocol proxy public push put python
query queue quick quote random range raw read reader readme real record records recipes reduce ref reference
register registry release reload remove render repeat replace report repr request require required reset resolve
resource response result results return reverse right root round row rows rule rules run runner runtime safe sample
sandbox save scan schema scope script search second section select self send sequence serial serialize server
service session set settings setup shape shared shell short show side sign signal signature signatures simple single
size skip slice small sort source space spec special split stack standard start state static stats status step
stop storage store str stream strict string strings strip struct style sub subset suffix sum super support swap
switch symbol sync system table tables tag tags take target task tasks template temp test testing tests text thread
threads time timer timeout title token tokens tool tools top total trace track transform tree true try tuple type
types unicode unique unit units unknown update upper url usage use user utils util utility utilities valid validate
value values var variable variables vector version versions view views visit visitor wait walk warn warning
warnings weight when where width window with word words worker wrap wrapper write writer yield zero
""".split())
SUBWORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_NO_IMPORT = frozenset({"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data"})


def split_subwords(name: str) -> list[str]:
    """The subwords of ``name`` in order: letters split at ``_`` and case changes, digit runs apart."""
    return SUBWORD.findall(name)


def importable_roots(paths: Iterable[str]) -> frozenset[str]:
    """Top-level import names the repository provides: outermost packages and loose modules."""
    paths = list(paths)
    packages = {str(PurePosixPath(p).parent) for p in paths if p.endswith("/__init__.py") or p == "__init__.py"}
    roots = set()
    for path in paths:
        parts = PurePosixPath(path[:-3]).parts
        depth = len(parts) - 1
        while depth > 0 and "/".join(parts[:depth]) in packages:
            depth -= 1
        roots.add(parts[depth])
    return frozenset(r for r in roots if r.isidentifier())


def external_attributes(stdlib_modules: Iterable[str]) -> frozenset[str]:
    """Attribute names of builtin types and of the given standard-library modules and their classes."""
    names: set[str] = set()
    objects: list[object] = [obj for obj in vars(builtins).values() if inspect.isclass(obj)]
    objects += [types.FunctionType, types.BuiltinFunctionType, types.GeneratorType, types.ModuleType]
    for module_name in sorted(set(stdlib_modules)):
        if module_name.split(".")[0] in _NO_IMPORT:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception:  # a platform-specific module may fail to import; it has no attributes to add
            continue
        objects.append(module)
        objects += [v for v in vars(module).values() if inspect.isclass(v)]
    for obj in objects:
        names.update(dir(obj))
    return frozenset(names)
