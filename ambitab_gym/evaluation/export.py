"""Episode export: the stored episodes of a results file as JSON Lines, and a loader.

* :func:`export_jsonl` - write one JSON object per stored episode (the fields of
  :data:`~ambitab_gym.evaluation.store.EPISODE_COLUMNS`, JSON columns decoded), for every
  campaign of a results file or the ones named; with ``with_campaign`` each object also carries
  its campaign (kind, corpus, configuration and identity) under ``campaign``.
  ``ambitab-gym export RESULTS --jsonl`` calls it.
* :func:`write_jsonl` - the same for rows already read (one line each, UTF-8, keys in column
  order, non-finite numbers as ``null`` so that every line is strict JSON).
* :func:`load_dataset` - read such a file as a Hugging Face ``datasets.Dataset`` (the
  ``datasets`` extra: ``pip install 'ambitab-gym[datasets]'``).

The rows are analyst data: the dialogue keeps each turn's credits, so an export must never be
shown to an agent (see the trust boundary in ``docs/design.md``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ambitab_gym.errors import ConfigurationError, MissingDependency
from ambitab_gym.evaluation.report import select_campaigns
from ambitab_gym.evaluation.store import ResultsStore

__all__ = ["DATASETS_HINT", "ExportSummary", "export_jsonl", "load_dataset", "write_jsonl"]

#: How to get the optional dependency of :func:`load_dataset`.
DATASETS_HINT = "loading an export needs the datasets package: pip install 'ambitab-gym[datasets]'"


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_jsonl` wrote.

    Attributes:
        path: the JSON Lines file (``None`` when written to a stream).
        episodes: lines written, one per episode.
        campaigns: the exported campaign ids, oldest first (or in the order asked for).

    >>> ExportSummary(path=None, episodes=3, campaigns=("c1",)).episodes
    3
    """

    path: Path | None
    episodes: int
    campaigns: tuple[str, ...]


def _plain(value: Any) -> Any:
    """A JSON-ready copy: non-finite floats become ``None``; other scalars that JSON lacks
    (timestamps, decimals) become their text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def write_jsonl(rows: Iterable[Mapping[str, Any]], handle: IO[str]) -> int:
    """Write rows as JSON Lines to a text stream; returns the number of lines.

    >>> import io
    >>> out = io.StringIO()
    >>> write_jsonl([{"record_id": "r1", "f1": float("nan"), "dialogue": []}], out)
    1
    >>> out.getvalue()
    '{"record_id": "r1", "f1": null, "dialogue": []}\\n'
    """
    count = 0
    for row in rows:
        handle.write(json.dumps(_plain(row), ensure_ascii=False, allow_nan=False) + "\n")
        count += 1
    return count


def export_jsonl(
    results: str | Path,
    out: str | Path | IO[str],
    campaign_ids: Sequence[str] | None = None,
    *,
    with_campaign: bool = False,
) -> ExportSummary:
    """Export the episodes of a results file as JSON Lines.

    Args:
        results: the DuckDB results file of ``evaluate`` or ``leakage``.
        out: the file to write (missing folders are created; written to a temporary file next
            to it and renamed, so a failed export leaves no half-written file), or an open text
            stream.
        campaign_ids: campaigns by id or unique id prefix (default: every campaign, oldest
            first).
        with_campaign: add ``campaign`` to each object: the stored campaign row (``kind``,
            ``corpus``, ``env_id``, ``config`` and the identity columns) without its id, which
            the episode already has.

    Returns:
        :class:`ExportSummary`.

    Raises:
        ConfigurationError: no results file at ``results``, or a campaign id that matches no
            campaign or several.
        ResultsFileError: the file is not a DuckDB file or another process holds its lock.

    Example:
        >>> import io, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "results.duckdb")
        >>> with ResultsStore(path) as store:
        ...     store.add_campaign("c1", {}, kind="evaluate", corpus="bird")
        ...     store.add_episode({"campaign_id": "c1", "condition": "asker", "seed": 0,
        ...                        "record_id": "r1", "success": 1.0, "dialogue": []})
        >>> out = io.StringIO()
        >>> export_jsonl(path, out).episodes
        1
        >>> json.loads(out.getvalue())["success"]
        1.0
    """
    results = Path(results)
    if not results.is_file():
        raise ConfigurationError(f"no results file at {results}")
    with ResultsStore(results) as store:
        campaigns = select_campaigns(store, campaign_ids)
        chosen = [c["campaign_id"] for c in campaigns]
        rows = []
        for campaign in campaigns:
            about = {k: v for k, v in campaign.items() if k != "campaign_id"}
            for row in store.episodes(campaign["campaign_id"]):
                rows.append({**row, "campaign": about} if with_campaign else row)
    if not isinstance(out, (str, Path)):
        return ExportSummary(path=None, episodes=write_jsonl(rows, out), campaigns=tuple(chosen))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = ""
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as handle:
            partial = handle.name
            count = write_jsonl(rows, handle)
        # a temporary file is created 0600; the export is as readable as any file written
        # plainly (the report's files): 0666 less the umask
        os.chmod(partial, 0o666 & ~_umask())
        os.replace(partial, path)
    except BaseException:
        if partial:
            Path(partial).unlink(missing_ok=True)
        raise
    return ExportSummary(path=path, episodes=count, campaigns=tuple(chosen))


def _umask() -> int:
    """The process's file-creation mask: from ``/proc`` on Linux, else by setting it and
    restoring it (for a moment process-wide)."""
    try:
        for line in Path("/proc/self/status").read_text("ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_dataset(path: str | Path, *, cache_dir: str | Path | None = None) -> Any:
    """Load an export as a Hugging Face ``datasets.Dataset`` (one row per episode).

    The same as ``datasets.load_dataset("json", data_files=str(path), split="train")``; nothing
    is downloaded. ``cache_dir`` is where ``datasets`` keeps its Arrow cache (default: its own,
    ``~/.cache/huggingface/datasets``).

    Raises:
        MissingDependency: ``datasets`` is not installed (:data:`DATASETS_HINT`).
        ConfigurationError: no file at ``path``.
    """
    try:
        import datasets
    except ImportError:
        raise MissingDependency(DATASETS_HINT) from None
    path = Path(path)
    if not path.is_file():
        raise ConfigurationError(f"no export file at {path}")
    return datasets.load_dataset(
        "json",
        data_files=str(path),
        split="train",
        cache_dir=None if cache_dir is None else str(cache_dir),
    )
