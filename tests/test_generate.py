"""The procedural generator: 1,000 generated records obey every corpus rule; the env and command.

One module-scoped corpus of 1,000 records (``write_corpus``) is checked for: ``validate``,
the term rules (a request phrase, not a stop word or SQL keyword, no two AVTs sharing request and
database), every reading executing with pairwise different results, the trust boundary, and the
scripted full asker reaching F1 = 1 and SR = 100 % with the interpretation solver while stopping
at once scores less. Then: byte-identical folders for one seed, ``AmbiTab-Procedural-v0``
(reproducible resets, curriculum options, held-out domains, wrappers, solver mode).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sqlite3
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from test_trust_boundary import (
    assert_nothing_privileged,
    full_actions,
    generic_actions,
    random_actions,
)
from test_trust_boundary import run as run_episode

import ambitab_gym
from ambitab_gym import STOP
from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.generate import (
    TEST_DOMAINS,
    TRAIN_DOMAINS,
    DatabasePool,
    GeneratorConfig,
    TaskGenerator,
)
from ambitab_gym.generate.corpus import write_corpus
from ambitab_gym.policies.interpretation import InterpretationSolver
from ambitab_gym.policies.scripted import FullAsker, NoneAsker
from ambitab_gym.records import TaskRecord
from ambitab_gym.validate import validate_corpus
from ambitab_gym.verify.compare import normalize_rows
from ambitab_gym.wrappers import ChatMessages, QuestionMenu


def _words(text: str) -> set[str]:
    return set(text.split())


# Words that can never be a term on their own: function words and SQL keywords.
STOP_WORDS = _words(
    "a an the of to for with from and or nor but than as that this these those is are was were "
    "be been do does did have has had will would can could what which who whom whose when where "
    "why how many much list show give find return get tell each every per all any some our "
    "their its it we you they please also just only into about so such very not no yes if by "
    "in on at over under before after within since during"
)
SQL_KEYWORDS = _words(
    "select from where group by order limit and or not in join on as count sum avg min max "
    "distinct having between like is null case when then else end union all desc asc top "
    "left right inner outer offset with"
)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("generated") / "gen"
    write_corpus(out, records=1000, seed=11, config=GeneratorConfig(databases_per_domain=4))
    return out


@pytest.fixture(scope="module")
def corpus(corpus_dir):
    return load_corpus(corpus_dir)


def test_corpus_has_exactly_the_records_asked_for_and_every_family(corpus):
    assert len(corpus.records) == 1000
    families = {f for r in corpus.records for f in r.source["families"]}
    assert families == {
        "synonym",
        "scope",
        "attachment",
        "vague",
        "knowledge",
        "choice",
        "table",
        "time",
    }
    assert {r.m for r in corpus.records} == {0, 1, 2, 3}
    # one record per combination of readings: 2^m siblings, each combination once
    for records in corpus.avts.values():
        assert len(records) == 2 ** records[0].m
        combos = {tuple(sorted(r.source["readings"].items())) for r in records}
        assert len(combos) == len(records)


def test_validate_accepts_the_generated_corpus(corpus_dir):
    assert validate_corpus(corpus_dir) == []
    assert main(["validate", str(corpus_dir)]) == 0


def test_terms_are_request_phrases_and_avts_are_unique(corpus):
    seen: dict[tuple[str, str], str] = {}
    for avt_id, records in corpus.avts.items():
        first = records[0]
        request = first.spec.request
        key = (" ".join(request.lower().split()), first.spec.database)
        assert key not in seen, (avt_id, seen.get(key))
        seen[key] = avt_id
        for ambiguity in first.ambiguities:
            term = ambiguity.term
            pattern = r"(?<!\w)" + re.escape(term) + r"(?!\w)"
            assert len(re.findall(pattern, request)) == 1, (request, term)
            words = term.lower().split()
            assert term.lower() not in STOP_WORDS | SQL_KEYWORDS, term
            # a phrase a question menu can offer: 1-3 words, no function word at either end
            assert 1 <= len(words) <= 3, term
            assert words[0] not in STOP_WORDS - {"across"} and words[-1] not in STOP_WORDS, term
            # aliases: the words that name the readings (not the term), each a name of this
            # ambiguity only (checked below and, by lemma, in test_generate_aliases.py)
            assert ambiguity.aliases, ambiguity
            for alias in ambiguity.aliases:
                assert alias.lower() != term.lower()
        names = [n.lower() for a in first.ambiguities for n in a.names]
        assert len(names) == len(set(names)), names


def test_every_reading_executes_and_siblings_differ(corpus):
    connections: dict[str, sqlite3.Connection] = {}
    for records in corpus.avts.values():
        results = []
        for record in records:
            name = record.verification.database
            if name not in connections:
                path = corpus.database_file(name, "sqlite")
                connections[name] = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = connections[name].execute(record.verification.reference_sql).fetchall()
            assert rows and all(v is not None for row in rows for v in row), record.id
            results.append(frozenset(normalize_rows(rows, 4)))
        for (i, a), (j, b) in itertools.combinations(enumerate(results), 2):
            assert a != b, (records[i].id, records[j].id)


def test_trust_boundary_over_generated_records(corpus_dir, corpus):
    env = gym.make("AmbiTab-AmbiQT-v0", corpus=corpus_dir, split="all")  # train and test
    for record in env.unwrapped.records:
        run_episode(env, record, full_actions(record))
        run_episode(env, record, generic_actions)
        run_episode(env, record, random_actions)
    # the readings of an AVT look the same to the agent: nothing derives from the hidden one
    for records in corpus.avts.values():
        views = set()
        for record in records:
            obs, _ = env.reset(options={"record_id": record.id})
            obs, *_ = env.step("Could you tell me more about what you need?")
            views.add((obs["task"], obs["dialogue"]))
        assert len(views) == 1


def test_full_asker_reaches_f1_one_and_every_reading(corpus):
    solver = InterpretationSolver(corpus)
    env = gym.make(
        "AmbiTab-AmbiQT-v0", corpus=corpus, split="all", solver=solver, zero_ambiguity="skip"
    ).unwrapped
    outcomes: dict[str, list[tuple[float, bool]]] = {"full": [], "none": []}
    for record in corpus.records:
        for name, asker in (("full", FullAsker()), ("none", NoneAsker())):
            asker.reset(record=record)
            env.reset(options={"record_id": record.id})
            while True:
                _, reward, terminated, _, info = env.step(asker.act(env.public_view))
                if terminated:
                    break
            outcomes[name].append((reward, info["success"]))
    sr_full = np.mean([s for _, s in outcomes["full"]])
    sr_none = np.mean([s for _, s in outcomes["none"]])
    assert np.mean([f for f, _ in outcomes["full"]]) == 1.0
    assert sr_full == 1.0
    assert sr_none < sr_full
    # stopping at once succeeds exactly on the default readings (the first of each AVT)
    defaults = {records[0].id for records in corpus.avts.values()}
    assert sr_none == pytest.approx(len(defaults) / len(corpus.records))


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_same_seed_writes_byte_identical_folders_and_seeds_differ(tmp_path):
    args = ["generate", "--records", "60", "--databases-per-domain", "3"]
    assert main([*args, "--seed", "5", "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--seed", "5", "--out", str(tmp_path / "b")]) == 0
    assert main([*args, "--seed", "6", "--out", str(tmp_path / "c")]) == 0
    a, b, c = (_files(tmp_path / x) for x in "abc")
    assert a == b
    assert a["records.jsonl"] != c["records.jsonl"]
    assert sum(1 for _ in (tmp_path / "a" / "records.jsonl").open()) == 60
    # a non-empty folder is refused without --force
    assert main([*args, "--seed", "5", "--out", str(tmp_path / "a")]) == 2


def test_generated_folder_works_with_evaluate(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--records", "20", "--seed", "2", "--out", str(out)]) == 0
    results = tmp_path / "results.duckdb"
    status = main(
        [
            "evaluate",
            str(out),
            "--asker",
            "full",
            "--results",
            str(results),
            "--json",
            "--no-progress",
        ]
    )
    assert status == 0
    assert '"asker"' in capsys.readouterr().out


def test_generator_is_reproducible_and_takes_a_generator():
    a, b = TaskGenerator(), TaskGenerator()
    assert a.generate(42).records == b.generate(42).records
    assert a.generate(42).records != a.generate(43).records
    one = a.generate(np.random.default_rng(1))
    two = b.generate(np.random.default_rng(1))
    assert one.records == two.records


def test_a_shared_database_pool_changes_no_task():
    pool = DatabasePool()
    shared = [TaskGenerator(pool=pool, domains=d) for d in ("train", "test")]
    alone = [TaskGenerator(domains=d) for d in ("train", "test")]
    for seed in range(30):
        for a, b in zip(shared, alone, strict=True):
            assert a.generate(seed).records == b.generate(seed).records
    assert 0 < len(pool) <= 6 * 16
    envs = [gym.make("AmbiTab-Procedural-v0", pool=pool) for _ in range(2)]
    first = [env.reset(seed=9)[0]["task"] for env in envs]
    assert first[0] == first[1] == gym.make("AmbiTab-Procedural-v0").reset(seed=9)[0]["task"]


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(_files(folder).items()):
        digest.update(name.encode("utf-8"))
        digest.update(data)
    return digest.hexdigest()


def test_speedups_change_no_task(tmp_path):
    # the digest of this corpus as written by generator version 4 (aliases that name the
    # readings and the head of a compound scope noun, attachment beside choice): the same seed gives the same bytes. A deliberate
    # change of what a seed draws bumps GENERATOR_VERSION and this digest together.
    config = GeneratorConfig(ambiguities=(0, 5), distractors=(0, 4), databases_per_domain=4)
    write_corpus(tmp_path, records=120, seed=11, config=config)
    assert _digest(tmp_path) == ("9059d2cf4f21c45a42c4b484c3078c09a53928be4eb6459f48534f4ce4944c59")


def test_fast_record_path_equals_the_validated_one():
    pool = DatabasePool()
    config = GeneratorConfig(ambiguities=(0, 5), distractors=(0, 4), domains="all")
    validated = TaskGenerator(config, pool=pool)
    fast = TaskGenerator(config, pool=pool, validate=False)
    assert validated.validate and not fast.validate
    assert not gym.make("AmbiTab-Procedural-v0").unwrapped.generator.validate
    sizes = set()
    for seed in range(120):
        a, b = validated.generate(seed), fast.generate(seed)
        assert a.records == b.records
        sizes.add(len(a.records))
        for x, y in zip(a.records, b.records, strict=True):
            assert type(y) is TaskRecord
            assert x.model_dump_json() == y.model_dump_json()
            assert x.model_dump(mode="json", by_alias=True) == y.model_dump(
                mode="json", by_alias=True
            )
            assert x.model_dump(exclude_unset=True) == y.model_dump(exclude_unset=True)
            for m, n in [
                (x, y),
                (x.spec, y.spec),
                (x.verification, y.verification),
                *zip(x.ambiguities, y.ambiguities, strict=True),
            ]:
                assert type(m) is type(n)
                assert m.model_fields_set == n.model_fields_set
            # and the fast record passes validation unchanged
            assert TaskRecord.model_validate(y.model_dump(by_alias=True)) == x
    assert {1, 2, 4, 8, 16, 32} <= sizes
    assert fast.generated == 120 and fast.seconds > 0 and fast.cpu_seconds > 0


def test_in_memory_databases_hold_what_their_scripts_build():
    # the pool fills its in-memory copies from the rows; the script is rendered on demand
    pool = DatabasePool()
    for domain in ("retail", "flights"):
        for index in range(3):
            db = pool.get(domain, index)
            assert db._script is None
            built = sqlite3.connect(":memory:")
            built.executescript(db.script)
            assert list(built.iterdump()) == list(db.connection.iterdump())
            assert db.script.startswith(f"-- {db.name}: generated by ambitab_gym.generate")


def test_m_is_capped_by_the_number_of_families():
    generator = TaskGenerator(families=("synonym",), ambiguities=(2, 3))
    assert {generator.generate(seed).records[0].m for seed in range(10)} == {1}


def test_config_rejects_bad_options():
    with pytest.raises(ValueError, match="families"):
        GeneratorConfig(families=("nope",))
    with pytest.raises(ValueError, match="domains"):
        GeneratorConfig(domains=("moon",))
    with pytest.raises(ValueError, match="ambiguities"):
        GeneratorConfig(ambiguities=(3, 1))


# -- AmbiTab-Procedural-v0 ------------------------------------------------------------------------


def test_procedural_env_resets_are_reproducible_and_fresh():
    env = gym.make("AmbiTab-Procedural-v0")
    first, _ = env.reset(seed=123)
    record = env.unwrapped.record
    again, _ = env.reset(seed=123)
    assert first["task"] == again["task"] and env.unwrapped.record == record
    tasks = set()
    for _ in range(30):
        obs, _ = env.reset()
        tasks.add(obs["task"])
    assert len(tasks) >= 25  # a fresh task at (nearly) every reset
    other = gym.make("AmbiTab-Procedural-v0")
    other.reset(seed=124)
    assert other.unwrapped.record.spec.request != record.spec.request or (
        other.unwrapped.record.spec.database != record.spec.database
    )


def test_procedural_env_passes_check_env():
    check_env(gym.make("AmbiTab-Procedural-v0").unwrapped)


def test_procedural_env_curriculum_options():
    env = gym.make(
        "AmbiTab-Procedural-v0",
        ambiguities=(2, 2),
        families=("time", "choice", "synonym"),
        domains=("library",),
        distractors=(2, 2),
    )
    for seed in range(20):
        env.reset(seed=seed)
        record = env.unwrapped.record
        assert record.m == 2
        assert set(record.source["families"]) <= {"time", "choice", "synonym"}
        assert record.spec.database.startswith("library_")
        assert len(record.source["distractors"]) == 2
    env.unwrapped.configure(ambiguities=(0, 0), distractors=(0, 0))
    env.reset(seed=0)
    assert env.unwrapped.record.m == 0
    with pytest.raises(ValueError, match="cannot change"):
        env.unwrapped.configure(oracle="knowledge")


def test_procedural_env_holds_out_the_test_domains_by_default():
    env = gym.make("AmbiTab-Procedural-v0")
    domains = set()
    for seed in range(120):
        env.reset(seed=seed)
        domains.add(env.unwrapped.record.spec.database.rsplit("_", 1)[0])
    assert domains == set(TRAIN_DOMAINS)
    test_env = gym.make("AmbiTab-Procedural-v0", domains="test")
    test_env.reset(seed=0)
    assert test_env.unwrapped.record.spec.database.rsplit("_", 1)[0] in TEST_DOMAINS


def test_procedural_env_trust_boundary_and_full_asker_with_solver():
    env = gym.make(
        "AmbiTab-Procedural-v0",
        ambiguities=(1, 3),
        solver="interpretation",
        databases_per_domain=2,
    )
    for seed in range(24):
        obs, info = env.reset(seed=seed)
        assert_nothing_privileged(env, obs, info)
        record = env.unwrapped.record
        asker = FullAsker()
        asker.reset(record=record)
        while True:
            obs, reward, terminated, _, info = env.step(asker.act(env.unwrapped.public_view))
            assert_nothing_privileged(env, obs, info)
            if terminated:
                break
        assert reward == 1.0 and info["success"] is True


def test_procedural_env_with_the_question_menu():
    env = QuestionMenu(gym.make("AmbiTab-Procedural-v0", ambiguities=(1, 2)))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    record = env.unwrapped.record
    phrases = [item.phrase for item in env.candidates()]
    # every term is a request phrase the menu offers
    assert all(a.term in phrases for a in record.ambiguities)
    slot = phrases.index(record.ambiguities[0].term)
    obs, _, _, _, info = env.step(slot)
    assert env.unwrapped.trajectory.turns[0].credits == frozenset({record.ambiguities[0].id})
    env.step(0)  # stop


def test_procedural_env_with_chat_messages_and_vector_envs():
    env = ChatMessages(gym.make("AmbiTab-Procedural-v0", ambiguities=(1, 1)))
    messages, _ = env.reset(seed=0)
    record = env.unwrapped.record
    assert record.spec.request in messages[0]["content"]
    messages, *_ = env.step(f'What do you mean by "{record.ambiguities[0].term}"?')
    assert messages[-1]["content"] == record.ambiguities[0].response
    _, reward, terminated, _, _ = env.step(STOP)
    assert terminated and reward == 1.0
    envs = gym.make_vec("AmbiTab-Procedural-v0", num_envs=2, vectorization_mode="sync")
    envs.call("configure", ambiguities=(2, 2))
    envs.reset(seed=0)
    assert [e.unwrapped.record.m for e in envs.envs] == [2, 2]


def test_procedural_env_holds_only_recent_avts():
    env = gym.make("AmbiTab-Procedural-v0", keep=3, ambiguities=(1, 2)).unwrapped
    ids = []
    for seed in range(10):
        env.reset(seed=seed)
        ids.append(env.record.id)
    corpus = env.corpus
    assert len(corpus.avts) == 3
    assert corpus.records == [r for avt in corpus.avts.values() for r in avt]
    env.reset(options={"record_id": ids[-1]})  # a recent record replays
    assert env.record.id == ids[-1]
    with pytest.raises(ValueError, match="last 3 generated"):
        env.reset(options={"record_id": ids[0]})


def test_procedural_env_renews_its_own_caches_but_not_shared_ones(monkeypatch):
    from ambitab_gym.generate import env as procedural
    from ambitab_gym.verify import Verifier

    monkeypatch.setattr(procedural, "_REFRESH_EVERY", 4)
    env = gym.make("AmbiTab-Procedural-v0", ambiguities=(1, 1)).unwrapped
    oracles, verifiers = set(), set()
    for seed in range(9):
        env.reset(seed=seed)
        oracles.add(id(env.oracle))
        verifiers.add(id(env.verifier))
        term = env.record.ambiguities[0].term
        env.step(f"Could you clarify what exactly you mean by {term}?")
        assert env.trajectory.credits == [frozenset({env.record.ambiguities[0].id})]
    assert len(oracles) == 3 and len(verifiers) == 3
    shared = Verifier(lambda kind, name: None)
    env = gym.make("AmbiTab-Procedural-v0", verifier=shared).unwrapped
    for seed in range(9):
        env.reset(seed=seed)
    assert env.verifier is shared


def test_procedural_env_refuses_corpus_options():
    with pytest.raises(TypeError, match="generates its records"):
        gym.make("AmbiTab-Procedural-v0", split="train")


def test_procedural_env_registered_with_the_package():
    assert "AmbiTab-Procedural-v0" in gym.registry
    env = gym.make("ambitab_gym:AmbiTab-Procedural-v0")
    obs, _ = env.reset(seed=1)
    obs, reward, terminated, _, _ = env.step(STOP)
    assert terminated and reward in (0.0, 1.0)
    assert ambitab_gym.STOP == STOP


@pytest.mark.parametrize("out", ["gen", "my gen", "./gen"])
def test_the_printed_validate_command_runs_as_is(out, tmp_path, monkeypatch, capsys):
    import shlex

    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--records", "3", "--out", out]) == 0
    printed = capsys.readouterr().out
    command = re.search(r"check it with `([^`]+)`", printed).group(1)
    argv = shlex.split(command)
    assert argv[:2] == ["ambitab-gym", "validate"] and argv[2].startswith("./")
    assert f"to {argv[2]};" in printed  # the folder as written, a path and not a name
    assert main(argv[1:]) == 0
    assert "OK - 3 records" in capsys.readouterr().out
