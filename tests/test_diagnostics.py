"""The four leakage diagnostics on the bundled corpora (paper Definitions 5-7, Theorem 1, A.4).

Leakage campaigns are cached per module: each (corpus, oracle, asker, solver, conditions) runs
once into one results file.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from bundled import ALL_ENV_IDS

from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.diagnostics import (
    CONDITIONS,
    DialogueSQLSolver,
    LeakageConfig,
    SchemaProbeAsker,
    find_sql,
    run_leakage,
    stored_leakage_report,
)
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.trajectory import DialogueTurn, PublicView
from ambitab_gym.verify import Verifier

RESP = ("asker:actual", "asker:hybrid")
FULL = ("full_adv:actual", "full_adv:reference")
SPEC = ("spec:hybrid", "spec:reference")
NONE = ("generic:hybrid", "generic:reference")
RESAMPLES = 400


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """campaign(env_id, oracle, asker, solver, conditions, seeds) -> (report, rows, store path)."""
    path = tmp_path_factory.mktemp("leakage") / "results.duckdb"
    cache: dict = {}

    def get(env_id, oracle, asker, solver="interpretation", conditions=None, seeds=(0,)):
        key = (env_id, oracle, asker, solver, conditions, seeds)
        if key not in cache:
            config = LeakageConfig(
                env_id,
                asker=asker,
                oracle=oracle,
                solver=solver,
                seeds=seeds,
                **({"conditions": conditions} if conditions else {}),
            )
            with ResultsStore(path) as store:
                report = run_leakage(config, store, progress=False, resamples=RESAMPLES)
                rows = store.episodes(config.campaign_id)
            cache[key] = (report, rows, path, config)
        return cache[key]

    return get


def by_condition(rows, condition):
    return {(r["seed"], r["record_id"]): r for r in rows if r["condition"] == condition}


# -- the reference oracle --------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_reference_oracle_has_zero_response_full_and_none_leakage(campaign, env_id):
    report, rows, _, _ = campaign(env_id, "deterministic", "full")
    for name in ("d_j_resp", "d_j_full", "d_rec_none"):
        assert report.to_json()[name] == {"mean": 0.0, "lo": 0.0, "hi": 0.0}, name
        assert report.diagnostics[name].per_seed == {0: 0.0}
    # the paired runs are identical episode by episode, not just equal on average
    for actual, reference in (RESP, FULL, NONE):
        first, second = by_condition(rows, actual), by_condition(rows, reference)
        assert first.keys() == second.keys() and first
        for key, row in first.items():
            other = second[key]
            assert (row["dialogue"], row["success"], row["recall"]) == (
                other["dialogue"],
                other["success"],
                other["recall"],
            )


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_reference_runs_meet_definition_7(campaign, env_id):
    report, rows, _, _ = campaign(env_id, "deterministic", "full")
    assert report.reference_ok is True
    full = [r for r in rows if r["condition"] == "full_adv:reference" and r["m"] > 0]
    generic = [r for r in rows if r["condition"] == "generic:reference" and r["m"] > 0]
    assert full and generic
    assert all(r["recall"] == 1.0 and r["precision"] == 1.0 for r in full)
    assert all(r["recall"] == 0.0 for r in generic)
    # pi_none^adv spends the whole budget: m + slack - 1 questions
    assert all(r["n_questions"] == r["m"] + 2 for r in generic)


# -- each leaky oracle raises the diagnostic designed to catch it ----------------------------


def default_reading_success(corpus, verifier):
    """record id -> whether the AVT's default reading (its first record's SQL) verifies."""
    out = {}
    for record in corpus.records:
        default = corpus.siblings(record)[0].verification.reference_sql
        out[record.id] = float(verifier.verify(record, default).success)
    return out


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_leaky_sql_responder_raises_dj_resp_and_dj_full(campaign, env_id):
    report, rows, _, _ = campaign(
        env_id, "leaky-sql-responder", "generic", "dialogue-sql-blind", RESP + FULL
    )
    for name in ("d_j_resp", "d_j_full"):
        assert report.diagnostics[name].interval.lo > 0, name
    # independent value of dJ_resp: with the SQL volunteered, every record that asks (m > 0)
    # succeeds; under (match, resp*) the blind solver gets the default reading of a
    # multi-reading AVT, and no SQL on a single-reading AVT with m > 0 (the one reading was
    # not revealed: docs/leakage.md)
    corpus = load_corpus(env_id)
    verifier = Verifier(corpus.open_engine)
    try:
        default = default_reading_success(corpus, verifier)
    finally:
        verifier.close()
    blind = {
        r.id: 0.0 if r.m > 0 and len(corpus.siblings(r)) == 1 else default[r.id]
        for r in corpus.records
    }
    expected = [(1.0 if r.m > 0 else blind[r.id]) - blind[r.id] for r in corpus.records]
    assert report.diagnostics["d_j_resp"].mean == pytest.approx(sum(expected) / len(expected))


def test_volunteered_sql_is_invisible_to_the_interpretation_solver(campaign):
    # The InterpretationSolver already succeeds on every fully disambiguated task, so the
    # leaked SQL cannot raise dJ_full with it (docs/leakage.md explains the choice of solver).
    report, _, _, _ = campaign(
        "AmbiTab-Bird-v0", "leaky-sql-responder", "generic", "interpretation", FULL
    )
    assert report.to_json()["d_j_full"] == {"mean": 0.0, "lo": 0.0, "hi": 0.0}


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_generic_credit_matcher_raises_drec_none(campaign, env_id):
    report, rows, _, _ = campaign(env_id, "generic-credit-matcher", "generic", conditions=NONE)
    d = report.to_json()["d_rec_none"]
    # the budget (m + 2 questions) covers every ambiguity, one generic question each
    assert d == {"mean": 100.0, "lo": 100.0, "hi": 100.0}
    assert report.diagnostics["d_rec_none"].interval.excludes_zero


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_schema_word_matcher_raises_drec_spec(campaign, env_id):
    leaky, rows, _, _ = campaign(
        env_id, "schema-word-matcher", "schema-probe", conditions=SPEC + NONE
    )
    reference, _, _, _ = campaign(env_id, "deterministic", "schema-probe", conditions=SPEC)
    spec = leaky.diagnostics["d_rec_spec"]
    assert spec.interval.lo > 0
    assert leaky.reference_terms["leak_rec_spec"].mean > 0
    assert spec.mean > reference.diagnostics["d_rec_spec"].mean
    # the generic probe names no schema word, so dRec_none cannot see this leak
    assert leaky.to_json()["d_rec_none"] == {"mean": 0.0, "lo": 0.0, "hi": 0.0}
    # the randomized asker's questions name the replacement's schema, not the true one
    corpus = load_corpus(env_id)
    _, _, path, config = campaign(
        env_id, "schema-word-matcher", "schema-probe", conditions=SPEC + NONE
    )
    with ResultsStore(path) as store:
        donors = store.campaign(config.campaign_id)["config"]["replacements"]
    probe = SchemaProbeAsker()
    for row in rows:
        if row["condition"] != "spec:hybrid" or not row["dialogue"]:
            continue
        record, donor = corpus.record(row["record_id"]), corpus.record(donors[row["record_id"]])
        assert donor.spec.database != record.spec.database
        first = row["dialogue"][0]["question"]
        probe.reset()
        assert first == probe.act(PublicView(corpus.public_spec(donor), questions_left=1))
        probe.reset()
        assert first != probe.act(PublicView(corpus.public_spec(record), questions_left=1))


# -- Theorem 1, part 2 -----------------------------------------------------------------------


def exact_recall(row, record) -> Fraction | None:
    """Recall recomputed from the stored dialogue's credits, as an exact fraction."""
    amb = {a.id for a in record.counted_ambiguities}
    if not amb:
        return None
    credited = (
        set().union(*(set(t["credits"]) for t in row["dialogue"])) if row["dialogue"] else set()
    )
    return Fraction(len(credited & amb), len(amb))


def exact_mean(rows, condition, corpus) -> Fraction:
    values = [
        exact_recall(r, corpus.record(r["record_id"])) for r in rows if r["condition"] == condition
    ]
    values = [v for v in values if v is not None]
    return sum(values, Fraction(0)) / len(values)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
@pytest.mark.parametrize("oracle", ["schema-word-matcher", "deterministic"])
def test_theorem_1_identity_holds_exactly(campaign, env_id, oracle):
    conditions = SPEC + NONE if oracle == "schema-word-matcher" else SPEC  # share the runs
    report, rows, _, _ = campaign(env_id, oracle, "schema-probe", conditions=conditions)
    corpus = load_corpus(env_id)
    s = exact_mean(rows, "spec:hybrid", corpus)  # dRec_spec^Q = Rec(pi^Q; match, resp*)
    r = exact_mean(rows, "spec:reference", corpus)  # Rec(pi^Q; O*)
    leak = s - r  # Leak_Rec(pi^Q; match), from the two runs
    d_rec_spec = report.diagnostics["d_rec_spec"].mean
    assert d_rec_spec == pytest.approx(float(s), abs=1e-12)
    assert report.reference_terms["leak_rec_spec"].mean == pytest.approx(float(leak), abs=1e-12)
    assert report.reference_terms["rec_spec_reference"].mean == pytest.approx(float(r), abs=1e-12)
    assert s - leak == r  # exact in rationals


# -- storage, resumption and the command -----------------------------------------------------


def test_campaign_is_stored_and_resumes_without_rerunning(campaign):
    report, rows, path, config = campaign("AmbiTab-TACO-v0", "deterministic", "full")
    records = load_corpus("AmbiTab-TACO-v0").records
    assert len(rows) == len(CONDITIONS) * len(records) == 10 * len(records)
    with ResultsStore(path) as store:
        stored = store.campaign(config.campaign_id)
        assert stored["kind"] == "leakage" and stored["config"]["oracle"] == "deterministic"
        again = run_leakage(config, store, progress=False, resamples=RESAMPLES)
        assert len(store.episodes(config.campaign_id)) == len(rows)
        from_store = stored_leakage_report(store, config.campaign_id, resamples=RESAMPLES)
    assert again.to_json() == report.to_json() == from_store.to_json()


def test_seeds_give_a_standard_deviation(campaign):
    report, rows, _, _ = campaign(
        "AmbiTab-Bird-v0", "leaky-sql-responder", "generic", "dialogue-sql-blind", RESP, (0, 1)
    )
    d = report.diagnostics["d_j_resp"]
    assert set(d.per_seed) == {0, 1} and d.sd == 0.0  # scripted parts: seeds agree exactly
    assert d.mean == pytest.approx(sum(d.per_seed.values()) / 2)


def test_leakage_command_prints_table_14_and_json(tmp_path, capsys):
    results = tmp_path / "results.duckdb"
    status = main(
        [
            "leakage",
            "AmbiTab-AmbiQT-v0",
            "--oracle",
            "generic-credit-matcher",
            "--asker",
            "generic",
            "--seeds",
            "1",
            "--resamples",
            "200",
            "--json",
            "--results",
            str(results),
        ]
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert status == 0
    payload = json.loads(out[-1])
    assert set(payload) == {"d_j_resp", "d_rec_spec", "d_j_full", "d_rec_none"}
    assert all(set(v) == {"mean", "lo", "hi"} for v in payload.values())
    assert payload["d_rec_none"] == {"mean": 100.0, "lo": 100.0, "hi": 100.0}
    assert payload["d_j_resp"]["mean"] == 0.0  # its responder is the reference one
    header = next(line for line in out if line.startswith("Oracle"))
    for label in ("dJ_resp", "dRec_spec^Q", "dJ_full", "dRec_none"):
        assert label in header
    with ResultsStore(results) as store:
        assert [c["kind"] for c in store.campaigns()] == ["leakage"]


def test_leakage_command_rejects_unknown_names(tmp_path, capsys):
    status = main(
        [
            "leakage",
            "taco",
            "--oracle",
            "leaky",
            "--asker",
            "generic",
            "--results",
            str(tmp_path / "r"),
        ]
    )
    assert status == 2
    assert "schema-word-matcher" in capsys.readouterr().err


def _leakage_run(tmp_path, capsys, solver: str) -> tuple[dict, str]:
    """A small leaky-sql-responder campaign with the shotgun probe: (--json object, stderr)."""
    status = main(
        [
            "leakage",
            "AmbiTab-Bird-v0",
            "--oracle",
            "leaky-sql-responder",
            "--asker",
            "schema-probe",
            "--solver",
            solver,
            "--limit",
            "12",
            "--resamples",
            "50",
            "--no-progress",
            "--json",
            "--results",
            str(tmp_path / f"{solver}.duckdb"),
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


SOLVER_WARNING = "does not read what the answers say"


def test_leakage_warns_when_the_solver_cannot_read_the_answers(tmp_path, capsys):
    payload, err = _leakage_run(tmp_path, capsys, "interpretation")
    # every answer carries the reference SQL, yet this solver never shows it
    assert payload["d_j_resp"]["mean"] == 0.0 and payload["d_j_full"]["mean"] == 0.0
    lines = [line for line in err.splitlines() if SOLVER_WARNING in line]
    assert len(lines) == 1
    assert lines[0] == (
        "ambitab-gym leakage: warning: solver 'interpretation' does not read what the answers "
        "say beyond the task's stored answer texts, so dJ_resp and dJ_full cannot show a "
        "response leak with it; use --solver dialogue-sql, dialogue-sql-blind or llm"
    )


@pytest.mark.parametrize("solver", ["dialogue-sql", "dialogue-sql-blind"])
def test_no_solver_warning_for_a_solver_that_reads_the_answers(tmp_path, capsys, solver):
    payload, err = _leakage_run(tmp_path, capsys, solver)
    assert payload["d_j_resp"]["mean"] > 0.0  # the same leak, now visible
    assert SOLVER_WARNING not in err and "use --solver" not in err


def test_reads_answers_declarations_match_what_the_solvers_do():
    """The declaration is checked against behaviour: a solver that reads the answers copies SQL
    an answer volunteers; one that does not submits the same SQL with or without it."""
    from ambitab_gym import registry
    from ambitab_gym.commands._args import solver_reads_answers
    from ambitab_gym.commands.leakage import solver_warning

    corpus = load_corpus("AmbiTab-Bird-v0")
    record = next(r for r in corpus.records if r.m > 0)
    spec = corpus.public_spec(record)
    plain = (DialogueTurn("Which one?", "I cannot say."),)
    leaked = (DialogueTurn("Which one?", "I cannot say. ```sql\nSELECT 4242\n```"),)
    for name in registry.names("solver"):
        if name == "llm":  # needs a server; a model reads the answers as text
            assert solver_reads_answers(name) is True
            continue
        solver = registry.create("solver", name, corpus=corpus)
        copies = solver.solve(PublicView(spec, leaked)) == "SELECT 4242"
        assert solver.solve(PublicView(spec, plain)) != "SELECT 4242"
        assert solver_reads_answers(name) is copies, name
        assert (solver_warning(name) is None) is copies, name
    # an import path is read the same way; a solver declaring nothing gets no warning
    assert solver_warning("ambitab_gym.policies.interpretation:InterpretationSolver")
    assert solver_warning("ambitab_gym.policies.probes:DialogueSQLSolver") is None
    assert solver_reads_answers("ambitab_gym.policies.base:Solver") is None


def test_config_rejects_unknown_conditions():
    with pytest.raises(ValueError, match="unknown conditions"):
        LeakageConfig("taco", asker="full", conditions=("asker:oracle",))


# -- the probes ------------------------------------------------------------------------------


def test_find_sql_reads_fences_and_bare_queries_but_not_prose():
    assert find_sql("x ```sql\nSELECT 1\n``` y ```SELECT 2```") == "SELECT 2"
    assert (
        find_sql("It is WITH t AS (SELECT 1) SELECT * FROM t")
        == "WITH t AS (SELECT 1) SELECT * FROM t"
    )
    assert find_sql("Customers with at least two orders; select the newest.") is None


def test_dialogue_sql_solver_copies_sql_and_falls_back():
    corpus = load_corpus("AmbiTab-Bird-v0")
    record = next(r for r in corpus.records if len(corpus.siblings(r)) > 1)
    default, other = corpus.siblings(record)[0], corpus.siblings(record)[1]
    spec = corpus.public_spec(record)
    revealing = tuple(
        DialogueTurn("?", a.response or a.resolution) for a in other.counted_ambiguities
    )
    leaked = (*revealing, DialogueTurn("?", f"```sql\n{record.verification.reference_sql}\n```"))
    for fallback in ("interpretation", "blind"):
        solver = DialogueSQLSolver(corpus, fallback=fallback)
        assert solver.solve(PublicView(spec, leaked)) == record.verification.reference_sql
    assert (
        DialogueSQLSolver(corpus, fallback="blind").solve(PublicView(spec, revealing))
        == default.verification.reference_sql
    )
    assert (
        DialogueSQLSolver(corpus).solve(PublicView(spec, revealing))
        == other.verification.reference_sql
    )
