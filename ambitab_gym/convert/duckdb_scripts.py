"""SQL scripts that build DuckDB databases for PostgreSQL-dialect corpora (BIRD-Interact).

A corpus written in PostgreSQL's dialect runs on DuckDB when no PostgreSQL server is given
(docs/design.md section 6, Verifier). Its databases ship as SQL scripts that DuckDB executes;
these functions write them from what users have:

* :func:`sqlite_to_duckdb_script` - a SQLite database file (e.g. BIRD-Mini-Interact's).
* :func:`pg_dump_to_duckdb_script` - a plain-text ``pg_dump`` file: ``CREATE TABLE`` statements
  are transpiled, ``COPY ... FROM stdin`` blocks become ``INSERT`` statements, and what DuckDB
  does not need for reading (ownership, grants, sequences, functions, triggers, indexes,
  constraints added later, ``SET`` lines) is left out.

Both outputs are deterministic (rows in storage order, fixed batch size).
"""

from __future__ import annotations

import math
import re
import sqlite3
from pathlib import Path

__all__ = ["pg_dump_to_duckdb_script", "sqlite_to_duckdb_script"]

_BATCH = 500


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"'{value}'::DOUBLE"
        return repr(value)
    if isinstance(value, bytes):
        return "'" + "".join(f"\\x{b:02x}" for b in value) + "'::BLOB"
    return "'" + str(value).replace("'", "''") + "'"


def _duck_type(declared: str) -> str:
    """DuckDB type for a SQLite declared type (SQLite's affinity rules)."""
    kind = (declared or "").lower()
    if "int" in kind:
        return "BIGINT"
    if any(k in kind for k in ("char", "clob", "text")):
        return "VARCHAR"
    if "blob" in kind:
        return "BLOB"
    if any(k in kind for k in ("real", "floa", "doub")):
        return "DOUBLE"
    if "bool" in kind:
        return "BOOLEAN"
    if any(k in kind for k in ("date", "time")):
        return "VARCHAR"
    if any(k in kind for k in ("num", "dec")):
        return "DOUBLE"
    return "VARCHAR"


def sqlite_to_duckdb_script(path: str | Path) -> str:
    """A DuckDB script holding the tables and rows of a SQLite database.

    Example:
        >>> import tempfile, duckdb
        >>> db = Path(tempfile.mkdtemp()) / "a.sqlite"
        >>> con = sqlite3.connect(db)
        >>> _ = con.executescript("CREATE TABLE Signals(id INTEGER, snr REAL(5,2), tag TEXT(8));"
        ...                       "INSERT INTO Signals VALUES (1, 2.5, 'it''s'), (2, NULL, 'b');")
        >>> con.close()
        >>> script = sqlite_to_duckdb_script(db)
        >>> duckdb.connect().execute(script).execute("SELECT * FROM signals ORDER BY id").fetchall()
        [(1, 2.5, "it's"), (2, None, 'b')]
    """
    connection = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    connection.text_factory = lambda b: b.decode("utf-8", errors="replace")
    lines: list[str] = []
    try:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        for (table,) in tables:
            info = connection.execute(f"PRAGMA table_info({_ident(table)})").fetchall()
            columns = ", ".join(f"{_ident(c[1])} {_duck_type(c[2])}" for c in info)
            lines.append(f"CREATE TABLE {_ident(table)} ({columns});")
            cursor = connection.execute(f"SELECT * FROM {_ident(table)} ORDER BY rowid")
            while True:
                rows = cursor.fetchmany(_BATCH)
                if not rows:
                    break
                values = ",\n".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
                lines.append(f"INSERT INTO {_ident(table)} VALUES\n{values};")
    finally:
        connection.close()
    return "\n".join(lines) + "\n"


_SKIP = re.compile(
    r"^\s*(SET\b|SELECT\s+pg_catalog\.|SELECT\s+setval|CREATE\s+EXTENSION|COMMENT\s+ON|GRANT\b|"
    r"REVOKE\b|CREATE\s+SEQUENCE|ALTER\s+SEQUENCE|CREATE\s+(OR\s+REPLACE\s+)?FUNCTION|"
    r"CREATE\s+(OR\s+REPLACE\s+)?TRIGGER|CREATE\s+(UNIQUE\s+)?INDEX|CREATE\s+SCHEMA|"
    r"ALTER\s+TABLE|ALTER\s+.*\s+OWNER\s+TO|CREATE\s+(OR\s+REPLACE\s+)?VIEW|"
    r"CREATE\s+(OR\s+REPLACE\s+)?PROCEDURE|CREATE\s+AGGREGATE|\\)",
    re.IGNORECASE,
)
_COPY = re.compile(r"^COPY\s+([\w.\"]+)\s*(?:\(([^)]*)\))?\s+FROM\s+stdin", re.IGNORECASE)


def _unescape_copy(field: str):
    if field == "\\N":
        return None
    out = []
    i = 0
    mapping = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", "b": "\b", "f": "\f", "v": "\v"}
    while i < len(field):
        ch = field[i]
        if ch == "\\" and i + 1 < len(field):
            out.append(mapping.get(field[i + 1], field[i + 1]))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _strip_schema(name: str) -> str:
    parts = [p.strip('"') for p in re.split(r"\.(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", name)]
    return _ident(parts[-1])


def _statements(text: str):
    """Statements of a dump, dollar-quote and string aware; COPY data blocks as one unit."""
    lines = text.splitlines()
    i = 0
    buffer: list[str] = []
    dollar: str | None = None
    while i < len(lines):
        line = lines[i]
        i += 1
        if not buffer and dollar is None:
            stripped = line.strip()
            if not stripped or stripped.startswith("--"):
                continue
            match = _COPY.match(stripped)
            if match:
                data = []
                while i < len(lines) and lines[i] != "\\.":
                    data.append(lines[i])
                    i += 1
                i += 1
                yield ("copy", match.group(1), match.group(2), data)
                continue
        buffer.append(line)
        for tag in re.findall(r"\$[A-Za-z_]*\$", line):
            dollar = None if dollar == tag else (dollar or tag)
        if dollar is None and line.rstrip().endswith(";"):
            yield ("sql", "\n".join(buffer), None, None)
            buffer = []
    if buffer:
        yield ("sql", "\n".join(buffer), None, None)


def pg_dump_to_duckdb_script(text: str) -> str:
    """A DuckDB script from a plain-text ``pg_dump`` (schema and data).

    Example:
        >>> import duckdb
        >>> dump = '''SET statement_timeout = 0;
        ... CREATE TABLE public."Signals" (id integer NOT NULL, snr numeric(5,2), tags jsonb);
        ... ALTER TABLE public."Signals" OWNER TO bird;
        ... COPY public."Signals" (id, snr, tags) FROM stdin;
        ... 1\\t2.50\\t{"a": 1}
        ... 2\\t\\\\N\\t\\\\N
        ... \\\\.
        ... '''
        >>> script = pg_dump_to_duckdb_script(dump)
        >>> duckdb.connect().execute(script).execute('SELECT id, snr FROM "Signals" ORDER BY id').fetchall()
        [(1, Decimal('2.50')), (2, None)]
    """
    import sqlglot

    out: list[str] = []
    for kind, body, columns, data in _statements(text):
        if kind == "copy":
            target = _strip_schema(body)
            names = ""
            if columns:
                names = (
                    " (" + ", ".join(_ident(c.strip().strip('"')) for c in columns.split(",")) + ")"
                )
            rows = [[_unescape_copy(f) for f in line.split("\t")] for line in data]
            for start in range(0, len(rows), _BATCH):
                chunk = rows[start : start + _BATCH]
                values = ",\n".join(
                    "(" + ", ".join(_literal(v) for v in row) + ")" for row in chunk
                )
                out.append(f"INSERT INTO {target}{names} VALUES\n{values};")
            continue
        statement = body.strip()
        if _SKIP.match(statement):
            continue
        if re.match(r"^\s*(CREATE\s+TABLE|CREATE\s+TYPE|INSERT\s+INTO)", statement, re.IGNORECASE):
            try:
                trees = sqlglot.parse(statement, read="postgres")
            except sqlglot.errors.ParseError:
                continue
            for tree in trees:
                if tree is None:
                    continue
                for table in tree.find_all(sqlglot.exp.Table):
                    table.set("db", None)
                    table.set("catalog", None)
                for dtype in tree.find_all(sqlglot.exp.DataType):
                    if dtype.this in (
                        sqlglot.exp.DataType.Type.JSONB,
                        sqlglot.exp.DataType.Type.JSON,
                    ):
                        dtype.set("this", sqlglot.exp.DataType.Type.JSON)
                out.append(tree.sql(dialect="duckdb") + ";")
    return "\n".join(out) + "\n"
