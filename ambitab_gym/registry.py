"""Every named component of ``ambitab-gym``: one registry the commands, campaigns and help read.

* :class:`Component` - one entry: its kind, name, a lazy ``"module:attr"`` factory reference and
  a one-line description (plus the factory's fixed keyword arguments and what it needs).
* :data:`KINDS` - the kinds, in the order ``ambitab-gym list --components`` prints them:
  ``asker``, ``solver``, ``oracle``, ``oracle_policy``, ``strategy``, ``engine``, ``converter``,
  ``env``.
* :func:`components`, :func:`names`, :func:`get` - look entries up; an unknown name raises
  :class:`~ambitab_gym.errors.UnknownComponent` listing the valid ones.
* :func:`create` - build a component by name (askers, solvers, oracles also accept an import
  path ``module:callable``; ``llm:STRATEGY`` names an LLM asker).
* :func:`choices_help` - the names of a kind as the command-line help prints them.
* :func:`load_object` - import ``module:callable`` and instantiate it.

Why it cannot create import cycles: this module is a *leaf*. It imports nothing from the
package but :mod:`ambitab_gym.errors`, and refers to every component by a string that
:func:`importlib.import_module` resolves only when the component is used. Only the top of the
import graph imports it (the command line, the campaign engine, the package's ``__init__``);
no component module does, so "registry -> component" edges cannot close a loop.
``tests/test_architecture.py`` counts each reference below as an import edge of this module and
checks that the package's import graph stays acyclic.

Some names are *owned* by lower layers, which need the names themselves and may not import this
module: env ids (:data:`ambitab_gym.corpora.corpus.ENV_IDS`, which name resolution needs), SQL
engines (:data:`ambitab_gym.verify.engines.ENGINES`, which corpora open databases with), LLM
asker strategies and LLM-oracle access policies (next to their prompts), converters
(:data:`ambitab_gym.convert.builder.SOURCES`) and the leaky oracles
(:data:`ambitab_gym.oracles.leaky.LEAKY_ORACLES`). The registry lists them by reference to that
one table, so no name is written down twice.

Example:
    >>> from ambitab_gym import registry
    >>> registry.names("asker")
    ('none', 'full', 'full-adv', 'generic', 'schema-probe', 'restatement', 'llm:STRATEGY')
    >>> registry.get("solver", "dialogue-sql-blind").description
    'copies SQL found in the answers, else the default reading (ignores the answers)'
    >>> registry.create("asker", "full").__class__.__name__
    'FullAsker'
    >>> registry.get("oracle", "oracle-of-delphi")
    Traceback (most recent call last):
    ...
    ambitab_gym.errors.UnknownComponent: unknown oracle 'oracle-of-delphi'; use one of: deterministic, llm, leaky-sql-responder, generic-credit-matcher, schema-word-matcher (or an import path 'module:callable')
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ambitab_gym.errors import ConfigurationError, UnknownComponent, UsageError

__all__ = [
    "KINDS",
    "Component",
    "Kind",
    "choices_help",
    "components",
    "create",
    "get",
    "load_object",
    "names",
    "resolve",
]

Kind = Literal[
    "asker", "solver", "oracle", "oracle_policy", "strategy", "engine", "converter", "env"
]

#: Every kind, with the heading ``list --components`` prints.
KINDS: dict[str, str] = {
    "asker": "askers (--asker)",
    "solver": "solvers (--solver)",
    "oracle": "oracles (--oracle)",
    "oracle_policy": "LLM-oracle access policies (--oracle-policy)",
    "strategy": "LLM asker strategies (--asker llm:STRATEGY)",
    "engine": "SQL engines (manifest engine, AmbiTabEnv(engine=...))",
    "converter": "converters (build SOURCE)",
    "env": "env ids (gym.make, ENV_ID)",
}

#: Kinds whose names may also be an import path ``module:callable``.
_IMPORTABLE = frozenset({"asker", "solver", "oracle"})
_IMPORT_HINT = "(or an import path 'module:callable')"


def resolve(reference: str) -> Any:
    """The object a ``"module:attr"`` reference names (``attr`` may be dotted).

    Raises:
        ConfigurationError: when the module or attribute does not exist.

    >>> resolve("ambitab_gym.defaults:BUDGET_SLACK")
    3
    """
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"cannot import {reference!r}: {error}") from None
    return target


def _call(factory: Any, kwargs: Mapping[str, Any], context: Mapping[str, Any]) -> Any:
    """Call ``factory`` with ``kwargs`` plus the context values its signature accepts."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    chosen = {
        key: value
        for key, value in context.items()
        if value is not None and (key in parameters or (takes_any and key not in kwargs))
    }
    return factory(**{**chosen, **kwargs})


@dataclass(frozen=True)
class Component:
    """One registered component.

    Attributes:
        kind: one of :data:`KINDS`.
        name: the name users type (``full-adv``, ``duckdb``, ``AmbiTab-Bird-v0``).
        factory: ``"module:attr"`` of the class or function that makes it (resolved lazily).
        description: one line for ``--help`` and ``list --components``.
        kwargs: fixed keyword arguments of the factory (``{"fallback": "blind"}``).
        bind: factory parameter -> context key, where they differ (``{"client": "llm_client"}``).
        needs: context keys that must be given (``("llm_client",)``); a missing one is a
            :class:`~ambitab_gym.errors.UsageError`.
        parameter: for a pattern entry (``llm:STRATEGY``): the factory argument that receives
            what follows the prefix, checked against the names of ``parameter_kind``.
        parameter_kind: the kind whose names the parameter takes.
        tags: free labels (``probe``, ``leaky``, ``llm``, ``reference``).

    >>> entry = Component("solver", "interpretation",
    ...                   "ambitab_gym.policies.interpretation:InterpretationSolver", "reads")
    >>> entry.load().__name__
    'InterpretationSolver'
    """

    kind: str
    name: str
    factory: str
    description: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    bind: Mapping[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    parameter: str | None = None
    parameter_kind: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def prefix(self) -> str | None:
        """``llm:`` for the pattern ``llm:STRATEGY``; None for a plain name."""
        return self.name.split(":", 1)[0] + ":" if self.parameter else None

    def load(self) -> Any:
        """The factory object (imports its module)."""
        return resolve(self.factory)

    def create(self, argument: str | None = None, **context: Any) -> Any:
        """Make the component.

        Args:
            argument: the pattern's parameter (the strategy of ``llm:STRATEGY``).
            **context: what the caller can offer (``corpus``, ``llm_client``, options); each
                value is passed only when the factory takes it (``bind`` renames keys).
        """
        for key in self.needs:
            if context.get(key) is None:
                name = self.name if self.prefix is None else f"{self.prefix}{argument}"
                raise UsageError(f"{self.kind} {name!r} needs {_NEEDS.get(key, key)}")
        context = dict(context)
        for parameter, key in self.bind.items():
            if key in context:
                context[parameter] = context.pop(key)
        kwargs = dict(self.kwargs)
        if self.parameter is not None:
            kwargs[self.parameter] = argument
        return _call(self.load(), kwargs, context)


_NEEDS = {
    "llm_client": "an LLM server: pass --llm-url and --model (or set OPENAI_BASE_URL and "
    "AMBITAB_LLM_MODEL)",
    "corpus": "a corpus",
}

_ENTRIES: tuple[Component, ...] = (
    # -- askers (the evaluated policy; paper C.1 baselines and A.4 probes) ---------------------
    Component(
        "asker", "none", "ambitab_gym.policies.scripted:NoneAsker", "stops at once (pi_none)"
    ),
    Component(
        "asker",
        "full",
        "ambitab_gym.policies.scripted:FullAsker",
        "one canonical question per registered term (pi_full; privileged reference policy)",
        tags=("reference",),
    ),
    Component(
        "asker",
        "full-adv",
        "ambitab_gym.policies.scripted:FullAdvAsker",
        "pi_full's questions asking for detail and the exact SQL (pi_full^adv)",
        tags=("reference", "probe"),
    ),
    Component(
        "asker",
        "generic",
        "ambitab_gym.policies.scripted:GenericAsker",
        "'Could you clarify what you want?' / 'Please elaborate.' until the budget (pi_none^adv)",
        tags=("probe",),
    ),
    Component(
        "asker",
        "schema-probe",
        "ambitab_gym.policies.probes:SchemaProbeAsker",
        "names every table and column of the visible schema in each question",
        tags=("probe",),
    ),
    Component(
        "asker",
        "restatement",
        "ambitab_gym.policies.probes:RestatementAsker",
        "repeats the request (and mechanical variants of it) until the budget",
        tags=("probe",),
    ),
    Component(
        "asker",
        "llm:STRATEGY",
        "ambitab_gym.policies.llm:make_llm_asker",
        "an LLM asker behind an OpenAI-compatible server, with a prompt strategy",
        bind={"client": "llm_client"},
        needs=("llm_client",),
        parameter="strategy",
        parameter_kind="strategy",
        tags=("llm",),
    ),
    # -- solvers -------------------------------------------------------------------------------
    Component(
        "solver",
        "interpretation",
        "ambitab_gym.policies.interpretation:InterpretationSolver",
        "the reading the dialogue revealed (offline, exact)",
    ),
    Component(
        "solver",
        "dialogue-sql",
        "ambitab_gym.policies.probes:DialogueSQLSolver",
        "copies SQL found in the answers, else the interpretation solver",
        tags=("probe",),
    ),
    Component(
        "solver",
        "dialogue-sql-blind",
        "ambitab_gym.policies.probes:DialogueSQLSolver",
        "copies SQL found in the answers, else the default reading (ignores the answers)",
        kwargs={"fallback": "blind"},
        tags=("probe",),
    ),
    Component(
        "solver",
        "llm",
        "ambitab_gym.policies.llm:make_llm_solver",
        "an LLM writes the SQL from the visible dialogue",
        bind={"client": "llm_client"},
        needs=("llm_client",),
        tags=("llm",),
    ),
    # -- oracles -------------------------------------------------------------------------------
    Component(
        "oracle",
        "deterministic",
        "ambitab_gym.oracles.deterministic:reference_oracle",
        "the corpus's deterministic oracle (intent or knowledge): the reference O*",
        tags=("reference",),
    ),
    Component(
        "oracle",
        "llm",
        "ambitab_gym.oracles.llm:make_llm_oracle",
        "two-stage LLM oracle (matcher routes, responder answers) under an access policy",
        bind={"client": "llm_client"},
        needs=("llm_client",),
        tags=("llm",),
    ),
    # -- env ids not owned by corpora ----------------------------------------------------------
    Component(
        "env",
        "AmbiTab-Procedural-v0",
        "ambitab_gym.generate.env:ProceduralEnv",
        "a freshly generated task at every reset (no corpus)",
    ),
)

#: Kinds whose names live in a table of a lower layer: candidate ``"module:attr"`` references
#: (the first that imports wins), the factory each name gets, and a description for entries
#: whose table gives none. Listed before the registry's own entries of the kind.
_OWNED: dict[str, tuple[tuple[str, ...], str, str]] = {
    "env": (
        ("ambitab_gym.corpora.corpus:ENV_IDS",),
        "ambitab_gym.env:AmbiTabEnv",
        "the {value} corpus (the built corpus, else the bundled sample)",
    ),
    "engine": (("ambitab_gym.verify.engines:ENGINES",), "ambitab_gym.verify.engines:ENGINES", ""),
    "strategy": (
        ("ambitab_gym.policies.llm_prompts:STRATEGIES",),
        "ambitab_gym.policies.llm:make_llm_asker",
        "LLM asker prompt strategy",
    ),
    "oracle_policy": (
        ("ambitab_gym.oracles.access:ORACLE_POLICIES",),
        "ambitab_gym.oracles.llm:make_llm_oracle",
        "LLM-oracle access policy",
    ),
    "converter": (
        ("ambitab_gym.convert.builder:SOURCES",),
        "ambitab_gym.convert.builder:build_corpus",
        "upstream {name} -> corpus '{value}'",
    ),
}


#: Tables of ``name -> factory`` function owned by a lower layer, listed after the registry's own
#: entries of the kind, with the tags their entries get.
_OWNED_FACTORIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "oracle": ("ambitab_gym.oracles.leaky:LEAKY_ORACLES", ("leaky",)),
}


def _owned_factories(kind: str) -> tuple[Component, ...]:
    """Entries whose table maps each name to its factory function (the leaky oracles)."""
    if kind not in _OWNED_FACTORIES:
        return ()
    reference, tags = _OWNED_FACTORIES[kind]
    return tuple(
        Component(
            kind,
            name,
            f"{factory.__module__}:{factory.__qualname__}",
            _description(factory, "", name),
            tags=tags,
        )
        for name, factory in resolve(reference).items()
    )


def _description(value: Any, template: str, name: str) -> str:
    """An owned entry's line: its ``description``, else its docstring's first line (a factory),
    else the kind's template."""
    if not isinstance(value, str):
        text = getattr(value, "description", None)
        if not (isinstance(text, str) and text.strip()) and callable(value):
            text = inspect.getdoc(value)
        if isinstance(text, str) and text.strip():
            line = " ".join(text.strip().split("\n\n")[0].split()).rstrip(".")
            first = line.split()[0]
            if first[1:].isalpha() and first[1:].islower():  # "Credits" -> "credits"; not "SQL",
                line = line[0].lower() + line[1:]  # "DuckDB" or "PostgreSQL"
            return line
    return template.format(name=name, value=value)


def _owned(kind: str) -> tuple[Component, ...]:
    """The entries of a kind whose table a lower layer owns (imports that table)."""
    candidates, factory, template = _OWNED[kind]
    table: Any = None
    for reference in candidates:
        if importlib.util.find_spec(reference.partition(":")[0]) is not None:
            table = resolve(reference)
            break
    if table is None:
        return ()
    items: Iterable[tuple[str, Any]] = (
        table.items() if isinstance(table, Mapping) else ((name, name) for name in table)
    )
    return tuple(
        Component(
            kind,
            str(name),
            _reference(value, factory),
            _description(value, template, name),
            # an env id's table value is its corpus: AmbiTabEnv(corpus=...)
            kwargs={"corpus": value} if kind == "env" and isinstance(value, str) else {},
        )
        for name, value in items
    )


def _reference(value: Any, default: str) -> str:
    """An owned entry's factory: its own (an engine kind names its opener), else ``default``."""
    own = getattr(value, "factory", None)
    if isinstance(own, str):
        return own
    if callable(own):
        return f"{own.__module__}:{own.__qualname__}"
    return default


def components(kind: str) -> tuple[Component, ...]:
    """Every registered component of a kind, in registration order.

    Raises:
        UnknownComponent: for an unknown kind.

    >>> [c.name for c in components("engine")]
    ['sqlite', 'duckdb', 'postgres']
    """
    if kind not in KINDS:
        raise UnknownComponent("component kind", kind, KINDS)
    own = tuple(c for c in _ENTRIES if c.kind == kind)
    return (_owned(kind) if kind in _OWNED else ()) + own + _owned_factories(kind)


def names(kind: str, *, tag: str | None = None) -> tuple[str, ...]:
    """The names of a kind (those carrying ``tag`` when given)."""
    return tuple(c.name for c in components(kind) if tag is None or tag in c.tags)


def get(kind: str, name: str) -> Component:
    """The entry for a name; a pattern entry (``llm:STRATEGY``) answers every ``llm:<name>``.

    Raises:
        UnknownComponent: listing the valid names (and the import-path form where allowed).
    """
    entries = components(kind)
    for entry in entries:
        if entry.name == name and entry.parameter is None:
            return entry
    for entry in entries:
        if entry.prefix and name.startswith(entry.prefix):
            argument = name[len(entry.prefix) :]
            if entry.parameter_kind is not None:
                valid = names(entry.parameter_kind)
                if valid and argument not in valid:
                    raise UnknownComponent(entry.parameter_kind, argument, valid)
            return entry
        if entry.prefix and entry.parameter_kind is not None and name == entry.prefix[:-1]:
            valid = names(entry.parameter_kind)  # "llm" alone: say what goes after the colon
            raise UnknownComponent(
                kind,
                name,
                [e.name for e in entries],
                hint=f"- {name!r} needs a {entry.parameter_kind}: write {entry.name} with "
                f"{entry.parameter} one of: {', '.join(valid)} (e.g. {entry.prefix}{valid[-1]})",
            )
    hint = _IMPORT_HINT if kind in _IMPORTABLE else ""
    raise UnknownComponent(kind, name, [e.name for e in entries], hint=hint)


def load_object(path: str, **context: Any) -> Any:
    """Import ``module:attribute`` and instantiate it, passing the context values its signature
    takes (``corpus=`` for instance); a non-callable attribute is returned as it is.

    Raises:
        ConfigurationError: when the path is malformed or cannot be imported.
    """
    if ":" not in path:
        raise ConfigurationError(
            f"{path!r} is neither a known name nor an import path 'module:callable'"
        )
    target = resolve(path)
    if not callable(target):
        return target
    return _call(target, {}, context)


def create(kind: str, name: str, **context: Any) -> Any:
    """Make a component by name, or by import path for askers, solvers and oracles.

    Args:
        kind: ``asker``, ``solver``, ``oracle``, ...
        name: a registered name, ``llm:STRATEGY`` for LLM askers, or ``module:callable``.
        **context: ``corpus``, ``llm_client`` and factory options; each is passed only to
            factories that take it.

    Raises:
        UnknownComponent: an unknown name (the message lists the valid ones).
        UsageError: the component needs something the context lacks (an LLM server).
    """
    try:
        entry = get(kind, name)
    except UnknownComponent:
        if kind in _IMPORTABLE and ":" in name and not name.startswith("llm:"):
            return load_object(name, **context)
        raise
    argument = name[len(entry.prefix) :] if entry.prefix else None
    return entry.create(argument, **context)


def choices_help(kind: str, *, extra: Iterable[str] = ()) -> str:
    """The names of a kind as one help phrase: ``"none, full, ... or module:callable"``.

    >>> choices_help("solver")
    'interpretation, dialogue-sql, dialogue-sql-blind, llm or module:callable'
    """
    listed = [*names(kind), *extra]
    if kind in _IMPORTABLE:
        listed.append("module:callable")
    if len(listed) == 1:
        return listed[0]
    return ", ".join(listed[:-1]) + " or " + listed[-1]
