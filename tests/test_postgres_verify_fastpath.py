"""The verifier's fast paths for PostgreSQL results agree with the slow paths.

* Comparison: ``numeric`` columns (``Decimal`` cells) are made floats and rounded in one pass,
  and a row holding a ``Decimal`` skips the exact comparison; known answers (numeric, float4/8
  values, NULLs, duplicates, order, column permutation) go through the fast
  :func:`~ambitab_gym.verify.compare.results_match` and the plain
  :func:`~ambitab_gym.verify.compare.results_match_reference`, and hypothesis draws result sets
  of such cells on which both give the same answer.
* Verifier: after a plain read-only record's first submission, its next ones go straight to
  ``_verify_read`` (engine and normalized reference kept per record); on a real PostgreSQL
  server, every verdict equals the slow path's answer computed independently from a plain
  psycopg connection's rows (``results_match_reference``), on the first and on later calls.
* Engine: the statement guard's answer kept per SQL text is the answer for the text (a cached
  refusal is raised again, the same text under a smaller length limit is refused).
"""

from __future__ import annotations

import decimal
import math

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

from ambitab_gym.corpora import load_corpus
from ambitab_gym.records import CompareRules, TaskRecord
from ambitab_gym.verify import Limits, QueryError, Verifier
from ambitab_gym.verify.compare import (
    NormalizedReference,
    normalize_rows,
    normalize_rows_reference,
    results_match,
    results_match_reference,
)
from ambitab_gym.verify.postgres import (
    PostgresEngine,
    _statement_guard,
    database_name,
    load_corpus_databases,
)

CORPUS = "bird_interact"
D = decimal.Decimal


def rules(order="set", decimals=2, column_order=True) -> CompareRules:
    return CompareRules(order=order, float_decimals=decimals, column_order=column_order)


# (submitted, reference, rules, expected): each expected answer follows from the rules alone.
KNOWN = {
    "numeric-rounded-equal": ([("a", D("12.345001"))], [("a", 12.35)], rules(), True),
    "numeric-rounded-differs": ([("a", D("12.344999"))], [("a", 12.35)], rules(), False),
    "numeric-rounds-half-even-as-float": ([(D("0.125"),)], [(0.12,)], rules(), True),
    "numeric-vs-float": ([(D("7.10"),)], [(7.1,)], rules(), True),
    "numeric-differs": ([(D("7.12"),)], [(7.1,)], rules(), False),
    "numeric-exact-float-value": ([(D("12.5"),)], [(12.5,)], rules(decimals=None), True),
    "numeric-without-decimals": ([(D("0.30001"),)], [(0.3,)], rules(decimals=None), False),
    "numeric-nan": ([(D("NaN"),)], [(float("nan"),)], rules(), True),
    "numeric-infinity": ([(D("Infinity"), D("-Infinity"))], [(math.inf, -math.inf)], rules(), True),
    "numeric-null": ([(D("1.5"),), (None,)], [(1.5,), (None,)], rules(), True),
    "numeric-null-not-zero": ([(None,)], [(D("0"),)], rules(), False),
    "numeric-negative-zero": ([(D("-0.001"),)], [(0.0,)], rules(), True),
    "numeric-int-column": ([(D("3"), 3)], [(3, 3.0)], rules(), True),
    "numeric-set-duplicates": ([(D("1.0"),), (D("1.00"),)], [(1,)], rules("set"), True),
    "numeric-multiset-duplicates": ([(D("1.0"),), (D("1.00"),)], [(1,)], rules("multiset"), False),
    "numeric-multiset-same": ([(D("2"),), (D("1.0"),), (D("1"),)], [(1,), (1,), (2,)],
                              rules("multiset"), True),
    "numeric-ordered": ([(D("1"),), (D("2"),)], [(2,), (1,)], rules("ordered"), False),
    "numeric-ordered-same": ([(D("1"),), (D("2"),)], [(1,), (2,)], rules("ordered"), True),
    "numeric-permuted": ([("a", D("1.004"))], [(1.0, "a")], rules(column_order=False), True),
    "numeric-permuted-refused": ([("a", D("1.004"))], [(1.0, "a")], rules(), False),
    "numeric-later-row": ([(1,), (D("2.001"),)], [(1,), (2,)], rules("ordered"), True),
    "float4-as-double": ([(0.30000001192092896,)], [(0.3,)], rules(decimals=4), True),
    "float8-rounded": ([(2.675,)], [(2.67,)], rules(), True),
    "text-and-numeric": ([("x", D("9.999"), None)], [("x", 10.0, None)], rules(), True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(KNOWN))
def test_known_answers_through_both_paths(case):
    submitted, reference, rule, expected = KNOWN[case]
    assert results_match_reference(submitted, reference, rule) is expected
    assert results_match(submitted, reference, rule) is expected
    prepared = NormalizedReference(reference, rule.float_decimals)
    assert results_match(submitted, prepared, rule, reference_normalized=True) is expected


def test_numeric_columns_normalize_like_cell_by_cell():
    rows = [
        ("a", D("12.345"), None, D("NaN")),
        ("b", None, D("-0.0001"), D("Infinity")),
        ("c", D("1E+3"), D("7"), D("-Infinity")),
    ]
    for decimals in (None, 0, 2, 4):
        fast, slow = normalize_rows(rows, decimals), normalize_rows_reference(rows, decimals)
        assert repr(fast) == repr(slow)  # the same values and the same types


CELLS = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True, places=None).filter(lambda d: not d.is_snan()),
    st.decimals(min_value=-1000, max_value=1000, places=3),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.integers(-5, 5),
    st.sampled_from(["a", "b", ""]),
)


@st.composite
def numeric_results(draw):
    width = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from(["numeric", "any"])) for _ in range(width)]

    def cell(kind):
        if kind == "numeric":
            return draw(st.one_of(st.none(), st.decimals(-100, 100, places=2)))
        return draw(CELLS)

    def rows(count):
        return [tuple(cell(kind) for kind in kinds) for _ in range(count)]

    reference = rows(draw(st.integers(0, 4)))
    if draw(st.booleans()) and reference:  # the reference again, permuted, with duplicates
        submitted = draw(st.permutations(reference)) + reference[: draw(st.integers(0, 2))]
        submitted = [
            tuple(float(v) if isinstance(v, D) and draw(st.booleans()) else v for v in row)
            for row in submitted
        ]
    else:
        submitted = rows(draw(st.integers(0, 4)))
    return submitted, reference


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    numeric_results(),
    st.sampled_from(["set", "multiset", "ordered"]),
    st.sampled_from([None, 0, 2, 4]),
    st.booleans(),
)
def test_random_numeric_results_agree(pair, order, decimals, column_order):
    submitted, reference = pair
    rule = rules(order, decimals, column_order)
    assert repr(normalize_rows(submitted, decimals)) == repr(
        normalize_rows_reference(submitted, decimals)
    )
    slow = results_match_reference(submitted, reference, rule)
    assert results_match(submitted, reference, rule) == slow
    prepared = NormalizedReference(reference, decimals)
    assert results_match(submitted, prepared, rule, reference_normalized=True) == slow


# -- on a real server ---------------------------------------------------------------------------

# Reference queries with the PostgreSQL types the comparison treats apart, and submissions that
# match or miss them under each rule (their verdicts come from the slow path, computed here).
REFERENCES = {
    "numeric": "SELECT x::numeric(8, 3) AS v FROM (VALUES (1.2344), (2.5), (NULL)) t(x)",
    "float4": "SELECT x::float4 AS v FROM (VALUES (0.1), (2.675), (NULL)) t(x)",
    "float8": "SELECT x::float8 AS v, y FROM (VALUES (0.1 + 0.2, 'a'), (1e-9, 'b')) t(x, y)",
    "duplicates": "SELECT x FROM (VALUES (1), (1), (2)) t(x)",
    "ordered": "SELECT x, x * 1.5 AS y FROM generate_series(1, 4) x ORDER BY x DESC",
}
SUBMISSIONS = [
    "SELECT x::numeric(8, 3) AS v FROM (VALUES (1.2344), (2.5), (NULL)) t(x)",
    "SELECT x::numeric AS v FROM (VALUES (1.2300), (2.5), (NULL)) t(x)",
    "SELECT x::float8 AS v FROM (VALUES (1.23), (2.50), (NULL)) t(x)",
    "SELECT x::float4 AS v FROM (VALUES (0.1), (2.675), (NULL)) t(x)",
    "SELECT x::float8 AS v FROM (VALUES (0.1), (2.67), (NULL)) t(x)",
    "SELECT x::float8 AS v, y FROM (VALUES (0.3, 'a'), (0, 'b')) t(x, y)",
    "SELECT y, x::numeric AS v FROM (VALUES (0.3, 'a'), (0, 'b')) t(x, y)",
    "SELECT x FROM (VALUES (2), (1), (1)) t(x)",
    "SELECT x FROM (VALUES (1), (2)) t(x)",
    "SELECT x, (x * 1.5)::float8 AS y FROM generate_series(1, 4) x ORDER BY x DESC",
    "SELECT x, x * 1.5 AS y FROM generate_series(1, 4) x ORDER BY x",
    "SELECT x, x * 1.5 AS y FROM generate_series(1, 4) x ORDER BY x DESC",
    "SELECT NULL::numeric AS v",
]
RULES = [rules("set", 2), rules("multiset", 4, False), rules("ordered", None, True)]


def _record(name: str, sql: str, database: str, rule: CompareRules) -> TaskRecord:
    from ambitab_gym.records import parse_record

    return parse_record(
        {
            "id": f"pg-fastpath-{name}-{rule.order}",
            "avt_id": f"pg-fastpath-{name}",
            "corpus": CORPUS,
            "spec": {"request": "r", "database": database},
            "verification": {
                "engine": "postgres",
                "database": database,
                "reference_sql": sql,
                "compare": {
                    "order": rule.order,
                    "float_decimals": rule.float_decimals,
                    "column_order": rule.column_order,
                },
            },
        }
    )


@pytest.fixture(scope="module")
def server(postgres_cluster):  # noqa: F811
    corpus = load_corpus(CORPUS)
    reader = load_corpus_databases(corpus, postgres_cluster.dsn())
    database = sorted(corpus.manifest.databases)[0]
    pg_corpus = load_corpus(CORPUS, engine_override="postgres", options={"dsn": reader})
    plain = psycopg.connect(f"{reader} dbname={database_name(CORPUS, database)}", autocommit=True)
    yield pg_corpus, database, plain, reader
    plain.close()


def test_verdicts_equal_the_slow_path_on_first_and_later_calls(server):
    pg_corpus, database, plain, _reader = server
    verifier = Verifier(pg_corpus.open_engine)
    try:
        for name, reference_sql in REFERENCES.items():
            reference_rows = plain.execute(reference_sql).fetchall()
            for rule in RULES:
                record = _record(name, reference_sql, database, rule)
                for sql in SUBMISSIONS:
                    expected = results_match_reference(
                        plain.execute(sql).fetchall(), reference_rows, rule
                    )
                    verdicts = [verifier.verify(record, sql) for _ in range(3)]
                    reasons = {v.reason for v in verdicts}
                    assert reasons == {"match" if expected else "mismatch"}, (name, rule, sql)
                assert verifier._read_plans[record.id][0] is record  # later calls: fast path
                # the reference itself always matches
                assert verifier.verify(record, reference_sql).success
    finally:
        verifier.close()
    assert verifier._read_plans == {}


def test_fast_path_keeps_every_failure_reason(server):
    pg_corpus, database, _plain, _reader = server
    verifier = Verifier(pg_corpus.open_engine, limits=Limits(max_rows=3))
    record = _record("failures", "SELECT 1 AS x", database, rules())
    try:
        assert verifier.verify(record, "SELECT 1 AS x").reason == "match"  # plan made
        assert record.id in verifier._read_plans
        cases = {
            "SELECT 2 AS x": "mismatch",
            "SELECT * FROM generate_series(1, 10)": "too_many_rows",
            "DELETE FROM nowhere": "rejected",
            "SELECT 1; SELECT 2": "rejected",
            "SELECT (1": "syntax",
            "SELECT 1 / 0": "runtime",
            "   ": "no_sql",
            "": "no_sql",
        }
        for sql, reason in cases.items():
            assert verifier.verify(record, sql).reason == reason, sql
        assert verifier.verify(record, None).reason == "no_sql"
        # A different record object with the same id does not use the kept plan.
        other = _record("failures", "SELECT 2 AS x", database, rules())
        assert verifier.verify(other, "SELECT 2 AS x").reason in ("match", "mismatch")
        assert verifier._read_plans[record.id][0] is other
    finally:
        verifier.close()


def test_memo_verifiers_keep_the_slow_path(server):
    pg_corpus, database, _plain, _reader = server
    verifier = Verifier(pg_corpus.open_engine, memo=True)
    record = _record("memo", "SELECT 1 AS x", database, rules())
    try:
        assert [verifier.verify(record, "SELECT 1 AS x").reason for _ in range(2)] == [
            "match",
            "match",
        ]
        assert verifier._read_plans == {} and verifier.stats.memo_hits == 1
    finally:
        verifier.close()


def test_guard_answers_kept_per_text_are_the_answers(server):
    _pg_corpus, database, _plain, reader = server
    engine = PostgresEngine(reader, dbname=database_name(CORPUS, database), pool_size=1)
    try:
        texts = {
            "SELECT 1 AS x;": None,
            "SET statement_timeout = 0": "rejected",
            "SELECT 1; SELECT 2": "rejected",
            "SELECT 1) AS x (SELECT 2": "syntax",
            "SELECT 'a\x00'": "syntax",
            "-- only a comment": "rejected",
        }
        for _round in range(3):  # first lexed, then answered from the kept answers
            for text, category in texts.items():
                if category is None:
                    assert engine.execute(text).rows == [(1,)]
                    continue
                with pytest.raises(QueryError) as caught:
                    engine.execute(text)
                assert caught.value.category == category, text
                answer = _statement_guard(text)
                assert caught.value.message == answer[1]
        assert set(engine._guarded) == set(texts)
        # The length limit is the call's, also for a text whose answer is kept.
        with pytest.raises(QueryError) as caught:
            engine.execute("SELECT 1 AS x;", limits=Limits(max_sql_length=5))
        assert caught.value.category == "too_large"
    finally:
        engine.close()


def test_loaders_kept_for_the_same_column_types_load_like_a_plain_connection(server):
    """A query whose columns have the previous query's types reuses its loaders; any other
    query makes new ones: every result is what a plain connection loads."""
    _pg_corpus, database, plain, reader = server
    engine = PostgresEngine(reader, dbname=database_name(CORPUS, database), pool_size=1)
    queries = [
        "SELECT 1.5::numeric(5, 2) AS a, 'x'::varchar(3) AS b",
        "SELECT 2.123456::numeric AS a, 'yz'::text::varchar AS b",  # the same types
        "SELECT ARRAY[1.5]::numeric[] AS a, 'x' AS b",  # another type, same names
        "SELECT 3::numeric AS a, NULL::varchar AS b",
        "SELECT '{\"k\": [1]}'::jsonb AS a, 'x'::varchar AS b",
        "SELECT x::numeric AS a, x::text::varchar AS b FROM generate_series(1, 200) x",
        "SELECT 1.5::float8 AS a, 'x'::varchar AS b",
    ]
    try:
        for _round in range(2):
            for sql in queries:
                rows = engine.execute(sql).rows
                expected = plain.execute(sql).fetchall()
                assert repr(rows) == repr(expected), sql
                assert [type(v) for row in rows for v in row] == [
                    type(v) for row in expected for v in row
                ], sql
    finally:
        engine.close()


def _loaded_size(row: tuple) -> int:
    import sys

    return sys.getsizeof(row) + sum(sys.getsizeof(value) for value in row)


@pytest.mark.parametrize("domain_guard", [True, False])
def test_both_row_guard_forms_refuse_a_row_one_byte_over_the_cap(server, domain_guard):
    """The domain form (what this server gets) and the CASE form refuse at the same byte."""
    _pg_corpus, database, plain, reader = server
    engine = PostgresEngine(reader, dbname=database_name(CORPUS, database), pool_size=1)
    sql = "SELECT repeat('x', 5000) AS s, 1 AS n"
    (server_size,) = plain.execute(f"SELECT pg_column_size(q.*) FROM ({sql}) AS q").fetchone()
    row = plain.execute(sql).fetchone()

    def run(query: str, limits: Limits) -> list:
        connection = engine._pool.get(5.0)  # (the pool's one connection, maybe a new one)
        connection._domain_guard = domain_guard
        engine._pool.put(connection)
        return engine.execute(query, limits=limits).rows

    try:
        connection = engine._pool.get(5.0)
        assert connection._domain_guard  # (the test server's roles can use the domain)
        engine._pool.put(connection)
        for _round in range(2):  # (the second time with the plans kept)
            with pytest.raises(QueryError) as caught:
                run(sql, Limits(max_result_bytes=server_size - 1))
            assert caught.value.category == "too_large"
            assert "the server refused" in caught.value.message
            # At the cap the server sends it; its loaded size (larger) is over the cap here.
            with pytest.raises(QueryError) as caught:
                run(sql, Limits(max_result_bytes=server_size))
            assert "the result is larger" in caught.value.message
            assert run(sql, Limits(max_result_bytes=_loaded_size(row))) == [row]
        # A row over the chunk guard (cap / 1024) but within the cap comes back (one at a time).
        big = "SELECT repeat('y', 200000) AS s FROM generate_series(1, 3)"
        assert run(big, Limits(max_result_bytes=2**24)) == [("y" * 200000,)] * 3
    finally:
        engine.close()


def test_the_domain_guard_is_checked_and_its_refusal_told_apart(server):
    from ambitab_gym.verify.postgres import _domain_guard_usable, _domain_refusal, _row_refused

    _pg_corpus, _database, plain, _reader = server
    assert _domain_guard_usable(plain)  # (the reader role, as the engine checks it)
    errors = {}
    for name, sql in {
        "domain": "SELECT (-1)::information_schema.cardinal_number",
        "marker": "SELECT ('ambitab: a result row is larger than the cap 7')::int",
        "other-check": "SELECT 1 / 0",
        "other-cast": "SELECT 'x'::int",
    }.items():
        with pytest.raises(psycopg.Error) as caught:
            plain.execute(sql)
        errors[name] = caught.value
    assert [_domain_refusal(e) for e in errors.values()] == [True, False, False, False]
    assert [_row_refused(e) for e in errors.values()] == [True, True, False, False]


def test_a_query_raising_the_guards_errors_itself_still_fails(server):
    """A submission can raise either guard's error on purpose: it fails (as too_large) either
    way, and the connection keeps serving."""
    _pg_corpus, database, _plain, reader = server
    engine = PostgresEngine(reader, dbname=database_name(CORPUS, database), pool_size=1)
    try:
        for sql in (
            "SELECT (-5)::information_schema.cardinal_number",
            "SELECT ('ambitab: a result row is larger than the cap ' || 3)::int",
        ):
            with pytest.raises(QueryError) as caught:
                engine.execute(sql)
            assert caught.value.category == "too_large", sql
        assert engine.execute("SELECT 0::information_schema.cardinal_number AS n").rows == [(0,)]
    finally:
        engine.close()
