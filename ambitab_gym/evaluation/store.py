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
from ambitab_gym.errors import StoreError
from ambitab_gym.verify.base import MAX_MESSAGE_CHARS, bounded_text

__all__ = ["EPISODE_COLUMNS", "MAX_STORED_SQL_CHARS", "ResultsFileError", "ResultsStore"]

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
    created_at TIMESTAMP DEFAULT current_timestamp
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
    PRIMARY KEY (campaign_id, condition, seed, record_id)
);
"""

# columns added after the first release: older results files get them on open
_ADDED_COLUMNS = ("ALTER TABLE episodes ADD COLUMN IF NOT EXISTS verdict_detail VARCHAR;",)

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
)


class ResultsFileError(StoreError, RuntimeError):
    """The results file cannot be opened (locked by another campaign, not a DuckDB file).

    >>> ResultsFileError("locked").category
    'store'
    """


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
        self._buffer: list[tuple] = []
        self._last_flush = time.monotonic()

    def add_campaign(
        self,
        campaign_id: str,
        config: Mapping[str, Any],
        *,
        kind: str,
        corpus: str,
        env_id: str = "",
    ) -> None:
        """Record a campaign's configuration (idempotent)."""
        self._db.execute(
            "INSERT INTO campaigns (campaign_id, kind, corpus, env_id, config) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [campaign_id, kind, corpus, env_id, json.dumps(dict(config), sort_keys=True)],
        )

    def campaign(self, campaign_id: str) -> dict | None:
        row = self._db.execute(
            "SELECT campaign_id, kind, corpus, env_id, config FROM campaigns WHERE campaign_id = ?",
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
        }

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
        return [c for c in (self.campaign(i) for i in ids) if c is not None]

    def done_keys(self, campaign_id: str) -> set[tuple[str, int, str]]:
        """``(condition, seed, record_id)`` of every stored episode of a campaign."""
        self.flush()
        rows = self._db.execute(
            "SELECT condition, seed, record_id FROM episodes WHERE campaign_id = ?", [campaign_id]
        ).fetchall()
        return {(c, s, r) for c, s, r in rows}

    def pending(
        self,
        campaign_id: str,
        seeds: Iterable[int],
        conditions: Iterable[str],
        records: Iterable[Any],
    ) -> list[tuple[str, int, Any]]:
        """``(condition, seed, record)`` of every episode of a campaign not stored yet, in run
        order (seed, then condition, then record)."""
        done = self.done_keys(campaign_id)
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
        for column in EPISODE_COLUMNS:
            value = row.get(column)
            if (
                column in ("dialogue", "timings")
                and value is not None
                and not isinstance(value, str)
            ):
                value = json.dumps(value, ensure_ascii=False)
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
        """Write buffered episodes in one transaction (duplicates are ignored).

        One multi-row ``INSERT`` per chunk: DuckDB's ``executemany`` costs milliseconds a row.
        """
        if self._buffer:
            row = "(" + ", ".join("?" for _ in EPISODE_COLUMNS) + ")"
            self._db.execute("BEGIN TRANSACTION")
            try:
                for start in range(0, len(self._buffer), 512):
                    chunk = self._buffer[start : start + 512]
                    self._db.execute(
                        f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) VALUES "
                        f"{', '.join(row for _ in chunk)} ON CONFLICT DO NOTHING",
                        [value for values in chunk for value in values],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._buffer.clear()
        self._last_flush = time.monotonic()

    def episodes(self, campaign_id: str | None = None) -> list[dict]:
        """Stored episodes as dicts (JSON columns decoded), in a stable order."""
        self.flush()
        query = f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes"
        params: list = []
        if campaign_id is not None:
            query += " WHERE campaign_id = ?"
            params.append(campaign_id)
        query += " ORDER BY campaign_id, condition, seed, record_id"
        out = []
        for row in self._db.execute(query, params).fetchall():
            item = dict(zip(EPISODE_COLUMNS, row, strict=True))
            for column in ("dialogue", "timings"):
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
                for column in ("dialogue", "timings"):
                    row[column] = json.dumps(row[column], ensure_ascii=False)
                writer.writerow(row)
        return len(rows)

    def close(self) -> None:
        self.flush()
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
