"""The LLM layout (issue 12): llm/ is the transport, prompts sit on their side of the trust
boundary, one SQL extractor, one schema-name parser."""

from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import duckdb
import pytest

import ambitab_gym
from ambitab_gym.corpora.corpus import available_corpora, load_corpus
from ambitab_gym.textutil import code_blocks, extract_sql, schema_identifiers, schema_names

PACKAGE = Path(ambitab_gym.__file__).parent

#: Oracle-side modules that read or render hidden record fields for the oracle.
PRIVILEGED = (
    "ambitab_gym.oracles.access",
    "ambitab_gym.oracles.llm_prompts",
    "ambitab_gym.oracles.llm",
    "ambitab_gym.oracles.leaky",
    "ambitab_gym.oracles.routes",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (function-local and TYPE_CHECKING too);
    ``from a import b`` counts as ``a`` and ``a.b``."""
    tree = ast.parse(path.read_text("utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# -- llm/ is the transport ----------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((PACKAGE / "llm").glob("*.py")), ids=lambda p: p.name)
def test_the_transport_imports_no_oracle_policy_command_or_testing_module(path):
    bad = {
        m
        for m in imported_modules(path)
        if _under(
            m,
            "ambitab_gym.oracles",
            "ambitab_gym.policies",
            "ambitab_gym.commands",
            "ambitab_gym.testing",
        )
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_importing_the_transport_loads_neither_side():
    code = (
        "import sys, ambitab_gym.llm, ambitab_gym.llm.client\n"
        "print(sorted(m for m in sys.modules if m.startswith(("
        "'ambitab_gym.policies.llm', 'ambitab_gym.oracles.llm', 'ambitab_gym.oracles.access', "
        "'ambitab_gym.commands', 'ambitab_gym.testing'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_nothing_imports_the_testing_package():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "testing":
            continue
        used = {m for m in imported_modules(path) if _under(m, "ambitab_gym.testing")}
        assert not used, f"{path.relative_to(PACKAGE)} imports {sorted(used)}"


# -- the trust boundary in the tree -------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((PACKAGE / "policies").glob("*.py")), ids=lambda p: p.name)
def test_agent_side_modules_import_no_privileged_oracle_module(path):
    bad = {m for m in imported_modules(path) if _under(m, *PRIVILEGED)}
    assert not bad, f"policies/{path.name} imports privileged {sorted(bad)}"


@pytest.mark.parametrize("name", ["llm.py", "llm_prompts.py"])
def test_llm_agent_modules_use_only_the_oracle_protocols(name):
    oracle_side = {
        m for m in imported_modules(PACKAGE / "policies" / name) if _under(m, "ambitab_gym.oracles")
    }
    assert oracle_side <= {"ambitab_gym.oracles.base", "ambitab_gym.oracles.base.REFUSAL"}


def test_oracle_prompts_and_access_policy_live_on_the_oracle_side():
    from ambitab_gym.oracles import access, llm_prompts
    from ambitab_gym.policies import llm_prompts as agent_prompts

    assert access.ORACLE_POLICIES.keys() == {"scoped", "unfiltered"}
    assert access.ORACLE_POLICY_CHOICES == ("auto", "scoped", "unfiltered")
    assert hasattr(llm_prompts, "matcher_messages") and hasattr(llm_prompts, "OracleNotes")
    assert tuple(agent_prompts.STRATEGIES) == agent_prompts.ASKER_STRATEGIES
    assert not hasattr(agent_prompts, "matcher_messages")
    assert not hasattr(agent_prompts, "OracleNotes")


def test_transport_names_stay_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from ambitab_gym.llm import LLMClient, LLMError, response_format

    assert LLMClient and LLMError and response_format


def test_the_scripted_server_runs_standalone():
    import httpx

    config = {"rules": [{"reply": "standalone"}]}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ambitab_gym.testing.llm_server", "--config", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(config) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline().strip()
        assert line.startswith("LISTENING http://127.0.0.1:"), line
        url = line.split(" ", 1)[1]
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
        assert reply["choices"][0]["message"]["content"] == "standalone"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


# -- one SQL extractor ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, options, expected",
    [
        # fences: labelled, unlabelled, inline, other languages skipped, first vs last
        ("```sql\nSELECT a\nFROM t;\n```", {}, "SELECT a\nFROM t;"),
        ("```SQLite\nSELECT 1\n```", {}, "SELECT 1"),
        (
            "```\nWITH x AS (SELECT 1) SELECT * FROM x\n```",
            {},
            "WITH x AS (SELECT 1) SELECT * FROM x",
        ),
        ("```sql SELECT 3```", {}, "SELECT 3"),
        ("```python\nprint('SELECT')\n```\n```sql\nSELECT 2\n```", {}, "SELECT 2"),
        ("a ```sql\nSELECT 1\n``` b ```SELECT 2```", {}, "SELECT 1"),
        ("a ```sql\nSELECT 1\n``` b ```SELECT 2```", {"last": True}, "SELECT 2"),
        # prose around bare SQL; prose without SQL
        (
            "Sure, here you go: SELECT name FROM staff WHERE id = 1",
            {},
            "SELECT name FROM staff WHERE id = 1",
        ),
        ("The query is select x from y", {}, "select x from y"),
        ("I cannot tell which table you mean.", {}, None),
        ("", {}, None),
        # <think> blocks never supply SQL
        ("<think>SELECT wrong FROM t</think>SELECT right FROM t", {}, "SELECT right FROM t"),
        ("<think>```sql\nSELECT wrong\n```</think>\n```sql\nSELECT right\n```", {}, "SELECT right"),
        ("<think>SELECT only thoughts", {}, None),
        ("thought the template opened</think>```sql\nSELECT 9\n```", {}, "SELECT 9"),
        # the solver's JSON reply, with a fenced value
        ('{"reasoning": "r", "type": "final_sql", "output": "SELECT 1"}', {}, "SELECT 1"),
        ('{"output": "```sql\\nSELECT 2\\n```"}', {}, "SELECT 2"),
        # strict: prose that merely contains SQL words is no SQL
        ("Customers with at least two orders; select the newest.", {"strict": True}, None),
        (
            "It is WITH t AS (SELECT 1) SELECT * FROM t",
            {"strict": True},
            "WITH t AS (SELECT 1) SELECT * FROM t",
        ),
        ("Use this: SELECT 1", {"strict": True}, "SELECT 1"),
        ('{"output": "SELECT 1"}', {"strict": True}, None),
    ],
)
def test_the_one_sql_extractor(text, options, expected):
    assert extract_sql(text, **options) == expected


def test_every_sql_reader_is_the_one_extractor():
    from ambitab_gym.policies import llm, probes

    assert llm.extract_sql is extract_sql and probes.extract_sql is extract_sql
    assert probes.find_sql("x ```sql\nSELECT 1\n``` y ```SELECT 2```") == "SELECT 2"
    defining = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                source = ast.unparse(node)
                if "```" in source and "re.compile" in source:
                    defining.append(str(path.relative_to(PACKAGE)))
    assert set(defining) <= {"textutil.py"}, f"code-fence regexes outside textutil: {defining}"


def test_code_blocks_keep_labels_and_bodies():
    assert [
        (b.label, b.body, b.is_sql) for b in code_blocks("```json\n{}\n``` ```sql\nx\n```")
    ] == [
        ("json", "{}", False),
        ("sql", "x", True),
    ]


# -- one schema-name parser -----------------------------------------------------------------------


def _catalog(corpus, database: str) -> tuple[list[str], dict[str, list[str]]]:
    """Tables (and views) and their columns, read from the built database, not from text."""
    if corpus.manifest.engine == "duckdb":
        path = corpus.database_file(database, "duckdb")
        with duckdb.connect(str(path), read_only=True) as db:
            tables = [r[0] for r in db.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
            tables += [
                r[0]
                for r in db.execute(
                    "SELECT view_name FROM duckdb_views() WHERE NOT internal"
                ).fetchall()
            ]
            columns = {
                t: [
                    r[0]
                    for r in db.execute(
                        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                        "ORDER BY column_index",
                        [t],
                    ).fetchall()
                ]
                for t in tables
            }
        return tables, columns
    path = corpus.database_file(database, "sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            )
        ]
        columns = {t: [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    return tables, columns


@pytest.mark.parametrize("corpus_name", available_corpora())
def test_schema_names_agree_with_the_database_catalog_on_every_bundled_corpus(corpus_name):
    corpus = load_corpus(corpus_name)
    for database in sorted({r.spec.database for r in corpus.records}):
        tables, columns = _catalog(corpus, database)
        # what the menu reads: the schema text of the agent's view, with no dialect
        texts = {
            corpus.public_spec(r).schema_text for r in corpus.records if r.spec.database == database
        }
        for text in texts:
            names = schema_names(text)
            assert sorted(names.tables) == sorted(tables), database
            expected = list(dict.fromkeys(c for t in names.tables for c in columns[t]))
            if corpus.manifest.engine == "sqlite":
                assert names.tables == tables, database  # declaration order
            assert names.columns == expected, database
            flat = schema_identifiers(text)
            assert set(flat) == set(tables) | set(expected)


def test_the_menu_and_the_schema_oracle_use_the_one_parser():
    from ambitab_gym.oracles import leaky
    from ambitab_gym.wrappers import menu

    assert menu.schema_names is schema_names
    assert leaky.schema_identifiers is schema_identifiers


def test_schema_names_skip_constraints_and_survive_unreadable_text():
    schema = (
        'CREATE TABLE "order_items" (order_id INT, product_id INT REFERENCES products(id), '
        "PRIMARY KEY (order_id, product_id));\n"
        "CREATE VIEW big AS SELECT * FROM order_items;\n"
        "this line is not SQL at all (;\n"
        "CREATE TABLE staff (id INT, name TEXT, UNIQUE (name))"
    )
    assert schema_names(schema) == (
        ["order_items", "big", "staff"],
        ["order_id", "product_id", "id", "name"],
    )
    with pytest.raises(ValueError, match="cannot read the schema"):
        schema_names(schema, strict=True)
    first = schema_names(schema)
    first.tables.append("mutated")
    assert "mutated" not in schema_names(schema).tables  # results are the caller's own
    assert schema_names(None) == ([], []) and schema_identifiers("") == []


# -- one LLM client ---------------------------------------------------------------------------------


def test_the_converters_hooks_use_the_one_client_with_its_retries():
    from ambitab_gym.convert import hooks
    from ambitab_gym.convert.common import BuildError
    from ambitab_gym.llm.client import LLMClient
    from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule

    assert hooks.LLMClient is LLMClient
    with ScriptedServer([ScriptRule("cheap")]) as server:
        with LLMClient(server.url, "m", backoff_s=0.01, seed=7) as client:
            finder = hooks.LLMTermFinder(client)
            server.fail_next("http_503", times=2)  # retried, as every LLM call of the package
            assert finder.find("List cheap items.", "price < 5") == "cheap"
            bodies = [r["body"] for r in server.requests()]
            assert len(bodies) == 3  # two failures, then the answer
            assert {(b["temperature"], b["seed"]) for b in bodies} == {(0.0, 7)}
        with LLMClient(server.url, "m", max_retries=0) as client:
            server.fail_next("http_500")
            with pytest.raises(BuildError, match="http_500"):
                hooks.LLMTermFinder(client).find("List cheap items.", "price < 5")
