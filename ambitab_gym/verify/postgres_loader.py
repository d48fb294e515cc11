"""Loading a corpus's SQL-script databases into a PostgreSQL server for the verifier.

* :func:`load_corpus_databases` - one PostgreSQL database per corpus database (named by
  :func:`database_name`), built idempotently, plus a SELECT-only reader role.
* :func:`database_name` - ``<corpus>__<database>``.
* :data:`DANGEROUS_ROLES` - roles that could escape a read-only transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

if TYPE_CHECKING:
    from ambitab_gym.corpora.corpus import Corpus

__all__ = ["DANGEROUS_ROLES", "database_name", "load_corpus_databases"]

#: Members of these roles can read or write server files or run programs even read-only.
DANGEROUS_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
_COMMENT_PREFIX = "ambitab:"


def database_name(corpus: str, database: str) -> str:
    """The PostgreSQL database that holds a corpus database.

    Example:
        >>> database_name("bird_interact", "esports_league")
        'bird_interact__esports_league'
    """
    name = f"{corpus}__{database}".lower()
    if len(name) > 55:  # identifiers stop at 63 bytes; keep room for the loader's suffix
        name = name[:46] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def _script_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_corpus_databases(
    corpus: Corpus,
    admin_dsn: str,
    *,
    reader: str = "ambitab_reader",
    reader_password: str | None = None,
    force: bool = False,
) -> str:
    """Load a corpus's SQL-script databases into a PostgreSQL server, one database each.

    Each corpus database becomes the PostgreSQL database :func:`database_name` ``(corpus,
    database)``, built under a temporary name and renamed into place, and tagged with the
    script's sha256 so a later call skips databases that are up to date. A SELECT-only role
    ``reader`` is created (or checked) and granted ``CONNECT`` and ``SELECT`` on each database.

    Args:
        corpus: the corpus whose manifest lists ``.sql`` databases.
        admin_dsn: a connection allowed to create databases and roles.
        reader: the role the verifier connects as.
        reader_password: set as the reader's password (None: leave it unchanged / none).
        force: rebuild every database even when it is up to date.

    Returns:
        A DSN for the reader (``admin_dsn`` with the reader's user and password and no
        database); pass it as ``engine_options={"dsn": ...}``.
    """
    admin = conninfo_to_dict(admin_dsn)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        _ensure_reader(connection, reader, reader_password)
        for database, entry in corpus.manifest.databases.items():
            source = corpus.path / entry.file
            if source.suffix != ".sql":
                raise ValueError(
                    f"corpus {corpus.name!r}: database {database!r} is {source.name}; only SQL "
                    "scripts can be loaded into PostgreSQL"
                )
            _load_one(
                connection,
                admin,
                database_name(corpus.name, database),
                source,
                reader,
                force=force,
            )
    params = {k: v for k, v in admin.items() if k not in ("dbname", "password", "user")}
    params["user"] = reader
    if reader_password is not None:
        params["password"] = reader_password
    return make_conninfo(**params)


def _ensure_reader(connection: psycopg.Connection, reader: str, password: str | None) -> None:
    role = sql.Identifier(reader)
    exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [reader]).fetchone()
    if exists is None:
        connection.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            ).format(role)
        )
    privileged = connection.execute(
        "SELECT coalesce(bool_or(rolsuper), false) OR bool_or(rolname = ANY(%s)) "
        "FROM pg_roles WHERE pg_has_role(%s, oid, 'MEMBER')",
        [list(DANGEROUS_ROLES), reader],
    ).fetchone()[0]
    if privileged:
        raise ValueError(f"role {reader!r} exists and is privileged; choose another reader name")
    if password is not None:
        connection.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(password)))
    connection.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))
    # Cap the temporary files one query may write (a superuser-only setting; best effort).
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        connection.execute(sql.SQL("ALTER ROLE {} SET temp_file_limit = '1GB'").format(role))


def _load_one(
    connection: psycopg.Connection,
    admin: dict,
    name: str,
    source: Path,
    reader: str,
    *,
    force: bool,
) -> None:
    digest = _script_digest(source)
    tag = f"{_COMMENT_PREFIX}{digest}"
    lock = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    connection.execute("SELECT pg_advisory_lock(%s)", [lock])
    try:
        current = connection.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [name],
        ).fetchone()
        if current is not None and current[0] == tag and not force:
            _grant_database(connection, name, reader)
            return
        staging = f"{name}__loading"
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(staging))
        )
        connection.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                sql.Identifier(staging)
            )
        )
        with psycopg.connect(make_conninfo(**{**admin, "dbname": staging})) as target:
            target.execute(source.read_text("utf-8"))  # trusted script, simple protocol
            schemas = target.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            for (schema,) in schemas:
                ident = sql.Identifier(schema)
                target.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(ident))
                target.execute(
                    sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, sql.Identifier(reader))
                )
                target.execute(
                    sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                        ident, sql.Identifier(reader)
                    )
                )
            target.commit()
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(
            sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                sql.Identifier(staging), sql.Identifier(name)
            )
        )
        connection.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(tag))
        )
        _grant_database(connection, name, reader)
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _grant_database(connection: psycopg.Connection, name: str, reader: str) -> None:
    ident = sql.Identifier(name)
    connection.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
    connection.execute(
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident, sql.Identifier(reader))
    )
