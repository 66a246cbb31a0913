"""Level 2: namespace mapping (SchrodingerRepo §III-C).

The agent sees the repository's own paths, modules and symbols under a seeded virtual
namespace while the physical repository keeps its names: the view writes no file
(``files`` stays empty, so every file, UTF-8 or not, is kept byte for byte), and the
translator carries everything across — commands to original names, observations and file
contents to virtual ones. The problem statement is shown translated, and ``render_file``
presents a file's text in virtual names, so a scripted agent that writes
``translator.to_original(render_file(p, t))`` writes ``t``.

What is remapped (``plan_names``): the internal identifiers of ``names.extract_names``,
plus every identity token of the repository (``raydist.views.audit.identity_tokens``: the
distribution and top-level package, the project URL's owner and name, the README title,
distinctive public names) that extraction left out for a reason that cannot change what
runs (a string that composes the name, an attribute whose object may be external), plus
the case variants of each remapped name (``Inflection`` beside ``inflection``). Since the
translator rewrites every text the agent is shown, README, docs and metadata prose that
names the project are renamed too. An identity token left unmapped (it is also a name of
the standard library, of an imported module, a keyword...) is written with its reason in
``meta["l2_unmapped"]``, which the exposure audit reports.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from raydist.views.audit import STRONG_KINDS, IdentitySet, identity_tokens
from raydist.views.base import IDENTITY, FileRenderer, Prepared, RepoFiles, View, ViewOptions
from raydist.views.contracts import contract_names, naming_contract
from raydist.views.instance import ViewInstance
from raydist.views.l2.mapping import NameMapping, build_mapping, with_case_variants
from raydist.views.l2.names import extract_names, is_reserved
from raydist.views.l2.translator import NamespaceTranslator
from raydist.views.vocabulary import BUILTINS, COMMAND_WORDS, KEYWORDS, STDLIB

#: Exclusions of ``extract_names`` that protect no running code: the physical repository keeps
#: its names, so remapping such a name only changes what the agent reads. An identity token
#: excluded for one of these reasons is remapped anyway.
SOFT_EXCLUSIONS = ("composed into the string token", "attribute of an object that may be external")


@dataclass(frozen=True)
class NamePlan:
    """What L2 remaps in one repository: ``names`` (before case variants), ``tokens`` (every
    identifier of the repository, which virtual words avoid), ``keep`` (names that must stay as
    written), ``unmapped`` (identity token -> why it stays), ``skipped`` (file -> why its names
    were not read, e.g. not UTF-8)."""

    names: frozenset[str]
    tokens: frozenset[str]
    keep: frozenset[str]
    unmapped: dict[str, str]
    skipped: dict[str, str]


def repository_identity(instance: ViewInstance) -> str:
    """What the mapping is seeded by besides the seed: the instance's ``repo`` (``owner/name``),
    else its ``instance_id``, so every task of one repository shares a namespace per seed."""
    return getattr(instance, "repo", None) or instance.instance_id


def plan_names(repo: RepoFiles, identity: IdentitySet, contract: frozenset[str] = frozenset()) -> NamePlan:
    """The names L2 remaps in ``repo`` given its ``identity`` (see the module doc). ``contract``:
    the instance's naming-contract names (``raydist.views.contracts``), which stay as written and
    which no virtual name may equal, so an agent's new name passes the translator unchanged."""
    found = extract_names(repo)
    names = set(found.internal)
    unmapped: dict[str, str] = {}
    for token in identity:
        if token in names:
            continue
        # A project called "six" is named by "six": for the strong kinds a common word is no reason.
        strong = identity.origins[token] in STRONG_KINDS
        hard = is_reserved(token, 3)
        if strong and hard is not None and hard.startswith("generic"):
            hard = None
        reason = found.excluded.get(token)
        if reason is not None and (reason.startswith(SOFT_EXCLUSIONS)
                                   or strong and reason.startswith(("generic", "too short"))):
            reason = None
        why = hard or reason
        if why:
            unmapped[token] = why
        else:
            names.add(token)
    for name in contract & names:
        unmapped.setdefault(name, "naming contract: the FAIL_TO_PASS tests call it by this name")
    names -= contract
    keep = (set(found.excluded) - names) | KEYWORDS | BUILTINS | STDLIB | COMMAND_WORDS | contract
    return NamePlan(names=frozenset(names), tokens=found.tokens | contract, keep=frozenset(keep), unmapped=unmapped,
                    skipped=dict(found.skipped))


def namespace_mapping(repo: RepoFiles, identity: str, seed: int, instance: ViewInstance | None = None,
                      tokens: IdentitySet | None = None) -> NameMapping:
    """The L2 bijection of ``repo``'s names for ``(identity, seed)``, case variants included.

    ``tokens`` is the repository's identity set (computed from ``repo`` and ``instance`` when
    not given). Raises ValueError when the mapping is not a bijection.
    """
    identity_set = tokens or identity_tokens(repo, instance)
    return _mapping(plan_names(repo, identity_set, _contract(instance, repo)), identity, seed, identity_set)


def _contract(instance: ViewInstance | None, repo: RepoFiles) -> frozenset[str]:
    """The naming-contract names of ``instance`` (none without FAIL_TO_PASS tests)."""
    if instance is None or not getattr(instance, "FAIL_TO_PASS", ()):
        return frozenset()
    return frozenset(contract_names([naming_contract(instance, repo)]))


def _mapping(plan: NamePlan, identity: str, seed: int, identity_set: IdentitySet) -> NameMapping:
    return with_case_variants(build_mapping(plan.names, plan.tokens, identity, seed), plan.keep, identity_set)


def namespace_level(view: View, instance: ViewInstance, repo: RepoFiles, seed: int, options: ViewOptions,
                    prepared: Prepared) -> View:
    """Apply L2 to ``view``: translate the statement, install the translator (§III-C, §III-F).

    Records in ``meta``: ``l2_names`` (remapped identifiers, case variants included),
    ``l2_subwords``, ``l2_remapped`` (the identity tokens remapped), ``l2_unmapped`` (identity
    token -> why L2 left it) and ``l2_skipped`` (file -> why its names were not read).
    Raises ValueError when an earlier level already installed a non-identity translator.
    """
    if view.translator is not IDENTITY:
        raise ValueError(f"L2: view already has translator {view.translator!r}; apply L2 once, first")
    identity = view.identity if isinstance(view.identity, IdentitySet) else identity_tokens(repo, instance)
    plan = plan_names(repo, identity, _contract(instance, repo))
    mapping = _mapping(plan, repository_identity(instance), seed, identity)
    translator = NamespaceTranslator(mapping)
    meta = {**view.meta, "l2_names": len(mapping.forward), "l2_subwords": len(mapping.subwords),
            "l2_remapped": sorted(t for t in identity if t in mapping.forward),
            "l2_unmapped": dict(sorted(plan.unmapped.items())), "l2_skipped": dict(sorted(plan.skipped.items()))}
    rendered = view.with_file_renderer(_renderer(translator))
    return replace(rendered, problem_statement=translator.to_view(view.problem_statement),
                   translator=translator, meta=meta)


def _renderer(translator: NamespaceTranslator) -> FileRenderer:
    def render(path: str, text: str) -> str:
        return translator.to_view(text)

    return render
