"""An offline solver with perfect SQL skill that must still guess the reading.

* :class:`InterpretationSolver` - picks among the candidate readings of the task the one whose
  resolutions agree with the answers in the visible dialogue.

What it knows, plainly: for a task it has the *candidate readings* of its AVT - the reference SQL
and the stored answer texts (resolutions and frozen responses) of every sibling record - but not
which reading is hidden. It finds the AVT from the public spec (request + database) alone. It
reads the visible dialogue; for each ambiguity it looks for a sibling's answer text inside an
oracle answer (the longest match wins, so "total > 5000" beats "total > 500"), and picks the
sibling that agrees with the most revealed ambiguities; ties, and dialogues that reveal nothing,
go to the AVT's default reading (its first record). It therefore scores exactly what the
dialogue revealed: J_none is the share of default readings, J_full is 1 under a perfect oracle,
and the asking gain of an asker is measured apart from any SQL skill.
"""

from __future__ import annotations

import re

from ambitab_gym.corpora import Corpus
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import PublicView

__all__ = ["InterpretationSolver"]

_FALLBACK_SQL = "SELECT NULL WHERE 1 = 0"


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


class InterpretationSolver:
    """Chooses the sibling reading that the dialogue's answers reveal.

    Args:
        corpus: the corpus whose AVTs define the candidate readings.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> corpus = load_corpus("bird")
        >>> solver = InterpretationSolver(corpus)
        >>> record = next(r for r in corpus.records if r.m > 0)
        >>> view = PublicView(corpus.public_spec(record))
        >>> solver.solve(view) == corpus.siblings(record)[0].verification.reference_sql
        True
    """

    name = "interpretation"

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._by_spec: dict[tuple[str, str], list[TaskRecord]] = {}
        for siblings in corpus.avts.values():
            spec = siblings[0].spec
            self._by_spec.setdefault((_norm(spec.request), spec.database), siblings)

    def candidates(self, view: PublicView) -> list[TaskRecord]:
        """The readings of the task in view (the AVT's records, default first)."""
        return self._by_spec.get((_norm(view.spec.request), view.spec.database), [])

    def choose(self, view: PublicView) -> TaskRecord | None:
        """The reading the dialogue supports best (None for an unknown task)."""
        siblings = self.candidates(view)
        if len(siblings) <= 1:
            return siblings[0] if siblings else None
        answers = [_norm(turn.answer) for turn in view.dialogue]
        scores = [0] * len(siblings)
        for index in range(len(siblings[0].ambiguities)):
            texts = {}
            for k, sibling in enumerate(siblings):
                if index < len(sibling.ambiguities):
                    texts[k] = {
                        _norm(t)
                        for t in (
                            sibling.ambiguities[index].resolution,
                            sibling.ambiguities[index].response,
                        )
                        if t
                    }
            revealed = self._revealed(answers, texts)
            for k in revealed:
                scores[k] += 1
        best = max(scores)
        return siblings[scores.index(best)]  # first maximum: the default reading on ties

    @staticmethod
    def _revealed(answers: list[str], texts: dict[int, set[str]]) -> set[int]:
        """Siblings whose answer text for one ambiguity is the longest found in an answer."""
        best_len, best = 0, set()
        for answer in answers:
            for k, options in texts.items():
                for text in options:
                    if text and text in answer:
                        if len(text) > best_len:
                            best_len, best = len(text), {k}
                        elif len(text) == best_len:
                            best.add(k)
        # siblings sharing the revealed text agree too
        if best:
            chosen = {t for k in best for t in texts[k] if len(t) == best_len}
            best = {k for k, options in texts.items() if options & chosen}
        return best

    def solve(self, view: PublicView) -> str:
        """The SQL of the chosen reading."""
        chosen = self.choose(view)
        return chosen.verification.reference_sql if chosen else _FALLBACK_SQL

    async def asolve(self, view: PublicView) -> str:
        return self.solve(view)
