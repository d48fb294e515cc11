"""A tiny hand-written corpus whose campaign figures are worked out by hand in the tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ambitab_gym.actions import STOP

SQL = """
CREATE TABLE staff (name TEXT, salary INTEGER, bonus INTEGER, region TEXT);
INSERT INTO staff VALUES ('Ann', 100, 50, 'north'), ('Bob', 120, 0, 'south'),
  ('Cid', 90, 80, 'north'), ('Dee', 110, 10, 'south');
"""


def _record(rid, avt, request, ambiguities, sql):
    return {
        "id": rid,
        "avt_id": avt,
        "corpus": "tiny",
        "split": "all",
        "spec": {"request": request, "database": "hr"},
        "ambiguities": ambiguities,
        "verification": {"engine": "sqlite", "database": "hr", "reference_sql": sql},
        "source": {"kind": "test"},
    }


def _amb(aid, term, resolution):
    return {
        "id": aid,
        "term": term,
        "kind": "critical",
        "resolution": resolution,
        "response": resolution,
    }


# AVT A: one ambiguity (top earner by salary vs by salary + bonus); A1 is the default reading.
# AVT B: two ambiguities (region, earner measure), three readings; B1 is the default.
# C: a zero-ambiguity control.
RECORDS = [
    _record(
        "A1",
        "A",
        "Who is the top earner?",
        [_amb("earn", "top earner", "by salary only")],
        "SELECT name FROM staff ORDER BY salary DESC LIMIT 1",
    ),
    _record(
        "A2",
        "A",
        "Who is the top earner?",
        [_amb("earn", "top earner", "by salary plus bonus")],
        "SELECT name FROM staff ORDER BY salary + bonus DESC LIMIT 1",
    ),
    _record(
        "B1",
        "B",
        "List the staff of the region with their pay.",
        [_amb("reg", "region", "the north region"), _amb("pay", "pay", "salary only")],
        "SELECT name, salary FROM staff WHERE region = 'north'",
    ),
    _record(
        "B2",
        "B",
        "List the staff of the region with their pay.",
        [_amb("reg", "region", "the south region"), _amb("pay", "pay", "salary only")],
        "SELECT name, salary FROM staff WHERE region = 'south'",
    ),
    _record(
        "B3",
        "B",
        "List the staff of the region with their pay.",
        [_amb("reg", "region", "the north region"), _amb("pay", "pay", "salary plus bonus")],
        "SELECT name, salary + bonus FROM staff WHERE region = 'north'",
    ),
    _record("C1", "C", "How many staff are there?", [], "SELECT count(*) FROM staff"),
]


def write_tiny_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "databases").mkdir(exist_ok=True)
    (folder / "databases" / "hr.sql").write_text(SQL)
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    manifest = {
        "name": "tiny",
        "version": "0.0.1",
        "oracle": "intent",
        "engine": "sqlite",
        "databases": {
            "hr": {"file": "databases/hr.sql", "sha256": hashlib.sha256(SQL.encode()).hexdigest()}
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


class RegionThenElaborate:
    """Test asker: asks about "region", then "Please elaborate.", then stops."""

    def __init__(self):
        self.turn = 0

    def reset(self, *, seed=None):
        self.turn = 0

    def act(self, view):
        self.turn += 1
        return {1: "Which region do you mean?", 2: "Please elaborate."}.get(self.turn, STOP)


class SlowFullAsker:
    """Test asker for the resume test: the full asker, sleeping 20 ms per decision.

    After 30 episodes it touches the file named by ``$AMBITAB_TEST_MARKER``, so the test knows
    the campaign is under way.
    """

    privileged = True

    def __init__(self):
        from ambitab_gym.policies.scripted import FullAsker

        self.inner = FullAsker()
        self.episodes = 0

    def reset(self, *, seed=None, record=None):
        import os

        self.inner.reset(record=record)
        self.episodes += 1
        marker = os.environ.get("AMBITAB_TEST_MARKER")
        if marker and self.episodes == 30:
            Path(marker).touch()

    def act(self, view):
        import time

        time.sleep(0.02)
        return self.inner.act(view)
