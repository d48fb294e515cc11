"""Re-scoring stored episodes from their recorded LLM-oracle routes (paper C.3), offline.

* :func:`rescore_episode` - one stored episode row: each turn that carries a route gets its
  credit again from :func:`~ambitab_gym.oracles.routes.score_route` (the route, the question,
  the rationale and the stored response); precision, recall and F1 follow
  (:func:`~ambitab_gym.metrics.score_credits`, fallback stops left out of recall and F1).
* :func:`rescore_episodes` - many rows against their records.
* :func:`rescore_campaign` - every episode of a stored campaign, records from its corpus.

No model is called: the routes, rationales and responses are stored per turn by the campaign
runners. Turns without a route (deterministic and leaky oracles, or results stored before routes
were) keep their stored credits. ``ambitab-gym rescore RESULTS`` prints the re-scored tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.metrics import score_credits
from ambitab_gym.oracles.base import Route
from ambitab_gym.oracles.routes import score_route
from ambitab_gym.records import TaskRecord

__all__ = ["rescore_campaign", "rescore_episode", "rescore_episodes"]


def rescore_episode(row: Mapping[str, Any], record: TaskRecord) -> dict[str, Any]:
    """A copy of a stored episode row with its routed turns re-credited and its scores redone.

    The copy has ``rescored_turns`` (turns with a route) and ``changed_turns`` (turns whose
    credit changed) besides the stored fields.

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners", "database": "hr"},
        ...     "ambiguities": [{"id": "top", "term": "top earners", "resolution": "3 best"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> row = {"record_id": "r", "stop_reason": "asker", "dialogue": [
        ...     {"question": "How many?", "answer": "The top earners are the best 3.",
        ...      "credits": [], "route": {"kind": "unlabeled", "argument": "LIMIT 3"}}]}
        >>> new = rescore_episode(row, record)
        >>> new["dialogue"][0]["credits"], new["recall"], new["changed_turns"]
        (['top'], 1.0, 1)
    """
    turns: list[dict[str, Any]] = []
    credits: list[frozenset[str]] = []
    rescored = changed = 0
    for turn in row.get("dialogue") or []:
        turn = dict(turn)
        stored = frozenset(turn.get("credits") or ())
        route = turn.get("route")
        if route is None:
            credit = stored
        else:
            rescored += 1
            credit = score_route(
                Route.from_dict(route), str(turn.get("question", "")), turn.get("answer"), record
            )
            changed += credit != stored
            turn["credits"] = sorted(credit)
        turns.append(turn)
        credits.append(credit)
    amb = frozenset(a.id for a in record.counted_ambiguities)
    precision, recall, f1 = score_credits(
        credits, amb, fallback=row.get("stop_reason") == "fallback"
    )
    return {
        **row,
        "dialogue": turns,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "rescored_turns": rescored,
        "changed_turns": changed,
    }


def rescore_episodes(
    rows: Iterable[Mapping[str, Any]], records: Corpus | Mapping[str, TaskRecord]
) -> list[dict[str, Any]]:
    """:func:`rescore_episode` for every row; ``records`` is a corpus or ``{record_id: record}``.

    Raises:
        KeyError: a row names a record the corpus does not have.
    """
    lookup = records.record if isinstance(records, Corpus) else records.__getitem__
    return [rescore_episode(row, lookup(row["record_id"])) for row in rows]


def rescore_campaign(
    store: ResultsStore, campaign_id: str, corpus: Corpus | str | None = None
) -> list[dict[str, Any]]:
    """Every stored episode of a campaign, re-scored (the store is not changed).

    Args:
        store: the results store.
        campaign_id: the campaign.
        corpus: its corpus (default: the one its stored config names).

    Raises:
        ValueError: the store has no such campaign.
    """
    campaign = store.campaign(campaign_id)
    if campaign is None:
        raise ConfigurationError(f"{store.path} holds no campaign {campaign_id!r}")
    if corpus is None:
        corpus = campaign["config"].get("corpus") or campaign["env_id"] or campaign["corpus"]
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    return rescore_episodes(store.episodes(campaign_id), corpus)
