"""Fast paths of the task supply (issue 21, item 4), each checked against the slow path it
replaces on many seeds:

* :class:`~ambitab_gym.generate.prefetch.PackedRecords` - an AVT's records as a prefetching
  worker sends them (one pickle per record, shared parts by number, unpickled when read) read
  back equal to the records the generator built, across tasks that share parts, and pickled
  again as a plain tuple;
* :class:`~ambitab_gym.generate.corpus.ProceduralCorpus` holding packed AVTs answers
  ``record``, ``siblings``, ``avts``, ``records`` and ``len`` as it does holding lists, through
  eviction;
* the procedural env with prefetching draws the same records as without, and times reading
  its record as part of the wait;
* the generator, made cheaper, draws for the same seeds exactly the tasks it drew before (a
  pinned digest of 360 tasks).
"""

from __future__ import annotations

import hashlib
import pickle

import gymnasium as gym
import pytest

import ambitab_gym  # noqa: F401 - registers the env ids
from ambitab_gym.actions import STOP
from ambitab_gym.generate import GeneratorConfig, TaskGenerator
from ambitab_gym.generate import database as database_module
from ambitab_gym.generate import tasks as tasks_module
from ambitab_gym.generate.corpus import ProceduralCorpus
from ambitab_gym.generate.prefetch import PackedRecords, TaskPrefetcher, task_seed
from ambitab_gym.generate.tasks import GENERATOR_VERSION


def _packed(tasks, sent, table) -> list[PackedRecords]:
    out = []
    for task in tasks:
        # through pickle, as a worker's message travels
        packed = pickle.loads(pickle.dumps(PackedRecords.pack(task.records, sent)))
        packed.attach(table)
        out.append(packed)
    return out


def test_packed_records_read_back_equal_on_many_seeds():
    generator = TaskGenerator(GeneratorConfig(ambiguities=(0, 4)), validate=False)
    tasks = [generator.generate(task_seed(3, k)) for k in range(300)]
    sent: dict = {}
    table: dict = {}
    packed = _packed(tasks, sent, table)
    shared = 0
    for task, records in zip(tasks, packed, strict=True):
        assert len(records) == len(task.records)
        assert records.avt_id == task.avt_id
        assert records.ids == tuple(r.id for r in task.records)
        # read in a scattered order: each record alone, then all of them
        for k in reversed(range(len(records))):
            assert records[k] == task.records[k]
            assert records[k].model_dump() == task.records[k].model_dump()
            assert records[k] is records[k]  # read once
        assert list(records) == list(task.records) and records == task.records
        assert task.records == records  # the reflected comparison too
        shared += sum(len(r.ambiguities) for r in task.records)
    # the shared parts travelled once each: far fewer than the records refer to
    assert 0 < len(table) == len(sent) < shared
    # an attached pack pickles as the plain tuple of its records
    again = pickle.loads(pickle.dumps(packed[5]))
    assert type(again) is tuple and again == tasks[5].records


def test_packed_records_need_their_shared_parts():
    task = TaskGenerator(ambiguities=(2, 2), validate=False).generate(1)
    packed = pickle.loads(pickle.dumps(PackedRecords.pack(task.records, {})))
    with pytest.raises(Exception, match="attach"):
        packed[0]
    packed.attach({})
    assert packed[1] == task.records[1]


def test_corpus_holding_packed_avts_answers_as_with_lists():
    generator = TaskGenerator(GeneratorConfig(ambiguities=(0, 3)), validate=False)
    tasks = [generator.generate(task_seed(8, k)) for k in range(40)]
    plain = ProceduralCorpus(generator, keep=7)
    packed_corpus = ProceduralCorpus(generator, keep=7)
    sent: dict = {}
    table: dict = {}
    for task, packed in zip(tasks, _packed(tasks, sent, table), strict=True):
        a = plain.add_records(task.avt_id, task.records)
        b = packed_corpus.add_records(task.avt_id, packed)
        assert list(a) == list(b) == list(task.records)
        assert len(plain) == len(packed_corpus)
    assert plain.records == packed_corpus.records
    assert plain.avts == packed_corpus.avts and len(plain.avts) == 7
    for record in plain.records:
        assert packed_corpus.record(record.id) == record
        assert packed_corpus.siblings(record) == plain.siblings(record)
    evicted = tasks[0].records[0].id
    for corpus in (plain, packed_corpus):
        with pytest.raises(KeyError):
            corpus.record(evicted)


def test_prefetching_env_draws_the_in_process_records_and_times_reading_them():
    kwargs = {"ambiguities": (0, 3), "domains": "all"}
    records = {}
    for prefetch in (0, 1):
        env = gym.make("AmbiTab-Procedural-v0", prefetch=prefetch, **kwargs)
        try:
            drawn = []
            for k in range(25):
                env.reset(seed=11 if k == 0 else None)
                drawn.append(env.unwrapped.record)
                env.step(STOP)
            stats = env.unwrapped.generation_stats()
            assert stats["wait_seconds"] > 0 and stats["wait_cpu_seconds"] > 0
            if prefetch:
                assert stats["prefetched"] == 25
                # the env's corpus replays a prefetched record by id
                last = drawn[-1]
                assert env.unwrapped.corpus.record(last.id) == last
                siblings = env.unwrapped.corpus.siblings(last)
                assert last in siblings and all(r.avt_id == last.avt_id for r in siblings)
            records[prefetch] = drawn
        finally:
            env.close()
    assert records[0] == records[1]


def test_prefetcher_tables_per_worker_and_per_start():
    # two workers number their shared parts independently; a restart starts new tables while
    # records handed out before still read theirs
    config = GeneratorConfig(ambiguities=(1, 3), domains=("retail", "library"))
    local = TaskGenerator(config, validate=False)
    with TaskPrefetcher(workers=2, depth=8, batch=4) as prefetcher:
        prefetcher.start(config, stream=21, index=0)
        before = [prefetcher.get() for _ in range(12)]
        prefetcher.start(config, stream=22, index=3)
        after = [prefetcher.get() for _ in range(12)]
    for stream, items in ((21, before), (22, after)):
        for item in items:
            assert isinstance(item.records, PackedRecords)
            assert item.avt_id == item.records[0].avt_id
            assert item.records == local.generate(task_seed(stream, item.index)).records


#: sha256 of the JSON of every record of 60 tasks per m = 0..5 (seeds m*1000 onwards, every
#: domain, 0-3 distractors), as generator version 4 draws them: the same seeds must keep
#: giving the same tasks (else GENERATOR_VERSION changes)
_PINNED = "35ab9a9824cb8b5c76a5a6302bde65e6564e335459b9418d918a66657506eb8f"


def test_the_same_seeds_give_the_tasks_they_gave():
    assert GENERATOR_VERSION == "4"
    digest = hashlib.sha256()
    for m in range(6):
        config = GeneratorConfig(ambiguities=(m, m), domains="all", distractors=(0, 3))
        generator = TaskGenerator(config, validate=False)
        for seed in range(m * 1000, m * 1000 + 60):
            for record in generator.generate(seed).records:
                digest.update(record.model_dump_json().encode())
    assert digest.hexdigest() == _PINNED


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_early_rejection_accepts_the_tasks_the_full_check_accepts(m):
    # the generator that rejects a draw from its readings' rows before their SQL runs, and
    # the one that runs every check in full, accept the same tasks from the same random stream
    # (a rejection consumes no randomness, so one differing verdict would shift every later
    # draw of the seed); the early path must also have rejected some draws
    config = GeneratorConfig(ambiguities=(m, m), domains="all", distractors=(0, 3))
    early = TaskGenerator(config, validate=False)
    full = TaskGenerator(config, validate=False, row_masks=False)
    rejected = []
    original = early._early_reject

    def counted(db, plan, combos):
        verdict = original(db, plan, combos)
        rejected.append(verdict)
        return verdict

    early._early_reject = counted  # type: ignore[method-assign]
    for seed in range(m * 7919, m * 7919 + 150):
        assert early.generate(seed).records == full.generate(seed).records
    assert True in rejected and False in rejected


def test_row_masks_are_the_rows_each_condition_selects():
    # every condition the generator drew in some tasks: its row mask (by a query on the person
    # or item table, or on the joined events) equals the ids the condition selects on the
    # joined event table, executed as written
    generator = TaskGenerator(
        GeneratorConfig(ambiguities=(1, 4), distractors=(0, 3), domains="all")
    )
    for seed in range(60):
        generator.generate(seed)
    checked = 0
    for db in generator.pool._databases.values():
        d = db.domain
        for key, mask in list(db.memo.items()):
            if not (isinstance(key, tuple) and key[0] == "rows"):
                continue
            _, table, cond = key
            sql = (
                f"SELECT e.{d.event_id} FROM {table} AS e "
                f"JOIN {d.entity_table} AS c ON c.{d.entity_id} = e.{d.entity_id} "
                f"JOIN {d.item_table} AS p ON p.{d.item_id} = e.{d.item_id} WHERE {cond}"
            )
            ids = {row[0] for row in db.connection.execute(sql)}
            assert mask == sum(1 << i for i in ids), (table, cond)
            assert tasks_module._row_mask(db, table, cond) == mask
            checked += 1
    assert checked > 100


def test_counts_off_the_row_masks_equal_each_count_executed():
    # every count reading of 200 count draws (accepted or not, with and without the scope
    # family's grouping): the fingerprint read off the row masks equals the one of its own
    # SQL executed on a copy of the database
    config = GeneratorConfig(ambiguities=(0, 4), distractors=(0, 3), domains="all")
    generator = TaskGenerator(config, validate=False)
    compared = {"group": 0, "overall": 0}
    original = generator._batch_keys

    def checked(db, plan, sqls, combos):
        keys = original(db, plan, sqls, combos)
        if plan.skeleton == "count":
            for sql, key in zip(sqls, keys, strict=True):
                rows = db.connection.execute(sql).fetchall()
                assert key == database_module._fingerprint_of(rows, True), sql
                compared["group" if "GROUP BY" in sql else "overall"] += 1
        return keys

    generator._batch_keys = checked  # type: ignore[method-assign]
    seed = 0
    while min(compared.values()) < 100:
        generator.generate(seed)
        seed += 1
        assert seed < 5000
