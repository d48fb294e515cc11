"""BIRD-Interact converter on the real official sample and Mini-Interact sample.

The official sample has PostgreSQL-dialect solutions but no PostgreSQL dump of ``alien``; the
Mini-Interact sample ships ``alien.sqlite``, which these tests give as the user's database, so
the PostgreSQL SQL runs on DuckDB. Mini-Interact withholds its solutions upstream; a few
self-written SQLite solutions stand in for the ground truth a user would obtain. A tiny
self-written plain ``pg_dump`` covers databases given as SQL.
"""

from __future__ import annotations

import json

import pytest
from convert_helpers import occurs, oracle_credits, read_jsonl, run_build, upstream

from ambitab_gym.convert.bird_interact import knowledge_text
from ambitab_gym.corpora import Corpus
from ambitab_gym.oracles import OracleContext, deterministic_oracle
from ambitab_gym.oracles.sqltext import answer_reveals_sql
from ambitab_gym.validate import validate_corpus
from ambitab_gym.verify import Verifier
from ambitab_gym.verify.taskrun import split_statements


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """One build of the official sample against Mini-Interact's alien database."""
    sample = upstream("bird_interact", "official_sample")
    mini = upstream("bird_interact", "mini_interact")
    tmp = tmp_path_factory.mktemp("birdinteract")
    catalog = tmp / "catalog.jsonl"
    catalog.write_text(
        json.dumps({"instance_id": "alien_1", "term": "signal quality",
                    "response": "Use the signal-to-noise quality indicator."}) + "\n"
    )  # fmt: skip
    out = tmp / "corpus"
    status, report = run_build(
        "bird-interact", "--source", str(sample / "bird_interact_data.jsonl"),
        "--databases", str(mini), "--responses", str(catalog), "--out", str(out),
    )  # fmt: skip
    assert status == 0, report
    tasks = {t["instance_id"]: t for t in read_jsonl(sample / "bird_interact_data.jsonl")}
    kb = {e["id"]: e for e in read_jsonl(sample / "alien" / "alien_kb.jsonl")}
    records = {r["source"]["instance_id"]: r for r in read_jsonl(out / "records.jsonl")}
    return out, report, tasks, kb, records


def test_annotations_become_ambiguities_with_their_snippets(official):
    out, report, tasks, kb, records = official
    assert records
    for instance, record in records.items():
        task = tasks[instance]
        by_id = {a["id"]: a for a in record["ambiguities"]}
        names = {n.lower(): a for a in record["ambiguities"] for n in [a["term"], *a["aliases"]]}
        groups = (
            (task["user_query_ambiguity"]["critical_ambiguity"], "critical"),
            (task["user_query_ambiguity"]["non_critical_ambiguity"], "non_critical"),
        )
        for items, kind in groups:  # every annotation survives, with its snippet verbatim
            for item in items:
                ambiguity = names[item["term"].lower()]
                assert ambiguity["kind"] == kind and item["sql_snippet"] in ambiguity["sql_snippet"]
        for item in task["knowledge_ambiguity"]:
            # one ambiguity holds the withheld entry; the knowledge-base name is its alias unless
            # the name holds another ambiguity's term (alien_M_3: "factors" in "... Factor (LIF)")
            entry = knowledge_text(kb[item["deleted_knowledge"]])
            (ambiguity,) = [a for a in record["ambiguities"] if entry in a["resolution"]]
            assert ambiguity["evidence"] == entry
            assert item["term"] in ambiguity["aliases"] or instance == "alien_M_3"
            assert not occurs(item["term"], record["spec"]["request"])  # never the term
            assert ambiguity["term"] != item["term"]
        assert all(a["response"] for a in record["ambiguities"])
        for ambiguity in record["ambiguities"]:
            if ambiguity["kind"] != "non_critical":
                assert occurs(ambiguity["term"], record["spec"]["request"]), ambiguity["term"]
        assert set(record["source"]["term_origin"]) == {
            i for i, a in by_id.items() if a["kind"] != "non_critical"
        }
    # hand-checked against the sample: alien_1 annotates "good signals", which its request
    # writes "usable signals"; its SNQI knowledge shares the SQL of "signal quality"; of the
    # term's parts only "usable" ("signal" is also "signal quality"'s)
    alien_1 = {a["id"]: a for a in records["alien_1"]["ambiguities"]}
    assert (alien_1["c_good_signals"]["term"], alien_1["c_good_signals"]["aliases"]) == (
        "usable signals", ["good signals", "usable"],
    )  # fmt: skip
    # the knowledge-base name with its words and abbreviation apart, then the snippet's columns
    # (s.SnrRatio - 0.1 * ABS(s.NoiseFloorDbm): not the constant); "snqi" of the usable-signals
    # snippet (SNQI > 0) is this ambiguity's abbreviation, not an alias of "usable signals"
    assert alien_1["c_signal_quality"]["aliases"] == [
        "Signal-to-Noise Quality Indicator (SNQI)",
        "Signal-to-Noise Quality Indicator",
        "SNQI",
        "snr ratio",
        "noise floor dbm",
        "quality",  # the term's part no other ambiguity has
    ]
    assert records["alien_1"]["source"]["term_origin"] == {
        "c_signal_quality": "annotation", "c_good_signals": "annotation_overlap"
    }  # fmt: skip
    # alien_3: the request says "lunar interference" for the Lunar Interference Factor (LIF)
    # (its snippet's columns are those of "interference level" and "problematic events" too)
    (lif,) = [a for a in records["alien_3"]["ambiguities"] if a["kind"] == "knowledge"]
    assert (lif["term"], lif["aliases"]) == (
        "lunar interference",
        ["Lunar Interference Factor (LIF)", "Lunar Interference Factor", "LIF"],
    )
    merged = [
        a for r in records.values() for a in r["ambiguities"]
        if a["kind"] == "critical" and a["evidence"]
    ]  # fmt: skip
    # of the 11 knowledge annotations of the kept tasks, alien_3's and alien_9's keep their own
    # ambiguity; alien_M_3's LIF has no phrase and folds into "observation quality", whose
    # snippet computes with ``lif`` (the entry's abbreviation); of the entry's name only "LIF"
    # is an alias there: "Lunar Interference Factor" holds the term "factors" of another one,
    # and the snippet's other columns (aoi, point acc arc) are those of "factors" too; then
    # the term's own parts, which no other ambiguity of the task has
    assert len(merged) == 9
    m_3 = {a["term"]: a for a in records["alien_M_3"]["ambiguities"]}
    assert m_3["observation quality"]["aliases"] == ["LIF", "quality", "observation"]
    assert knowledge_text(kb[9]) in m_3["observation quality"]["resolution"]
    # a FROM ... JOIN snippet: both tables and the column they are matched by
    alien_9 = {a["id"]: a for a in records["alien_9"]["ambiguities"]}
    assert alien_9["c_observation_sites"]["aliases"] == [
        "observatories",
        "telescopes",
        "observ station",
        "sites",
        "observation",
    ]
    # SET SignalClass = 'Weak': the column and the value
    m_1 = {a["id"]: a for a in records["alien_M_1"]["ambiguities"]}
    assert m_1["c_class"]["aliases"] == ["signal class", "Weak"]
    for record in records.values():  # no alias names another ambiguity of its task
        for ambiguity in record["ambiguities"]:
            others = [
                n for a in record["ambiguities"] if a is not ambiguity
                for n in [a["term"], *a["aliases"]]
            ]  # fmt: skip
            for alias in ambiguity["aliases"]:
                assert all(alias.lower() != n.lower() for n in others), (record["id"], alias)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["provenance"]["knowledge_merged_into_critical"] >= len(merged)
    assert report["terms"]["share_in_request"] == 1.0
    assert validate_corpus(out) == []


def test_a_natural_question_naming_the_phrase_gets_the_credit(official):
    out, *_ = official
    assert oracle_credits(
        out, "bird_interact-alien_1", "Which signals count as usable signals?"
    ) == {"c_good_signals"}
    assert oracle_credits(out, "bird_interact-alien_1", "How is signal quality computed?") == {
        "c_signal_quality"
    }
    assert oracle_credits(
        out, "bird_interact-alien_3", "How do you quantify lunar interference?"
    ) == {"k_lunar_interference_factor_lif"}
    for question in ("What do you mean by 'the'?", "What do you mean by 'for each'?", "Why?"):
        assert oracle_credits(out, "bird_interact-alien_1", question) == frozenset()


NATURAL = [
    # questions an asker writes without seeing the terms: knowledge-base names the visible
    # knowledge uses, the snippet's columns, tables and values
    ("alien_1", "Should I use the SNQI?", {"c_signal_quality"}),
    ("alien_1", "Is quality based on the SNR ratio?", {"c_signal_quality"}),
    ("alien_3", "Which formula gives the LIF?", {"k_lunar_interference_factor_lif"}),
    ("alien_9", "Do you want the observatories or the telescopes?", {"c_observation_sites"}),
    ("alien_9", "Should telescopes be matched to observatories by station?", {"c_observation_sites"}),
    ("alien_M_1", "Should the signal class become Weak?", {"c_class"}),
    # restatements of the request credit nothing
    ("alien_1", "How does the signal quality vary across different atmospheric conditions?", set()),
    ("alien_M_1", "So you want me to mark all signals with substandard quality?", set()),
    ("alien_9", "Give me a ranked list of all our observation sites by their quality score?", set()),
]  # fmt: skip


@pytest.mark.parametrize(("instance", "question", "expected"), NATURAL)
def test_natural_questions_name_the_readings(official, instance, question, expected):
    out, *_ = official
    record_id = f"bird_interact-{instance.lower()}"
    assert oracle_credits(out, record_id, question) == frozenset(expected)


def test_postgres_sql_is_kept_and_runs_on_duckdb(official):
    out, report, tasks, _, records = official
    for instance, record in records.items():
        assert record["verification"]["reference_sql"] == tasks[instance]["sol_sql"][0]
        assert record["verification"]["engine"] == "duckdb"
        assert record["spec"]["request"] == tasks[instance]["amb_user_query"]
        assert record["source"]["category"] == tasks[instance]["category"]
        assert record["source"]["conditions"] == tasks[instance]["conditions"]
    assert (
        "PERCENTILE_CONT(0.5) WITHIN GROUP" in records["alien_1"]["verification"]["reference_sql"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["engine"], manifest["dialect"], manifest["oracle"]) == (
        "duckdb",
        "postgres",
        "intent",
    )
    assert manifest["databases"]["alien"]["file"].endswith(".sql")
    # every task is kept but alien_M_2, whose counted annotation "parameters order" names no
    # phrase of its request (the term rule, not its category: no management_task drop)
    dropped = {d["item"].split("#")[1]: d["reason"] for d in read_jsonl(out / "dropped.jsonl")}
    assert dropped == {"alien_M_2": "no_term_in_request"}
    assert report["records"] == 13 and report["dropped"] == {"no_term_in_request": 1}


def test_postgres_only_solutions_are_kept_marked_and_counted(official):
    out, _, _, _, records = official
    # three Query solutions use PostgreSQL functions DuckDB lacks (JSON_OBJECT_AGG, jsonb_agg,
    # ARRAY_REMOVE); alien_M_4 defines a PL/pgSQL trigger function
    marked = {
        i: r["source"]["postgres_only"]
        for i, r in records.items()
        if r["source"].get("requires") == ["postgres"]
    }
    assert marked == {
        "alien_5": "the function json_object_agg()",
        "alien_7": "the function jsonb_agg()",
        "alien_9": "the function array_remove()",
        "alien_M_4": "PL/pgSQL functions (CREATE FUNCTION ... LANGUAGE plpgsql)",
    }
    assert all("requires" not in r["source"] for i, r in records.items() if i not in marked)
    provenance = json.loads((out / "manifest.json").read_text())["provenance"]
    assert provenance["requires_postgres"] == 4
    assert provenance["postgres_only_features"] == {
        "PL/pgSQL functions (CREATE FUNCTION ... LANGUAGE plpgsql)": 1,
        "the function array_remove()": 1,
        "the function json_object_agg()": 1,
        "the function jsonb_agg()": 1,
    }
    # on DuckDB (the default engine) they are not broken, they need a server: the verdict of
    # their own solution says so; the other records verify
    corpus = Corpus(out)
    verifier = Verifier(corpus.open_engine)
    try:
        for instance, record in records.items():
            verdict = verifier.verify(
                corpus.record(record["id"]), record["verification"]["reference_sql"]
            )
            if instance in marked:
                assert verdict.reason == "unsupported", instance
                assert (
                    "needs PostgreSQL" in verdict.detail and "engine='postgres'" in verdict.detail
                )
            else:
                assert verdict.reason == "match", (instance, verdict)
    finally:
        verifier.close()


def test_management_tasks_keep_test_cases_and_multi_statement_solutions(official):
    out, _, tasks, _, records = official
    management = {i for i, t in tasks.items() if t["category"] == "Management"}
    assert management == {"alien_M_1", "alien_M_2", "alien_M_3", "alien_M_4"}
    kept = management & set(records)
    assert kept == {"alien_M_1", "alien_M_3", "alien_M_4"}
    for instance in kept:
        record, task = records[instance], tasks[instance]
        assert record["verification"]["test_cases"] == task["test_cases"]
        assert (
            record["verification"]["test_cases"][0]
            .lstrip()
            .startswith("def test_case(pred_sqls, sol_sqls, db_name, conn):")
        )
        assert record["verification"]["preprocess_sql"] == task["preprocess_sql"] == []
        assert record["verification"]["cleanup_sql"] == task["clean_up_sqls"] == []
        assert record["source"]["category"] == "Management"
    # alien_M_4's one sol_sql item holds five statements (ALTER TABLE, COMMENT ON, CREATE
    # FUNCTION with a $$ body holding semicolons, DROP TRIGGER, CREATE TRIGGER)
    m_4 = records["alien_M_4"]
    assert m_4["verification"]["reference_sql"] == tasks["alien_M_4"]["sol_sql"][0]
    assert m_4["source"]["solution_statements"] == 5
    assert (
        split_statements(m_4["verification"]["reference_sql"])[2]
        .lstrip("\n")
        .startswith("CREATE OR REPLACE FUNCTION set_analyzable_flag()")
    )
    assert {records[i]["source"]["solution_statements"] for i in ("alien_M_1", "alien_M_3")} == {1}
    provenance = json.loads((out / "manifest.json").read_text())["provenance"]
    assert (provenance["management_tasks"], provenance["multi_statement_solutions"]) == (3, 1)


def test_knowledge_and_meanings_reach_the_spec_only_where_visible(official):
    _, _, tasks, kb, records = official
    sample = upstream("bird_interact", "official_sample")
    meanings = json.loads((sample / "alien" / "alien_column_meaning_base.json").read_text())
    for instance, record in records.items():
        withheld = {k["deleted_knowledge"] for k in tasks[instance]["knowledge_ambiguity"]}
        visible = record["spec"]["external_knowledge"]
        assert visible == [knowledge_text(kb[i]) for i in sorted(kb) if i not in withheld]
        for i in withheld:
            text = kb[i]["definition"]
            assert all(text not in entry for entry in visible)
            assert text not in json.dumps(record["spec"])
        assert len(record["spec"]["column_meanings"]) == len(meanings)
        assert (
            record["spec"]["column_meanings"]["Observatories.WeathProfile"]
            == (meanings["alien|Observatories|WeathProfile"])
        )
    assert records["alien_1"]["source"]["withheld_knowledge_ids"] == [0]


def test_responses_come_from_the_catalog_when_given(official):
    *_, records = official
    by_term = {a["term"]: a for a in records["alien_1"]["ambiguities"]}
    assert by_term["signal quality"]["response"] == "Use the signal-to-noise quality indicator."
    # the rest: written from the annotation, in words: COUNT(*) FILTER (WHERE SNQI > 0) as
    # analyzable signals; ORDER BY avg_snqi DESC
    assert by_term["usable signals"]["response"] == (
        'By "usable signals" I mean the number of analyzable signals, those with snqi above 0.'
    )
    assert (
        by_term["order"]["response"] == 'By "order" I mean ordered from the highest avg snqi down.'
    )
    # a knowledge annotation: the withheld entry without its LaTeX
    (lif,) = [a for a in records["alien_3"]["ambiguities"] if a["kind"] == "knowledge"]
    assert lif["response"] == (
        'By "lunar interference" I mean Lunar Interference Factor (LIF): Calculates the potential '
        "interference from lunar illumination on observations. Definition: LIF = (1 - "
        "(LunarDistDeg / 180)) × (1 - AtmosTransparency), where higher values indicate more "
        "lunar interference. Values above 0.5 suggest significant lunar contamination in data."
    )
    # a critical annotation the knowledge folded into: its snippet in words, then the entry
    # (aoi * (1 - lif) * (CASE WHEN PointAccArc < 2 THEN 1 ELSE 2.0/PointAccArc END) AS oqf)
    m_3 = {a["term"]: a for a in records["alien_M_3"]["ambiguities"]}
    assert m_3["observation quality"]["response"].startswith(
        'By "observation quality" I mean aoi times (1 minus lif) times (1 when point acc arc '
        "below 2, otherwise 2.0 divided by point acc arc). Lunar Interference Factor (LIF): "
    )


def test_no_response_hands_over_sql(official):
    """The answer check the env flags answers with, on every response of the build (the
    reference SQL's dialect and the corpus engine's), and no snippet copied."""
    out, _, tasks, _, records = official
    for instance, record in records.items():
        reference = record["verification"]["reference_sql"]
        for ambiguity in record["ambiguities"]:
            response = ambiguity["response"]
            for dialect in ("postgres", record["verification"]["engine"]):
                assert not answer_reveals_sql(response, reference, dialect), (instance, response)
            for snippet in (ambiguity["sql_snippet"] or "").splitlines():
                if len(snippet.strip()) > 8:
                    assert snippet.strip() not in response, (instance, response)
    corpus = Corpus(out)
    for record in corpus.records:  # and as the reference oracle answers a question about it
        for ambiguity in record.ambiguities:
            question = f"What do you mean by '{ambiguity.term}'?"
            credits, answer = deterministic_oracle("intent").answer(question, OracleContext(record))
            if credits:
                assert not answer_reveals_sql(answer, record.verification.reference_sql, "postgres")


def test_without_databases_every_task_is_dropped_with_a_reason(tmp_path):
    sample = upstream("bird_interact", "official_sample")
    status, report = run_build(
        "bird-interact", "--source", str(sample / "bird_interact_data.jsonl"),
        "--out", str(tmp_path / "c"),
    )  # fmt: skip
    assert status == 1
    assert report["dropped"] == {"database_missing": 14}  # Management tasks too: none dropped
    assert "--databases" in report["error"] and not (tmp_path / "c").exists()


GROUND_TRUTH = [
    {"instance_id": "households_16",
     "sol_sql": ["SELECT json_extract(socioeconomic, '$.Income_Bracket') FROM households "
                 "WHERE housenum = 3"]},
    {"instance_id": "households_1",
     "sol_sql": ["SELECT h.locregion, AVG(CAST(REPLACE(JSON_EXTRACT(p.dwelling_specs, "
                 "'$.Bath_Count'), '\"', '') AS REAL) / NULLIF(h.residentcount, 0)) "
                 "FROM households AS h JOIN properties AS p ON p.houselink = h.housenum "
                 "GROUP BY h.locregion"]},
]  # fmt: skip


def test_mini_interact_sqlite_with_user_ground_truth(tmp_path):
    mini = upstream("bird_interact", "mini_interact")
    status, report = run_build(
        "bird-interact", "--source", str(mini / "mini_interact.jsonl"), "--out", str(tmp_path / "a")
    )
    assert status == 1 and report["dropped"] == {"no_reference_sql": 25}
    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps(t) + "\n" for t in GROUND_TRUTH))
    status, report = run_build(
        "bird-interact", "--source", str(mini / "mini_interact.jsonl"),
        "--ground-truth", str(truth), "--out", str(tmp_path / "b"),
    )  # fmt: skip
    assert status == 0, report
    assert report["records"] == 2 and report["dropped"] == {"no_reference_sql": 23}
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert (manifest["engine"], manifest["dialect"]) == ("sqlite", "sqlite")
    records = {r["source"]["instance_id"]: r for r in read_jsonl(tmp_path / "b" / "records.jsonl")}
    kb = {e["id"]: e for e in read_jsonl(mini / "households" / "households_kb.jsonl")}
    visible = records["households_16"]["spec"]["external_knowledge"]
    assert knowledge_text(kb[2]) not in visible and len(visible) == len(kb) - 1


PG_DUMP = """--
-- PostgreSQL database dump
--
SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);
CREATE TABLE public.stations (
    station_id integer NOT NULL,
    name character varying(40),
    elevation_m numeric(6,1)
);
ALTER TABLE public.stations OWNER TO bird;
CREATE SEQUENCE public.stations_station_id_seq START WITH 1 INCREMENT BY 1;
CREATE FUNCTION public.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END;
$$;
COPY public.stations (station_id, name, elevation_m) FROM stdin;
1\tAlpine Ridge\t2450.5
2\tValley Floor\t120.0
3\tO'Brien Peak\t\\N
\\.
ALTER TABLE ONLY public.stations ADD CONSTRAINT stations_pkey PRIMARY KEY (station_id);
CREATE INDEX stations_name_idx ON public.stations USING btree (name);
"""

PG_TASK = {
    "instance_id": "weather_1", "selected_database": "weather",
    "query": "List stations above 1000 metres.",
    "amb_user_query": "List the high stations.",
    "sol_sql": ["SELECT name FROM stations WHERE elevation_m > 1000 ORDER BY name"],
    "preprocess_sql": [], "clean_up_sqls": [], "test_cases": [], "external_knowledge": [],
    "category": "Query", "high_level": False, "conditions": {"decimal": -1, "distinct": False},
    "user_query_ambiguity": {
        "critical_ambiguity": [{"term": "high stations", "sql_snippet": "elevation_m > 1000",
                                "is_mask": False, "type": "semantic_ambiguity"},
                               {"term": "High  stations", "sql_snippet": "ORDER BY name",
                                "is_mask": False, "type": "semantic_ambiguity"}],
        "non_critical_ambiguity": []},
    "knowledge_ambiguity": [],
}  # fmt: skip


def test_databases_given_as_a_postgres_dump(tmp_path):
    source = tmp_path / "release"
    (source / "weather").mkdir(parents=True)
    (source / "weather" / "weather.sql").write_text(PG_DUMP)
    (source / "tasks.jsonl").write_text(json.dumps(PG_TASK) + "\n")
    status, report = run_build(
        "bird-interact", "--source", str(source / "tasks.jsonl"), "--out", str(tmp_path / "c")
    )
    assert status == 0, report
    (record,) = read_jsonl(tmp_path / "c" / "records.jsonl")
    assert record["verification"]["engine"] == "duckdb"
    # the repeated term is one ambiguity holding both snippets
    assert [(a["term"], a["sql_snippet"]) for a in record["ambiguities"]] == [
        ("high stations", "elevation_m > 1000\nORDER BY name")
    ]
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["provenance"]["merged_duplicate_terms"] == 1
    script = (tmp_path / "c" / "databases" / "weather.sql").read_text()
    assert "OWNER" not in script and "FUNCTION" not in script and "INSERT INTO" in script

    import duckdb

    rows = duckdb.connect().execute(script).execute(PG_TASK["sol_sql"][0]).fetchall()
    assert rows == [("Alpine Ridge",)]
    names = (
        duckdb.connect().execute(script).execute("SELECT name FROM stations ORDER BY 1").fetchall()
    )
    assert names == [("Alpine Ridge",), ("O'Brien Peak",), ("Valley Floor",)]


TEST_CASE = """
def test_case(pred_sqls, sol_sqls, db_name, conn):
    # High stations (above 1000 m) are ten metres lower; stations without an elevation are gone.
    pred_result, _, _ = execute_queries(
        "SELECT s.name FROM stations s JOIN stations_before b ON s.station_id = b.station_id "
        "WHERE b.elevation_m > 1000 AND s.elevation_m <> b.elevation_m - 10;",
        db_name, conn,
    )
    assert pred_result == [], f"stations not lowered by ten metres: {pred_result}"
    missing, _, _ = execute_queries(
        "SELECT COUNT(*) FROM stations WHERE elevation_m IS NULL;", db_name, conn
    )
    assert missing[0][0] == 0, "stations without an elevation remain"
    kept, _, _ = execute_queries("SELECT elevation_m FROM stations WHERE station_id = 2;", db_name, conn)
    assert float(kept[0][0]) == 120.0, "low stations keep their elevation"
"""

MANAGEMENT_TASK = {
    **PG_TASK,
    "instance_id": "weather_M_1", "category": "Management",
    "amb_user_query": "Correct the high stations: lower them by ten metres and delete the stations "
                      "without an elevation.",
    "sol_sql": ["UPDATE stations SET elevation_m = elevation_m - 10 WHERE elevation_m > 1000",
                "DELETE FROM stations WHERE elevation_m IS NULL;"],
    "preprocess_sql": ["CREATE TABLE stations_before AS SELECT * FROM stations;"],
    "clean_up_sqls": ["DROP TABLE IF EXISTS stations_before;"],
    "test_cases": [TEST_CASE],
    "user_query_ambiguity": {
        "critical_ambiguity": [{"term": "high stations", "sql_snippet": "elevation_m > 1000",
                                "is_mask": False, "type": "semantic_ambiguity"}],
        "non_critical_ambiguity": []},
}  # fmt: skip

PG_ONLY_TASK = {
    **PG_TASK,
    "instance_id": "weather_2", "amb_user_query": "Give me the high stations as one JSON object.",
    "sol_sql": ["SELECT JSON_OBJECT_AGG(name, elevation_m) FROM stations WHERE elevation_m > 1000"],
}  # fmt: skip


def test_preprocess_cleanup_tests_and_solution_items_are_carried(tmp_path, caplog):
    source = tmp_path / "release"
    (source / "weather").mkdir(parents=True)
    (source / "weather" / "weather.sql").write_text(PG_DUMP)
    (source / "tasks.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in (PG_TASK, MANAGEMENT_TASK, PG_ONLY_TASK))
    )
    with caplog.at_level("WARNING", logger="ambitab_gym"):
        status, report = run_build(
            "bird-interact", "--source", str(source / "tasks.jsonl"), "--out", str(tmp_path / "c")
        )
    assert status == 0, report
    assert report["records"] == 3 and report["dropped"] == {}
    records = {r["source"]["instance_id"]: r for r in read_jsonl(tmp_path / "c" / "records.jsonl")}
    task = records["weather_M_1"]
    verification = task["verification"]
    assert verification["preprocess_sql"] == MANAGEMENT_TASK["preprocess_sql"]
    assert verification["cleanup_sql"] == MANAGEMENT_TASK["clean_up_sqls"]
    assert verification["test_cases"] == [TEST_CASE]
    # two sol_sql items: one reference_sql holding both statements, in order
    assert verification["reference_sql"] == (
        "UPDATE stations SET elevation_m = elevation_m - 10 WHERE elevation_m > 1000\n;\n"
        "DELETE FROM stations WHERE elevation_m IS NULL;"
    )
    assert [s.strip() for s in split_statements(verification["reference_sql"])] == [
        "UPDATE stations SET elevation_m = elevation_m - 10 WHERE elevation_m > 1000",
        "DELETE FROM stations WHERE elevation_m IS NULL",
    ]
    assert task["source"]["solution_statements"] == 2 and "requires" not in task["source"]
    # the PostgreSQL-only query is kept and marked, and the build says what to do about it
    assert records["weather_2"]["source"]["requires"] == ["postgres"]
    assert records["weather_2"]["source"]["postgres_only"] == "the function json_object_agg()"
    (warning,) = [r.getMessage() for r in caplog.records if "need PostgreSQL" in r.getMessage()]
    assert "1 BIRD-Interact task(s)" in warning and "engine='postgres'" in warning
    provenance = json.loads((tmp_path / "c" / "manifest.json").read_text())["provenance"]
    assert provenance["requires_postgres"] == 1 and provenance["management_tasks"] == 1
    # the corpus database is untouched by the build's check of the write task
    corpus = Corpus(tmp_path / "c")
    verifier = Verifier(corpus.open_engine)
    try:
        record = corpus.record(task["id"])
        assert verifier.verify(record, verification["reference_sql"]).reason == "match"
        half = "UPDATE stations SET elevation_m = elevation_m - 10 WHERE elevation_m > 1000"
        assert verifier.verify(record, half).reason == "mismatch"  # the NULL station remains
        rows = verifier.execute(corpus.record(records["weather_1"]["id"]), PG_TASK["sol_sql"][0])
        assert rows.rows == [("Alpine Ridge",)]
    finally:
        verifier.close()


def test_a_missing_ground_truth_file_is_one_line_and_exit_2(tmp_path, capsys):
    from ambitab_gym.cli import main
    from ambitab_gym.convert import BuildOptions, build_corpus
    from ambitab_gym.convert.common import BuildError

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"instance_id": "alien_1"}\n', "utf-8")
    missing = tmp_path / "MISSING.jsonl"
    out = tmp_path / "c"
    args = ["build", "bird-interact", "--source", str(tasks), "--ground-truth", str(missing)]
    assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"ambitab-gym build: --ground-truth {missing} does not exist\n"
    assert captured.out == "" and not out.exists()
    # the library (and `download bird-interact --ground-truth`) says the same, no traceback
    options = BuildOptions(source=tasks, extra={"ground_truth": missing})
    with pytest.raises(BuildError, match=r"^--ground-truth .*MISSING\.jsonl does not exist$"):
        build_corpus("bird-interact", options, out=out)
    assert not out.exists()
