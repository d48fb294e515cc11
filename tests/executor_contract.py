"""What every campaign executor must do, checked the same way for each (``ProcessExecutor``
in tests/test_process_campaign.py, ``RayExecutor`` in tests/test_ray_campaign.py).

* :func:`check_same_rows_as_local` - an evaluation campaign stores the local run's episodes
  (every column but timings) and gives the same summary, cut into the expected chunks.
* :func:`check_leakage_matches_local` - the same for a leakage campaign.
* :func:`check_driver_death_resumes` - a driver that dies mid-campaign leaves the rows it
  stored; rerunning resumes with the missing episodes only and ends with the local run's set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ambitab_gym.diagnostics import LeakageConfig, run_leakage
from ambitab_gym.evaluation import ResultsStore
from ambitab_gym.evaluation.runner import CampaignConfig, run_campaign

#: columns that measure time, the only ones allowed to differ between runs
TIMING = ("timings", "elapsed_s", "created_at")


def rows(path: Path) -> list[dict]:
    """The stored episodes without their timing columns, in a fixed order."""
    with ResultsStore(path) as store:
        found = [{k: v for k, v in row.items() if k not in TIMING} for row in store.episodes()]
    return sorted(found, key=lambda r: (r["condition"], r["seed"], r["record_id"]))


def keys(found: list[dict]) -> list[tuple]:
    """(condition, seed, record id) of each row."""
    return [(r["condition"], r["seed"], r["record_id"]) for r in found]


def check_same_rows_as_local(executor: Any, tmp_path: Path, **run: Any) -> list[dict]:
    """Run a 3-condition x 2-seed x 10-record campaign locally and on ``executor`` (chunks
    of 3 records); returns the local rows."""
    config = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1), limit=10)
    local = run_campaign(config, tmp_path / "local.duckdb", progress=False)
    executor.chunk = 3
    remote = run_campaign(
        config, tmp_path / "remote.duckdb", progress=False, executor=executor, **run
    )
    expected = rows(tmp_path / "local.duckdb")
    assert len(expected) == 3 * 2 * 10
    assert rows(tmp_path / "remote.duckdb") == expected
    assert remote.to_json() == local.to_json()
    # cut as condition x seed x chunks of at most 3 records: 3 x 2 x ceil(10 / 3) chunks
    assert executor.units == 3 * 2 * 4
    return expected


def check_leakage_matches_local(executor: Any, tmp_path: Path) -> None:
    config = LeakageConfig(
        "AmbiTab-Bird-v0", asker="generic", oracle="leaky-sql-responder", limit=6
    )
    local = run_leakage(config, tmp_path / "local.duckdb", progress=False, resamples=100)
    remote = run_leakage(
        config, tmp_path / "remote.duckdb", progress=False, resamples=100, executor=executor
    )
    assert rows(tmp_path / "remote.duckdb") == rows(tmp_path / "local.duckdb")
    assert remote.to_json() == local.to_json()


class DriverDied(Exception):
    """Raised by the store to stand for a driver that goes away mid-campaign."""


class _DyingStore(ResultsStore):
    """Stores ``survive`` rows, then the driver 'dies' at the next one."""

    survive = 7

    def add_episode(self, row: dict) -> None:
        if self._seen == self.survive:
            raise DriverDied
        self._seen += 1
        super().add_episode(row)


def check_driver_death_resumes(executor: Any, tmp_path: Path) -> None:
    """3 conditions x 12 records in chunks of 2; the driver dies after storing 7 rows; the
    rerun runs only the missing episodes and ends with the local run's rows."""
    config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), limit=12)
    run_campaign(config, tmp_path / "local.duckdb", progress=False)
    executor.chunk = 2
    store = _DyingStore(tmp_path / "remote.duckdb")
    store._seen = 0
    with pytest.raises(DriverDied):
        run_campaign(config, store, progress=False, executor=executor)
    store.close()
    stored = keys(rows(tmp_path / "remote.duckdb"))
    assert len(stored) == 7
    missing = {c: 12 - sum(1 for k in stored if k[0] == c) for c in ("none", "asker", "full")}
    run_campaign(config, tmp_path / "remote.duckdb", progress=False, executor=executor)
    found = rows(tmp_path / "remote.duckdb")
    assert len(keys(found)) == len(set(keys(found))) == 36
    assert found == rows(tmp_path / "local.duckdb")
    # only the missing episodes ran, cut into chunks of at most 2 per condition
    assert executor.units == sum(-(-n // 2) for n in missing.values())
