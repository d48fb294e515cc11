"""An offline solver with perfect SQL skill that must still guess the reading.

* :class:`InterpretationSolver` - returns the SQL of the candidate reading that the answers in
  the visible dialogue reveal, and nothing when they reveal none.

What it knows, plainly: for a task it has the *candidate readings* of its AVT - the reference SQL
and the stored answer texts (resolutions and frozen responses) of every record of the AVT - but
not which reading is hidden. It finds the AVT from the public spec (request + database) alone and
reads the visible dialogue. It may only return a reading the dialogue revealed:

* **Several readings** (multi-reading AVT): for each ambiguity it looks for a sibling's answer
  text inside an oracle answer (the longest match wins, so "total > 5000" beats "total > 500"),
  and picks the sibling that agrees with the most revealed ambiguities; ties, and dialogues that
  reveal nothing, go to the AVT's default reading (its first record).
* **One reading** (single-reading AVT, as every AVT of the built EW-Bird, BIRD-Interact and TACO
  corpora): with no counted ambiguity (m = 0) it returns the reading's SQL. Otherwise it returns
  it only when *every* counted ambiguity is revealed - one of the ambiguity's answer texts (its
  resolution or its frozen response, compared case- and whitespace-insensitively) occurs in an
  answer of the dialogue - and else submits no SQL (``""``, verdict ``no_sql``). Knowing the one
  candidate is not knowing the intent: a single-reading AVT is ambiguous all the same, only the
  corpus stores one of its readings.

It therefore scores exactly what the dialogue revealed: J_none is the share of default readings
of multi-reading AVTs plus the zero-ambiguity records, J_full is 1 under the corpus's
deterministic oracle (its answers are the stored texts), and the asking gain of an asker is
measured apart from any SQL skill. The rule is textual: an oracle that paraphrases (an LLM
oracle) reveals nothing to this solver; SQL volunteered in an answer is ignored (the
``dialogue-sql`` probes of :mod:`ambitab_gym.policies.probes` read it).
"""

from __future__ import annotations

import re

from ambitab_gym.corpora import Corpus
from ambitab_gym.records import Ambiguity, TaskRecord
from ambitab_gym.trajectory import PublicView

__all__ = ["NOT_REVEALED", "InterpretationSolver"]

_FALLBACK_SQL = "SELECT NULL WHERE 1 = 0"
#: What the solver submits for a single-reading task whose dialogue did not reveal every counted
#: ambiguity: no SQL (the verifier's verdict is ``no_sql``).
NOT_REVEALED = ""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _answer_texts(ambiguity: Ambiguity) -> set[str]:
    return {_norm(t) for t in (ambiguity.resolution, ambiguity.response) if t and _norm(t)}


class InterpretationSolver:
    """Chooses the reading that the dialogue's answers reveal.

    Args:
        corpus: the corpus whose AVTs define the candidate readings.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> from ambitab_gym.trajectory import DialogueTurn
        >>> corpus = load_corpus("bird")
        >>> solver = InterpretationSolver(corpus)
        >>> record = next(r for r in corpus.records if r.m > 0)
        >>> view = PublicView(corpus.public_spec(record))
        >>> solver.solve(view) == corpus.siblings(record)[0].verification.reference_sql
        True

        On a single-reading AVT nothing is assumed: the SQL comes only once the answers
        revealed every counted ambiguity.

        >>> corpus = load_corpus("bird_interact")
        >>> solver = InterpretationSolver(corpus)
        >>> record = next(r for r in corpus.records if r.m > 0 and len(corpus.siblings(r)) == 1)
        >>> view = PublicView(corpus.public_spec(record))
        >>> solver.solve(view)
        ''
        >>> turns = tuple(DialogueTurn(f"What is {a.term}?", a.response or a.resolution)
        ...               for a in record.counted_ambiguities)
        >>> solver.solve(PublicView(view.spec, turns)) == record.verification.reference_sql
        True
        >>> solver.solve(PublicView(view.spec, turns[:-1]))  # one left unrevealed: no SQL
        ''
    """

    name = "interpretation"
    #: It only recognises stored answer texts: SQL or other words an answer adds cannot change
    #: its SQL, so it cannot show response leakage (:func:`ambitab_gym.policies.base.reads_answers`).
    reads_answers = False

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
        """The reading the dialogue supports best; None for an unknown task, and for a
        single-reading task whose counted ambiguities the dialogue did not all reveal."""
        siblings = self.candidates(view)
        answers = [_norm(turn.answer) for turn in view.dialogue]
        if len(siblings) <= 1:
            if not siblings:
                return None
            only = siblings[0]
            return only if self.revealed_all(answers, only) else None
        scores = [0] * len(siblings)
        for index in range(len(siblings[0].ambiguities)):
            texts = {}
            for k, sibling in enumerate(siblings):
                if index < len(sibling.ambiguities):
                    texts[k] = _answer_texts(sibling.ambiguities[index])
            revealed = self._revealed(answers, texts)
            for k in revealed:
                scores[k] += 1
        best = max(scores)
        return siblings[scores.index(best)]  # first maximum: the default reading on ties

    @staticmethod
    def revealed_all(answers: list[str], reading: TaskRecord) -> bool:
        """Whether every counted ambiguity of ``reading`` has an answer text (resolution or
        frozen response) inside one of the normalized ``answers`` (true when m = 0)."""
        return all(
            any(text in answer for text in _answer_texts(ambiguity) for answer in answers)
            for ambiguity in reading.counted_ambiguities
        )

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
        """The SQL of the chosen reading; :data:`NOT_REVEALED` (no SQL) for a single-reading
        task the dialogue did not disambiguate, a query that matches nothing for an unknown
        task."""
        siblings = self.candidates(view)
        if not siblings:
            return _FALLBACK_SQL
        chosen = self.choose(view)
        return chosen.verification.reference_sql if chosen is not None else NOT_REVEALED

    async def asolve(self, view: PublicView) -> str:
        return self.solve(view)
