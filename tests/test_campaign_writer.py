"""The campaign engine's store writer: rows are written on a thread of their own, and a campaign
stopped by Ctrl-C or by an exception in a worker still stores every episode that finished.

The store is opened with batching so large (``flush_every``/``flush_seconds``) that nothing is
written while the campaign runs: only draining the writer on the way out can store the rows.
"""

from __future__ import annotations

import pytest

from ambitab_gym.corpora import load_corpus
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.evaluation.engine import CampaignPlan, StoreWriter, run_plan
from ambitab_gym.policies.scripted import FullAsker


class _Interrupting:
    """FullAsker that raises ``error`` when the ``fail_at``-th episode of the campaign starts."""

    privileged = True

    def __init__(self, started: list[int], fail_at: int, error: BaseException) -> None:
        self.inner, self.started, self.fail_at, self.error = FullAsker(), started, fail_at, error

    def reset(self, *, seed=None, record=None) -> None:
        self.started[0] += 1
        if self.started[0] == self.fail_at:
            raise self.error
        self.inner.reset(seed=seed, record=record)

    def act(self, observation):
        return self.inner.act(observation)


def _plan(corpus, started: list[int], fail_at: int, error: BaseException, handed: list):
    def parts(condition: str):
        return AmbiTabEnv(corpus), _Interrupting(started, fail_at, error)

    def finish_row(row: dict) -> None:  # called just before the row goes to the store
        handed.append((row["condition"], row["seed"], row["record_id"]))

    return CampaignPlan(
        kind="evaluate",
        campaign_id="interrupted",
        config={"test": "interrupted"},
        corpus=corpus,
        records=corpus.records[:8],
        seeds=(0, 1, 2),
        conditions=("asker",),
        parts=parts,
        finish_row=finish_row,
    )


@pytest.mark.parametrize(
    "error", [KeyboardInterrupt(), RuntimeError("a worker broke")], ids=["ctrl-c", "exception"]
)
def test_an_interrupted_campaign_stores_every_finished_episode(tmp_path, error):
    corpus = load_corpus("taco")
    started, handed = [0], []
    plan = _plan(corpus, started, 15, error, handed)
    path = tmp_path / "results.duckdb"
    store = ResultsStore(path, flush_every=100_000, flush_seconds=3600)
    with pytest.raises(type(error)):
        run_plan(plan, store, concurrency=4, progress=False)
    store.close()
    assert 0 < len(handed) < 24  # some episodes finished, not all of them
    with ResultsStore(path) as reopened:
        assert reopened.done_keys(plan.campaign_id) == set(handed)
        # resuming runs exactly the others
        resumed = _plan(corpus, [0], 0, error, [])
        resumed.campaign_id = plan.name  # the configuration's hash, as run_plan was given it
        ran = run_plan(resumed, reopened, concurrency=4, progress=False)
        assert ran == 24 - len(handed)
        assert len(reopened.done_keys(plan.campaign_id)) == 24


def test_the_writer_raises_a_store_failure(tmp_path):
    store = ResultsStore(tmp_path / "r.duckdb")
    writer = StoreWriter(store)
    good = {"campaign_id": "c", "condition": "asker", "seed": 0, "record_id": "r0"}
    writer.add(good)
    # a dialogue that is not JSON: add_episode fails on the writer thread
    writer.add({**good, "record_id": "r1", "dialogue": [{"credits": {object()}}]})
    with pytest.raises(TypeError):
        writer.close()
    with pytest.raises(TypeError):  # and every later row is refused
        writer.add({**good, "record_id": "r2"})
    assert store.done_keys("c") == {("asker", 0, "r0")}  # what came before the failure
    store.close()


def test_a_batch_keeps_every_value_whatever_python_type_it_came_as(tmp_path):
    # one batch is one INSERT of a list per column: numpy numbers, bools and missing values
    # in the same column still land as the column's type
    import numpy as np

    store = ResultsStore(tmp_path / "r.duckdb", flush_every=1000)
    key = {"campaign_id": "c", "condition": "asker"}
    store.add_episode(
        {**key, "seed": np.int64(1), "record_id": "a", "success": True, "m": 2,
         "recall": np.float32(0.5), "dialogue": [{"question": "é?"}], "elapsed_s": 1}
    )  # fmt: skip
    store.add_episode({**key, "seed": 2, "record_id": "b", "success": 0, "m": None})
    got = {e["record_id"]: e for e in store.episodes("c")}
    assert (got["a"]["seed"], got["a"]["success"], got["a"]["m"]) == (1, 1.0, 2)
    assert (got["a"]["recall"], got["a"]["elapsed_s"]) == (0.5, 1.0)
    assert got["a"]["dialogue"] in ([{"question": "é?"}], '[{"question": "é?"}]')
    assert (got["b"]["seed"], got["b"]["success"], got["b"]["m"]) == (2, 0.0, None)
    assert got["b"]["recall"] is None and got["b"]["dialogue"] is None
    store.close()
