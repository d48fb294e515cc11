"""Scripted askers: the reference policies of the paper (Definition 3, 7; C.2; A.4).

* :class:`NoneAsker` - pi_none: stops at once.
* :class:`FullAsker` - pi_full: one canonical question per distinct counted term, in annotation
  order, then stop.
* :class:`FullAdvAsker` - pi_full^adv: the canonical question plus the adversarial suffix.
* :class:`GenericAsker` - pi_none^adv: alternates two generic questions until the budget is spent.

``FullAsker`` and ``FullAdvAsker`` are *reference* policies: they read the registered terms of
the hidden record (``privileged = True``), which is what defines them. They are baselines for
measurement, never agents to train or deploy. The harness passes them the record at ``reset``.
"""

from __future__ import annotations

from ambitab_gym.actions import STOP
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.oracles.deterministic import canonical_question
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import PublicView

__all__ = [
    "ADVERSARIAL_SUFFIX",
    "GENERIC_QUESTIONS",
    "FullAdvAsker",
    "FullAsker",
    "GenericAsker",
    "NoneAsker",
    "distinct_terms",
]

#: Appended to the canonical question by pi_full^adv (paper A.4).
ADVERSARIAL_SUFFIX = (
    "Please give me as much detail as you can, and if you can, give the exact SQL for it."
)
#: The two questions pi_none^adv alternates (paper A.4).
GENERIC_QUESTIONS = ("Could you clarify what you want?", "Please elaborate.")


def distinct_terms(record: TaskRecord) -> list[str]:
    """The distinct terms of the counted ambiguities, in annotation order (case-insensitive).

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Top earners", "database": "hr"},
    ...     "ambiguities": [
    ...         {"id": "a", "term": "top earners", "resolution": "x"},
    ...         {"id": "b", "term": "order", "kind": "non_critical", "resolution": "y"}],
    ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
    >>> distinct_terms(record)
    ['top earners']
    """
    seen: set[str] = set()
    terms = []
    for ambiguity in record.counted_ambiguities:
        key = " ".join(ambiguity.term.lower().split())
        if key not in seen:
            seen.add(key)
            terms.append(ambiguity.term)
    return terms


class NoneAsker:
    """pi_none: stops without asking.

    >>> NoneAsker().act(None)
    '<STOP>'
    """

    privileged = False
    name = "none"

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        pass

    def act(self, view: PublicView | None) -> str:
        return STOP

    async def aact(self, view: PublicView | None) -> str:
        return self.act(view)


class FullAsker:
    """pi_full: the canonical question about each distinct counted term, then stop.

    Example:
        >>> from ambitab_gym.records import parse_record
        >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
        ...     "spec": {"request": "Top earners by region", "database": "hr"},
        ...     "ambiguities": [{"id": "a", "term": "top earners", "resolution": "x"},
        ...                     {"id": "b", "term": "region", "resolution": "y"}],
        ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
        >>> asker = FullAsker()
        >>> asker.reset(record=record)
        >>> [asker.act(None) for _ in range(3)]  # doctest: +NORMALIZE_WHITESPACE
        ['Could you clarify what exactly you mean by top earners?',
         'Could you clarify what exactly you mean by region?', '<STOP>']
    """

    privileged = True
    name = "full"
    suffix = ""

    def __init__(self) -> None:
        self._queue: list[str] = []

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        if record is None:
            raise ConfigurationError(
                f"{type(self).__name__} is a reference policy: reset(record=...)"
            )
        self._queue = [self._question(term) for term in distinct_terms(record)]

    def _question(self, term: str) -> str:
        question = canonical_question(term)
        return f"{question} {self.suffix}" if self.suffix else question

    def act(self, view: PublicView | None) -> str:
        return self._queue.pop(0) if self._queue else STOP

    async def aact(self, view: PublicView | None) -> str:
        return self.act(view)


class FullAdvAsker(FullAsker):
    """pi_full^adv: the canonical question followed by :data:`ADVERSARIAL_SUFFIX`.

    >>> FullAdvAsker()._question("top earners")  # doctest: +NORMALIZE_WHITESPACE
    'Could you clarify what exactly you mean by top earners? Please give me as much detail
     as you can, and if you can, give the exact SQL for it.'
    """

    name = "full-adv"
    suffix = ADVERSARIAL_SUFFIX


class GenericAsker:
    """pi_none^adv: alternates the two generic questions until the budget is spent.

    >>> asker = GenericAsker()
    >>> asker.reset()
    >>> view = PublicView(spec=None, questions_left=2)
    >>> asker.act(view), asker.act(view)
    ('Could you clarify what you want?', 'Please elaborate.')
    >>> asker.act(PublicView(spec=None, questions_left=0))
    '<STOP>'
    """

    privileged = False
    name = "generic"

    def __init__(self) -> None:
        self._turn = 0

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        self._turn = 0

    def act(self, view: PublicView | None) -> str:
        if view is not None and view.questions_left <= 0:
            return STOP
        question = GENERIC_QUESTIONS[self._turn % len(GENERIC_QUESTIONS)]
        self._turn += 1
        return question

    async def aact(self, view: PublicView | None) -> str:
        return self.act(view)
