"""Architecture rules that keep the package in one piece (docs/design.md, "Architecture").

* The import graph of ``ambitab_gym`` has no cycle - counting function-local imports,
  ``importlib.import_module("...")`` literals and lazy ``"module:attr"`` references (the
  registry's, the engine table's, Gymnasium entry points) as edges.
* The registry is a leaf; the command-line help lists exactly the registry's components, and an
  unknown name's error lists the valid ones.
* Every exception class of the package is an :class:`~ambitab_gym.errors.AmbiTabError` with a
  category, and real failures (a bad record, an unknown corpus, an unknown component, a bad
  LLM URL) raise one.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

import ambitab_gym
from ambitab_gym import registry
from ambitab_gym.cli import main
from ambitab_gym.errors import AmbiTabError, UnknownComponent, category_of

PACKAGE = Path(ambitab_gym.__file__).resolve().parent
ROOT = "ambitab_gym"
#: ``"ambitab_gym.x.y:attr"``: a lazy reference, resolved with importlib when used.
LAZY_REFERENCE = re.compile(r"^(ambitab_gym(?:\.\w+)*):[\w.]+$")


# -- the import graph ----------------------------------------------------------------------------


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package ``__init__``), for every file of the package."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _owning_module(name: str, modules: dict) -> str | None:
    """The module (or package) a dotted name lives in: ``a.b.Class`` -> ``a.b``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: never executed, so not import edges."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = getattr(test, "id", None) or getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skipped.update(id(n) for n in ast.walk(child))
    return skipped


def _imported_names(node: ast.AST, package: str, modules: dict) -> list[str]:
    """The dotted names one AST node imports (or lazily references)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative: resolve against the importing module's package
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        # ``from pkg import sub`` imports the submodule; ``from pkg import name`` the package
        return [
            f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
            for alias in node.names
        ]
    if isinstance(node, ast.Call):
        func = node.func
        called = getattr(func, "attr", None) or getattr(func, "id", None)
        if called == "import_module" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return [first.value]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        match = LAZY_REFERENCE.match(node.value)
        if match:
            return [match.group(1)]
    return []


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line}. Importing ``a.b.c`` is an edge to ``a.b.c`` and to the
    ``__init__`` of each package on the way (``a.b``), except the root package and the
    importing module's own packages, which are always initialized before it."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
        package = name if is_package else name.rpartition(".")[0]
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            for imported in _imported_names(node, package, modules):
                if not imported.startswith(ROOT + "."):
                    continue
                target = _owning_module(imported, modules)
                if target is None:
                    continue
                parts = target.split(".")
                for end in range(2, len(parts) + 1):
                    step = ".".join(parts[:end])
                    if step in modules and step != name and not name.startswith(step + "."):
                        graph[name].setdefault(step, getattr(node, "lineno", 0))
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of the graph as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_cycle_finder_reports_the_path():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        steps = [f"{a} -> {b} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        pytest.fail("import cycle:\n  " + "\n  ".join(steps))


def test_the_graph_sees_local_lazy_and_package_edges():
    graph = import_graph()
    # a registry reference is an edge of the registry
    assert "ambitab_gym.policies.probes" in graph["ambitab_gym.registry"]
    # corpora reach engines through the engine table, never the other way round
    assert "ambitab_gym.verify.engines" in graph["ambitab_gym.corpora.corpus"]
    assert "ambitab_gym.corpora" not in graph["ambitab_gym.verify.duckdb"]
    # diagnostics use the campaign engine; evaluation does not import diagnostics
    assert "ambitab_gym.evaluation.engine" in graph["ambitab_gym.diagnostics.campaign"]
    assert not any(
        t.startswith("ambitab_gym.diagnostics") for t in _reachable(graph, "ambitab_gym.evaluation")
    )


def _reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for target in graph[node]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_registry_is_a_leaf():
    tree = ast.parse((PACKAGE / "registry.py").read_text("utf-8"))
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    own = {
        name
        for node in statements
        for name in _imported_names(node, ROOT, _modules())
        if name.startswith(ROOT + ".")
    }
    # besides the lazy references it lists, the registry imports only the errors
    assert own == {"ambitab_gym.errors"}, own
    # and no module it references imports it back (the acyclic graph says it; name them here)
    graph = import_graph()
    importers = {name for name, targets in graph.items() if "ambitab_gym.registry" in targets}
    assert not importers & _reachable(graph, "ambitab_gym.registry")


# -- the registry and the command line -----------------------------------------------------------


def _option_help(capsys, monkeypatch, command: str, option: str) -> str:
    monkeypatch.setenv("COLUMNS", "100000")  # argparse wraps at the terminal width
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    match = re.search(rf"^\s+{re.escape(option)} \S+\s+(.*)$", text, re.MULTILINE)
    assert match, f"{command} --help has no {option}:\n{text}"
    return match.group(1)


def _listed(help_text: str) -> list[str]:
    """The names in ``[lead: ]a, b, c or module:callable[; X: ...][ (default: ...)]``."""
    text = re.sub(r" \(default: [^)]*\)", "", help_text)
    text = text.split(": ", 1)[1] if text.startswith("the ") else text
    head = text.split(";", 1)[0]
    names = re.split(r", | or ", head)
    return [name.strip() for name in names if name.strip() != "module:callable"]


@pytest.mark.parametrize(
    ("command", "option", "kind"),
    [
        ("evaluate", "--asker", "asker"),
        ("evaluate", "--solver", "solver"),
        ("evaluate", "--oracle", "oracle"),
        ("leakage", "--asker", "asker"),
        ("leakage", "--solver", "solver"),
        ("leakage", "--oracle", "oracle"),
        ("play", "--solver", "solver"),
    ],
)
def test_cli_help_lists_exactly_the_registry(capsys, monkeypatch, command, option, kind):
    listed = _listed(_option_help(capsys, monkeypatch, command, option))
    assert listed == list(registry.names(kind))
    assert "schema-probe" in registry.names("asker")
    assert "dialogue-sql" in registry.names("solver")


def test_cli_help_lists_the_strategies(capsys, monkeypatch):
    text = _option_help(capsys, monkeypatch, "evaluate", "--asker")
    strategies = text.split("; STRATEGY: ", 1)[1].split(" (default", 1)[0].split(", ")
    assert strategies == list(registry.names("strategy"))


def test_build_help_lists_the_converters(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    text = capsys.readouterr().out
    choices = re.search(r"upstream dataset: (.*)$", text, re.MULTILINE).group(1).split(", ")
    assert sorted(choices) == sorted(registry.names("converter"))


def test_list_components_is_the_registry(capsys):
    assert main(["list", "--components", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    expected = [(k, c.name) for k in registry.KINDS for c in registry.components(k)]
    assert [(e["kind"], e["name"]) for e in listed] == expected
    assert all(e["description"] for e in listed)
    assert main(["list", "--components"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for _, name in expected)


def test_every_entry_resolves_and_describes_itself():
    for kind in registry.KINDS:
        entries = registry.components(kind)
        assert entries, kind
        assert len({c.name for c in entries}) == len(entries), f"duplicate {kind} names"
        for entry in entries:
            assert entry.description and "\n" not in entry.description
            assert callable(entry.load()) or kind == "strategy", entry


def test_env_ids_are_registered_with_gymnasium():
    import gymnasium as gym

    for env_id in registry.names("env"):
        assert env_id in gym.registry


@pytest.mark.parametrize(
    ("command", "option", "kind"),
    [
        ("evaluate", "--asker", "asker"),
        ("leakage", "--solver", "solver"),
        ("evaluate", "--oracle", "oracle"),
    ],
)
def test_an_unknown_name_lists_the_valid_ones(capsys, command, option, kind):
    argv = [command, "AmbiTab-TACO-v0", option, "no-such-thing", "--limit", "1"]
    if command == "leakage" and option != "--asker":
        argv += ["--asker", "full"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"unknown {kind} 'no-such-thing'" in err
    assert all(name in err for name in registry.names(kind))


def test_unknown_names_in_python_list_the_valid_ones():
    with pytest.raises(UnknownComponent) as error:
        registry.create("solver", "telepathy")
    assert error.value.valid == registry.names("solver")
    with pytest.raises(UnknownComponent, match="checklist-ledger"):
        registry.create("asker", "llm:improv", llm_client=object())
    with pytest.raises(UnknownComponent, match="sqlite, duckdb, postgres"):
        registry.get("engine", "oracle-db")
    with pytest.raises(AmbiTabError, match="needs an LLM server"):
        registry.create("solver", "llm")


# -- the exception tree --------------------------------------------------------------------------


#: Exception classes that cannot join the tree, and why they never reach a user.
INTERNAL_EXCEPTIONS = {
    "ambitab_gym.verify.taskrun.StatementError": "the worker process loads taskrun by path, so it "
    "imports nothing from ambitab_gym; run_task catches it and answers with a verdict reason",
}


def _package_exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in sorted(_modules()):
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith(ROOT + "."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


# verl (reached through integrations.verl's lazy names) imports ray.experimental.state.
@pytest.mark.filterwarnings("ignore:Ray state API is no longer experimental:DeprecationWarning")
def test_every_exception_class_is_an_ambitab_error_with_a_category():
    classes = _package_exception_classes()
    names = {cls.__name__ for cls in classes}
    # the ones that existed before the tree keep their names
    assert {
        "RecordError",
        "CorpusNotFound",
        "QueryError",
        "LLMError",
        "LLMTimeout",
        "BuildError",
        "StackOrderError",
        "WorkerStartError",
        "UnsafeServerSetup",
        "MissingPlotDependency",
    } <= names
    outside = [
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if not issubclass(c, AmbiTabError)
        and f"{c.__module__}.{c.__qualname__}" not in INTERNAL_EXCEPTIONS
    ]
    assert not outside, f"exception classes outside the AmbiTabError tree: {outside}"
    for cls in classes:
        if f"{cls.__module__}.{cls.__qualname__}" not in INTERNAL_EXCEPTIONS:
            assert isinstance(cls.category, str) and cls.category, cls


def _documented_tree() -> list[tuple[int, str, str | None]]:
    """``(depth, dotted name, quoted category or None)`` of each line of docs/design.md's
    error tree."""
    design = (Path(ambitab_gym.__file__).parents[1] / "docs" / "design.md").read_text("utf-8")
    block = design.split("### Errors", 1)[1].split("```", 2)[1]
    lines = []
    for line in block.strip("\n").splitlines():
        start = len(re.match(r"[│├└─\s]*", line).group())
        name, _, rest = line[start:].partition(" ")
        quoted = re.match(r"\s*\"([^\"]+)\"", rest)
        lines.append((start // 4, name, quoted.group(1) if quoted else None))
    return lines


# verl (reached through integrations.verl's lazy names) imports ray.experimental.state.
@pytest.mark.filterwarnings("ignore:Ray state API is no longer experimental:DeprecationWarning")
def test_the_documented_error_tree_is_the_package_s():
    documented: dict[type, type | None] = {}
    parents: list[type] = []
    for depth, name, category in _documented_tree():
        module, _, attribute = f"{ROOT}.{name}".rpartition(".")
        if name == "AmbiTabError" or "." not in name:
            module = "ambitab_gym.errors"
        cls = getattr(importlib.import_module(module), attribute)
        del parents[depth:]
        documented[cls] = parents[-1] if parents else None
        parents.append(cls)
        if category is not None and "<" not in category:
            assert cls.category == category, name
    actual = {
        cls: next((b for b in cls.__mro__[1:] if issubclass(b, AmbiTabError)), None)
        for cls in _package_exception_classes()
        if issubclass(cls, AmbiTabError)
    }
    assert documented == actual


def test_builtin_bases_are_kept():
    from ambitab_gym.convert import BuildError
    from ambitab_gym.corpora import CorpusNotFound
    from ambitab_gym.llm.errors import LLMError
    from ambitab_gym.records import RecordError
    from ambitab_gym.wrappers.stack import StackOrderError

    assert issubclass(RecordError, ValueError) and issubclass(StackOrderError, ValueError)
    assert issubclass(CorpusNotFound, LookupError)
    assert issubclass(LLMError, RuntimeError) and issubclass(BuildError, RuntimeError)


def test_real_failures_raise_ambitab_errors():
    from ambitab_gym.corpora import load_corpus
    from ambitab_gym.llm.client import LLMClient
    from ambitab_gym.records import parse_record

    with pytest.raises(AmbiTabError) as bad_record:
        parse_record({"id": "r1"}, where="records.jsonl:1")
    assert category_of(bad_record.value) == "record"
    with pytest.raises(AmbiTabError) as unknown_corpus:
        load_corpus("no-such-corpus")
    assert category_of(unknown_corpus.value) == "corpus_not_found"
    with pytest.raises(AmbiTabError) as unknown_component:
        registry.create("oracle", "oracle-of-delphi")
    assert category_of(unknown_component.value) == "unknown_component"
    with pytest.raises(AmbiTabError) as bad_url:
        LLMClient("ftp://example.org", model="m")
    assert category_of(bad_url.value) == "configuration"
    assert isinstance(bad_url.value, ValueError)


def test_category_of_is_the_one_rule():
    from ambitab_gym.verify import QueryError

    assert category_of(QueryError("timeout", "slow")) == "timeout"
    assert category_of(ConnectionError("down")) == "ConnectionError"
    with pytest.raises(AmbiTabError):
        QueryError("sleepy", "not a category")
