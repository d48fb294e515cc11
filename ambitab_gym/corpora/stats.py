"""Corpus statistics: the columns of paper Table 4, per split.

* :class:`SplitStats` - records, databases, records with ambiguities, ambiguities and AVTs of
  one split (or of the whole corpus).
* :func:`corpus_stats` - one :class:`SplitStats` per split, in first-appearance order.
* :func:`total_stats` - the same counts over every record of a corpus.

Only counted ambiguities (``critical`` and ``knowledge``) enter "records with ambiguities" and
"ambiguities", as in the paper; non-critical ones are reported separately.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ambitab_gym.corpora.corpus import Corpus
from ambitab_gym.records import TaskRecord

__all__ = ["SplitStats", "corpus_stats", "stats_of", "total_stats"]


@dataclass(frozen=True)
class SplitStats:
    """The Table 4 counts of a set of records.

    Attributes:
        split: the split name (``"total"`` for a whole corpus).
        records: number of records (interpretations).
        databases: distinct databases the records' specs name.
        records_with_ambiguities: records with at least one counted ambiguity (m > 0).
        ambiguities: counted ambiguities summed over records (sum of m).
        avts: distinct AVT ids.
        non_critical: non-critical ambiguities summed over records (not in Table 4).

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> stats = total_stats(load_corpus("bird"))
        >>> stats.records == len(load_corpus("bird")) and stats.avts <= stats.records
        True
    """

    split: str
    records: int
    databases: int
    records_with_ambiguities: int
    ambiguities: int
    avts: int
    non_critical: int = 0

    def as_dict(self) -> dict:
        """The counts as a plain dict (for JSON)."""
        return asdict(self)


def stats_of(split: str, records: Iterable[TaskRecord]) -> SplitStats:
    """Count the Table 4 columns over some records.

    Args:
        split: the label to carry (a split name or ``"total"``).
        records: the records to count.

    Returns:
        The counts.
    """
    records = list(records)
    return SplitStats(
        split=split,
        records=len(records),
        databases=len({r.spec.database for r in records}),
        records_with_ambiguities=sum(1 for r in records if r.m > 0),
        ambiguities=sum(r.m for r in records),
        avts=len({r.avt_id for r in records}),
        non_critical=sum(len(r.ambiguities) - r.m for r in records),
    )


def corpus_stats(corpus: Corpus) -> list[SplitStats]:
    """One :class:`SplitStats` per split of a corpus, in first-appearance order.

    Args:
        corpus: a loaded corpus.

    Returns:
        The per-split counts.
    """
    by_split: dict[str, list[TaskRecord]] = {}
    for record in corpus.records:
        by_split.setdefault(record.split, []).append(record)
    return [stats_of(split, records) for split, records in by_split.items()]


def total_stats(corpus: Corpus) -> SplitStats:
    """The counts over every record of a corpus (labelled ``"total"``)."""
    return stats_of("total", corpus.records)
