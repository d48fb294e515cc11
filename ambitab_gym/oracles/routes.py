"""Scoring an LLM oracle's routes as paper Appendix C.3 does.

* :func:`score_route` - the registered ambiguity a recorded routing action maps to (the credit
  of one question): an exact ``labeled(term)`` first; otherwise the annotated terms and aliases
  found in the route's label, the question, the routing rationale and the response.
* :func:`route_names` - the names the scorer searches (:mod:`ambitab_gym.oracles.mentions`).

The same function gives the credits online (:class:`~ambitab_gym.oracles.llm.LLMOracle` and
:class:`~ambitab_gym.oracles.llm.LLMMatcher`) and offline
(:func:`ambitab_gym.evaluation.rescore.rescore_episodes`, from the routes stored per turn), so
a stored campaign re-scores to the credits it was run with.

Choices where the paper is silent (docs/leakage.md, "Scoring"):

* ``unanswerable()`` - and an unreadable matcher reply, recorded as ``unanswerable`` - maps to
  no ambiguity, whatever the question or a model-worded refusal says: the matcher judged the
  question unrelated to every labeled point.
* "Exact" is verbatim: the label equals a registered term or alias character for character. A
  near miss (other case, other spacing, a paraphrase around the term) is matched like any other
  text.
* Sources are searched in a fixed order and the first that mentions a registered name decides:
  the label of a ``labeled`` route, the question, the rationale, the response. Within a source
  the deterministic oracles' ranking applies (quoted mention, then earliest, then longest; a tie
  decides nothing and the next source is searched). The SQL segment of an ``unlabeled`` route
  is not searched (column names would credit any question routed to a clause), and the fixed
  refusal is not a response that reveals anything.
* At most one ambiguity per question (single-answer mode), registered or not counted: whether
  it counts (critical and knowledge ambiguities only) is decided by :mod:`ambitab_gym.metrics`.
"""

from __future__ import annotations

from ambitab_gym.oracles.base import REFUSAL, Route
from ambitab_gym.oracles.deterministic import record_index
from ambitab_gym.oracles.mentions import NameIndex, best, named_in
from ambitab_gym.records import TaskRecord

__all__ = ["route_names", "score_route"]


def route_names(record: TaskRecord) -> NameIndex:
    """The compiled names (terms and aliases) of every registered ambiguity of a record.

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Top earners", "database": "hr"},
    ...     "ambiguities": [{"id": "top", "term": "top earners", "aliases": ["best paid"],
    ...                      "resolution": "three best paid"}],
    ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
    >>> [name.ambiguity_id for name in route_names(record).names]
    ['top', 'top']
    """
    return record_index(record)


def _exact_label(argument: str, record: TaskRecord) -> str | None:
    hits = {a.id for a in record.ambiguities if argument in a.names}
    return next(iter(hits)) if len(hits) == 1 else None


def score_route(
    route: Route | None, question: str, response: str | None, record: TaskRecord
) -> frozenset[str]:
    """The credit of one routed question (paper C.3): at most one registered ambiguity id.

    Args:
        route: the matcher's recorded route (None: nothing to score, no credit).
        question: the question as the oracle received it.
        response: the oracle's answer (None when it is not known yet).
        record: the record whose registered ambiguities are matched.

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners by region", "database": "hr"},
        ...     "ambiguities": [{"id": "top", "term": "top earners", "resolution": "3 best paid"},
        ...                     {"id": "reg", "term": "region", "resolution": "sales region"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> sorted(score_route(Route("labeled", "region"), "Top earners?", None, record))
        ['reg']
        >>> sorted(score_route(Route("labeled", "Top  Earners"), "How many?", None, record))
        ['top']
        >>> sorted(score_route(Route("unlabeled", "WHERE x", "about the region"), "Which?",
        ...                    "All of them.", record))
        ['reg']
        >>> sorted(score_route(Route("unanswerable"), "What about the region?", None, record))
        []
    """
    if route is None or route.kind not in ("labeled", "unlabeled") or not route.parsed:
        return frozenset()
    if route.kind == "labeled":
        exact = _exact_label(route.argument, record)
        if exact is not None:
            return frozenset({exact})
    index = route_names(record)
    sources = [route.argument if route.kind == "labeled" else "", question, route.rationale]
    if response and response.strip() != REFUSAL:
        sources.append(response)
    for text in sources:
        if text:
            found = best(named_in(str(text), index))
            if found is not None:
                return frozenset({found})
    return frozenset()
