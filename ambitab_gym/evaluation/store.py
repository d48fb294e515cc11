"""The results store: every campaign and episode in one DuckDB file.

* :class:`ResultsStore` - campaigns (their config) and episodes (dialogue, credits, stop reason,
  SQL, verdict reason and detail, timings, seed, record id), keyed so that a rerun never
  duplicates an episode.

Every verdict keeps its reason (``match``, ``mismatch``, ``no_sql``, ``timeout``, ``rejected``,
``syntax``, ``runtime``, ``too_many_rows``, ``too_large``, ``engine``, ``reference_error``,
``unsupported``) and its detail. Agent-controlled text is bounded before it is stored: the
verdict detail and the error to :data:`~ambitab_gym.verify.base.MAX_MESSAGE_CHARS` characters,
the SQL to :data:`MAX_STORED_SQL_CHARS`; text that is not valid Unicode (lone surrogates) is
repaired with U+FFFD. Results files written before the ``verdict_detail`` column existed open
as they are (the column is added, empty for their episodes).

Token usage (since issue 17): each episode row has ``prompt_tokens`` and ``completion_tokens``
(INTEGER, summed over every LLM call of the episode as the server reported them; 0 without an
LLM) and ``llm_usage`` (JSON: ``{role: {"calls", "prompt_tokens", "completion_tokens"}}``, the
same per role: asker, matcher, responder, solver). Older files get the columns, NULL for their
episodes.

Campaign identity (since issue 17): each campaign row also has ``campaign_name`` (the hash of
the configuration alone: campaigns that differ only in their data share it), ``corpus_origin``
(``bundled``, ``built`` or ``path``), ``corpus_path``, ``corpus_checksum`` (sha256 of the
manifest, records and database files) and ``package_version``; NULL for campaigns stored before.
:meth:`ResultsStore.campaign` and :meth:`ResultsStore.episodes` find a campaign by its id or by
its name (the latest campaign of that name), so code that knows a configuration's hash
(``CampaignConfig.campaign_id``) still finds its campaign.

Errored episodes (an ``error`` category stored) can be re-run (``--retry-errors``): the keys
:meth:`ResultsStore.pending` hands out with ``retry_errors=True`` are written so that the new row
replaces the stored one while that one has an error; a completed row is never replaced, and
every other row is written as before (a duplicate is ignored).

Audit marks (``ambitab-gym audit``) live in their own table, ``audit_marks``: one row per
audited oracle answer (:data:`AUDIT_MARKS` names the marks), the latest mark winning.

Episodes are written in small batches (``flush_every`` episodes or ``flush_seconds``), each batch
one transaction: an interrupted campaign keeps every flushed episode, and resuming re-runs only
what is missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb

from ambitab_gym.actions import repair_text
from ambitab_gym.errors import ConfigurationError, StoreError
from ambitab_gym.verify.base import MAX_MESSAGE_CHARS, bounded_text

__all__ = [
    "AUDIT_COLUMNS",
    "CAMPAIGN_IDENTITY_COLUMNS",
    "AUDIT_MARKS",
    "EPISODE_COLUMNS",
    "MAX_STORED_SQL_CHARS",
    "ResultsFileError",
    "ResultsStore",
]

#: Stored SQL is cut to this many characters (the verifier refuses longer SQL by default).
MAX_STORED_SQL_CHARS = 100_000

# agent- or model-controlled text columns and their bound
_BOUNDS = {
    "verdict_reason": 100,
    "verdict_detail": MAX_MESSAGE_CHARS,
    "stop_reason": 100,
    "error": MAX_MESSAGE_CHARS,
    "sql": MAX_STORED_SQL_CHARS,
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id VARCHAR PRIMARY KEY,
    kind VARCHAR,
    corpus VARCHAR,
    env_id VARCHAR,
    config JSON,
    created_at TIMESTAMP DEFAULT current_timestamp,
    campaign_name VARCHAR,
    corpus_origin VARCHAR,
    corpus_path VARCHAR,
    corpus_checksum VARCHAR,
    package_version VARCHAR
);
CREATE TABLE IF NOT EXISTS episodes (
    campaign_id VARCHAR,
    condition VARCHAR,
    seed INTEGER,
    record_id VARCHAR,
    avt_id VARCHAR,
    split VARCHAR,
    m INTEGER,
    n_questions INTEGER,
    precision DOUBLE,
    recall DOUBLE,
    f1 DOUBLE,
    success DOUBLE,
    stop_reason VARCHAR,
    verdict_reason VARCHAR,
    verdict_detail VARCHAR,
    error VARCHAR,
    sql VARCHAR,
    dialogue JSON,
    timings JSON,
    elapsed_s DOUBLE,
    finished_at TIMESTAMP DEFAULT current_timestamp,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    llm_usage JSON,
    PRIMARY KEY (campaign_id, condition, seed, record_id)
);
CREATE TABLE IF NOT EXISTS audit_marks (
    item_id VARCHAR PRIMARY KEY,
    oracle VARCHAR,
    corpus VARCHAR,
    record_id VARCHAR,
    ambiguity_id VARCHAR,
    answer VARCHAR,
    resolution VARCHAR,
    mark VARCHAR,
    note VARCHAR,
    auditor VARCHAR,
    marked_at TIMESTAMP DEFAULT current_timestamp
);
"""

#: The marks a person gives an oracle answer in the audit (paper: the manual audit of the
#: BIRD-Interact response catalogue): it says the credited resolution and no more, it says more
#: than the resolution, or it contradicts or misses it.
AUDIT_MARKS = ("faithful", "reveals_more", "wrong")
#: Columns of the ``audit_marks`` table, in order (``marked_at`` is set by the store).
AUDIT_COLUMNS = (
    "item_id",
    "oracle",
    "corpus",
    "record_id",
    "ambiguity_id",
    "answer",
    "resolution",
    "mark",
    "note",
    "auditor",
)

# columns added after the first release: older results files get them on open
_ADDED_COLUMNS = (
    "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS verdict_detail VARCHAR;",
    "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS prompt_tokens INTEGER;",
    "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS completion_tokens INTEGER;",
    "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS llm_usage JSON;",
    *(
        f"ALTER TABLE campaigns ADD COLUMN IF NOT EXISTS {column} VARCHAR;"
        for column in (
            "campaign_name",
            "corpus_origin",
            "corpus_path",
            "corpus_checksum",
            "package_version",
        )
    ),
)

#: Identity columns of the ``campaigns`` table (see the module docstring), in order.
CAMPAIGN_IDENTITY_COLUMNS = (
    "campaign_name",
    "corpus_origin",
    "corpus_path",
    "corpus_checksum",
    "package_version",
)

# the Python type each numeric column's values are stored as (the others: str)
_CASTS = {"INTEGER": int, "BIGINT": int, "DOUBLE": float}

# JSON columns of the episodes table
_JSON_COLUMNS = ("dialogue", "timings", "llm_usage")

EPISODE_COLUMNS = (
    "campaign_id",
    "condition",
    "seed",
    "record_id",
    "avt_id",
    "split",
    "m",
    "n_questions",
    "precision",
    "recall",
    "f1",
    "success",
    "stop_reason",
    "verdict_reason",
    "verdict_detail",
    "error",
    "sql",
    "dialogue",
    "timings",
    "elapsed_s",
    "prompt_tokens",
    "completion_tokens",
    "llm_usage",
)


class ResultsFileError(StoreError, RuntimeError):
    """The results file cannot be opened (locked by another campaign, not a DuckDB file).

    >>> ResultsFileError("locked").category
    'store'
    """


def _refuse_other_files(path: Path) -> None:
    """Fail when ``path`` is a JSON file, such as an export (DuckDB would open it as a database
    of one table and find no campaign in it); DuckDB itself refuses other files.

    Raises:
        ResultsFileError: naming what the file is and what to give instead.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return  # created (or refused by DuckDB) below
    except OSError as error:
        raise ResultsFileError(f"cannot read results file {path}: {error}") from None
    if head[8:12] != b"DUCK" and head.lstrip()[:1] in (b"{", b"["):  # not DuckDB's magic
        raise ResultsFileError(
            f"{path} is a JSON Lines export (`ambitab-gym export` writes one), not a results "
            "file: give the DuckDB results file it was exported from (the --results file of "
            "`ambitab-gym evaluate`, by default <data home>/results/ambitab-results.duckdb)"
        )


class ResultsStore:
    """A DuckDB results file.

    Args:
        path: the ``.duckdb`` file (created when missing).
        flush_every: write buffered episodes after this many.
        flush_seconds: ... or after this many seconds.

    Example:
        >>> import tempfile, os
        >>> store = ResultsStore(os.path.join(tempfile.mkdtemp(), "results.duckdb"))
        >>> store.add_campaign("c1", {"asker": "full"}, kind="evaluate", corpus="bird")
        >>> store.add_episode({"campaign_id": "c1", "condition": "asker", "seed": 0,
        ...                    "record_id": "r1", "success": 1.0})
        >>> store.flush()
        >>> store.done_keys("c1")
        {('asker', 0, 'r1')}
        >>> store.close()
    """

    def __init__(self, path: str | Path, *, flush_every: int = 256, flush_seconds: float = 2.0):
        self.path = Path(path)
        _refuse_other_files(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = duckdb.connect(str(self.path))
        except duckdb.IOException as error:
            hint = (
                " Is another campaign writing it?"
                if "lock" in str(error).lower()
                else " Give another --results file."
            )
            raise ResultsFileError(f"cannot open results file {self.path}: {error}{hint}") from None
        self._db.execute(_SCHEMA)
        for statement in _ADDED_COLUMNS:
            self._db.execute(statement)
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        # a batch is one INSERT of one list per column (unnested): DuckDB binds a list at once
        types = {name: kind for name, kind, *_ in self._db.execute("DESCRIBE episodes").fetchall()}
        self._casts = [_CASTS.get(types[column], str) for column in EPISODE_COLUMNS]
        lists = ", ".join(
            f"unnest(CAST(? AS {'VARCHAR' if types[c] == 'JSON' else types[c]}[]))"
            for c in EPISODE_COLUMNS
        )
        self._insert_sql = f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) SELECT {lists} "
        self._buffer: list[tuple] = []
        self._last_flush = time.monotonic()
        # keys of errored episodes handed out by pending(retry_errors=True): their new rows
        # replace the stored ones; every other row is written with ON CONFLICT DO NOTHING
        self._retrying: set[tuple] = set()

    def add_campaign(
        self,
        campaign_id: str,
        config: Mapping[str, Any],
        *,
        kind: str,
        corpus: str,
        env_id: str = "",
        identity: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a campaign's configuration (idempotent).

        Args:
            identity: the values of :data:`CAMPAIGN_IDENTITY_COLUMNS` (``campaign_name``,
                ``corpus_origin``, ``corpus_path``, ``corpus_checksum``, ``package_version``);
                missing ones are stored as NULL.
        """
        identity = dict(identity or {})
        values = [identity.get(column) for column in CAMPAIGN_IDENTITY_COLUMNS]
        names = ", ".join(CAMPAIGN_IDENTITY_COLUMNS)
        holes = ", ".join("?" for _ in CAMPAIGN_IDENTITY_COLUMNS)
        self._db.execute(
            f"INSERT INTO campaigns (campaign_id, kind, corpus, env_id, config, {names}) "
            f"VALUES (?, ?, ?, ?, ?, {holes}) ON CONFLICT DO NOTHING",
            [campaign_id, kind, corpus, env_id, json.dumps(dict(config), sort_keys=True), *values],
        )

    def resolve(self, campaign_id: str) -> str:
        """The stored id a campaign id or name refers to: a campaign with that id (unless it is
        an empty campaign stored before names existed), else the latest campaign of that name,
        else the given text."""
        exact = self._db.execute(
            "SELECT campaign_name IS NOT NULL OR EXISTS (SELECT 1 FROM episodes e WHERE "
            "e.campaign_id = c.campaign_id) FROM campaigns c WHERE campaign_id = ?",
            [campaign_id],
        ).fetchone()
        if exact is not None and exact[0]:
            return campaign_id
        named = self._db.execute(
            "SELECT campaign_id FROM campaigns WHERE campaign_name = ? "
            "ORDER BY created_at DESC, campaign_id DESC LIMIT 1",
            [campaign_id],
        ).fetchone()
        return named[0] if named is not None else campaign_id

    def campaign(self, campaign_id: str) -> dict | None:
        """A stored campaign (by id or name, see :meth:`resolve`): ``campaign_id``, ``kind``,
        ``corpus``, ``env_id``, ``config`` and the :data:`CAMPAIGN_IDENTITY_COLUMNS` (None for
        campaigns stored before they existed)."""
        return self._campaign_row(self.resolve(campaign_id))

    def _campaign_row(self, campaign_id: str) -> dict | None:
        row = self._db.execute(
            "SELECT campaign_id, kind, corpus, env_id, config, "
            f"{', '.join(CAMPAIGN_IDENTITY_COLUMNS)} FROM campaigns WHERE campaign_id = ?",
            [campaign_id],
        ).fetchone()
        if row is None:
            return None
        return {
            "campaign_id": row[0],
            "kind": row[1],
            "corpus": row[2],
            "env_id": row[3],
            "config": json.loads(row[4]),
            **dict(zip(CAMPAIGN_IDENTITY_COLUMNS, row[5:], strict=True)),
        }

    def episode_count(self, campaign_id: str) -> int:
        """How many episodes a campaign (this exact id) holds."""
        self.flush()
        row = self._db.execute(
            "SELECT count(*) FROM episodes WHERE campaign_id = ?", [campaign_id]
        ).fetchone()
        return int(row[0]) if row else 0

    def campaigns_named(self, name: str) -> list[dict]:
        """Every campaign whose ``campaign_name`` (or, for campaigns stored before names
        existed, whose id) is ``name``: the same configuration, possibly over other data."""
        ids = self._db.execute(
            "SELECT campaign_id FROM campaigns WHERE campaign_name = ? OR "
            "(campaign_name IS NULL AND campaign_id = ?) ORDER BY created_at, campaign_id",
            [name, name],
        ).fetchall()
        return [c for c in (self._campaign_row(r[0]) for r in ids) if c is not None]

    def campaigns(self, kind: str | None = None) -> list[dict]:
        """Every campaign (optionally of one kind), oldest first."""
        query = "SELECT campaign_id FROM campaigns"
        params: list = []
        if kind:
            query += " WHERE kind = ?"
            params.append(kind)
        ids = [
            r[0]
            for r in self._db.execute(
                query + " ORDER BY created_at, campaign_id", params
            ).fetchall()
        ]
        return [c for c in (self._campaign_row(i) for i in ids) if c is not None]

    def done_keys(self, campaign_id: str) -> set[tuple[str, int, str]]:
        """``(condition, seed, record_id)`` of every stored episode of a campaign."""
        self.flush()
        rows = self._db.execute(
            "SELECT condition, seed, record_id FROM episodes WHERE campaign_id = ?", [campaign_id]
        ).fetchall()
        return {(c, s, r) for c, s, r in rows}

    def errored_keys(self, campaign_id: str) -> set[tuple[str, int, str]]:
        """``(condition, seed, record_id)`` of every stored episode of a campaign that ended in
        an error (what ``--retry-errors`` runs again)."""
        self.flush()
        rows = self._db.execute(
            "SELECT condition, seed, record_id FROM episodes WHERE campaign_id = ? "
            "AND error IS NOT NULL",
            [campaign_id],
        ).fetchall()
        return {(c, s, r) for c, s, r in rows}

    def pending(
        self,
        campaign_id: str,
        seeds: Iterable[int],
        conditions: Iterable[str],
        records: Iterable[Any],
        *,
        retry_errors: bool = False,
    ) -> list[tuple[str, int, Any]]:
        """``(condition, seed, record)`` of every episode of a campaign not stored yet, in run
        order (seed, then condition, then record); with ``retry_errors`` also those stored with
        an error (their rows are replaced when the new ones are written)."""
        done = self.done_keys(campaign_id)
        if retry_errors:
            errored = self.errored_keys(campaign_id)
            done -= errored
            self._retrying |= {(campaign_id, c, s, r) for c, s, r in errored}
        records, conditions = list(records), list(conditions)
        return [
            (condition, seed, record)
            for seed in seeds
            for condition in conditions
            for record in records
            if (condition, seed, record.id) not in done
        ]

    def add_episode(self, row: Mapping[str, Any]) -> None:
        """Buffer one episode; flushed in batches. Agent-controlled text is bounded and
        repaired (see the module docstring)."""
        values = []
        for column, cast in zip(EPISODE_COLUMNS, self._casts, strict=True):
            value = row.get(column)
            if column in _JSON_COLUMNS and value is not None and not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            elif value is not None and not isinstance(value, str):
                value = cast(value)  # one Python type per column: the column's list binds as one
            if isinstance(value, str):
                if column in _BOUNDS:
                    value = bounded_text(value, _BOUNDS[column])
                value = repair_text(value)[0]
            values.append(value)
        self._buffer.append(tuple(values))
        if (
            len(self._buffer) >= self.flush_every
            or time.monotonic() - self._last_flush >= self.flush_seconds
        ):
            self.flush()

    def flush(self) -> None:
        """Write buffered episodes in one transaction: a row whose key is stored already is
        ignored, unless :meth:`pending` handed its key out as an errored episode to retry (then
        it replaces the stored row, if that one still has an error).

        One ``INSERT`` of one list per column, which DuckDB binds faster than ``executemany``
        or a multi-row ``VALUES``.
        """
        if self._buffer:
            plain = [v for v in self._buffer if v[:4] not in self._retrying]
            retried = [v for v in self._buffer if v[:4] in self._retrying]
            keys = ("campaign_id", "condition", "seed", "record_id")
            update = ", ".join(
                [f"{c} = excluded.{c}" for c in EPISODE_COLUMNS if c not in keys]
                + ["finished_at = now()"]
            )
            self._db.execute("BEGIN TRANSACTION")
            try:
                self._insert(plain, "ON CONFLICT DO NOTHING")
                self._insert(
                    retried, f"ON CONFLICT DO UPDATE SET {update} WHERE episodes.error IS NOT NULL"
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._retrying.difference_update(v[:4] for v in retried)
            self._buffer.clear()
        self._last_flush = time.monotonic()

    def _insert(self, rows: list[tuple], conflict: str) -> None:
        if rows:
            columns = [list(column) for column in zip(*rows, strict=True)]
            self._db.execute(self._insert_sql + conflict, columns)

    def episodes(self, campaign_id: str | None = None) -> list[dict]:
        """Stored episodes (of one campaign, by id or name: :meth:`resolve`) as dicts (JSON
        columns decoded), in a stable order."""
        self.flush()
        query = f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes"
        params: list = []
        if campaign_id is not None:
            query += " WHERE campaign_id = ?"
            params.append(self.resolve(campaign_id))
        query += " ORDER BY campaign_id, condition, seed, record_id"
        out = []
        for row in self._db.execute(query, params).fetchall():
            item = dict(zip(EPISODE_COLUMNS, row, strict=True))
            for column in _JSON_COLUMNS:
                if isinstance(item[column], str):
                    item[column] = json.loads(item[column])
            out.append(item)
        return out

    def export_csv(self, path: str | Path, campaign_id: str | None = None) -> int:
        """Write episodes (optionally of one campaign) to CSV, creating missing folders;
        returns the number of rows."""
        import csv

        rows = self.episodes(campaign_id)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(EPISODE_COLUMNS))
            writer.writeheader()
            for row in rows:
                row = dict(row)
                for column in _JSON_COLUMNS:
                    row[column] = json.dumps(row[column], ensure_ascii=False)
                writer.writerow(row)
        return len(rows)

    def add_audit_marks(self, marks: Iterable[Mapping[str, Any]]) -> int:
        """Store audit marks (``AUDIT_COLUMNS`` keys; a mark already stored for the same
        ``item_id`` is replaced), in one transaction; returns how many were stored.

        Raises:
            ConfigurationError: (a ValueError) a mark is not one of :data:`AUDIT_MARKS`, or an
                item has no id; nothing is stored then.
        """
        rows = []
        for mark in marks:
            if mark.get("mark") not in AUDIT_MARKS:
                raise ConfigurationError(
                    f"audit mark {mark.get('mark')!r} of item {mark.get('item_id')!r} is not one "
                    f"of {', '.join(AUDIT_MARKS)}"
                )
            if not mark.get("item_id"):
                raise ConfigurationError("an audit mark without an item_id")
            rows.append([repair_text(str(mark.get(c) or ""))[0] for c in AUDIT_COLUMNS])
        if not rows:
            return 0
        names = ", ".join(AUDIT_COLUMNS)
        holes = ", ".join("?" for _ in AUDIT_COLUMNS)
        self._db.execute("BEGIN TRANSACTION")
        try:
            for row in rows:
                self._db.execute(
                    f"INSERT OR REPLACE INTO audit_marks ({names}, marked_at) "
                    f"VALUES ({holes}, current_timestamp)",
                    row,
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return len(rows)

    def audit_marks(self) -> dict[str, dict]:
        """Every stored audit mark: ``{item_id: {AUDIT_COLUMNS..., "marked_at"}}``."""
        cursor = self._db.execute(
            f"SELECT {', '.join(AUDIT_COLUMNS)}, marked_at FROM audit_marks ORDER BY item_id"
        )
        names = [*AUDIT_COLUMNS, "marked_at"]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}

    def close(self) -> None:
        self.flush()
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
