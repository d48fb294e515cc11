"""A small HR database and a write task on it, for the write-task tests.

* :data:`HR_SQL` - four staff in two regions.
* :data:`RAISE` - "give everyone in the north a raise to 150"; :data:`RAISE_TEST` checks the
  new state as a BIRD-Interact ``test_case``.
"""

from __future__ import annotations

HR_SQL = """
CREATE TABLE staff (id INTEGER PRIMARY KEY, name VARCHAR(20), salary INTEGER, region VARCHAR(10));
INSERT INTO staff VALUES (1, 'Ann', 100, 'north'), (2, 'Bob', 120, 'south'),
  (3, 'Cid', 90, 'north'), (4, 'Dee', 110, 'south');
"""
RAISE = "UPDATE staff SET salary = 150 WHERE region = 'north'"
RAISE_TEST = """
def test_case(pred_sqls, sol_sqls, db_name, conn):
    rows, error, timeout = execute_queries(
        "SELECT name, salary FROM staff ORDER BY id", db_name, conn)
    assert not error and not timeout
    assert rows == [("Ann", 150), ("Bob", 120), ("Cid", 150), ("Dee", 110)], rows
"""
