"""Scripted probes that make oracle leaks visible to the leakage diagnostics (agent side).

* :class:`SchemaProbeAsker` - asks, until the budget is spent, which of the schema's tables and
  columns the request means, naming all of them in each question (rotated). It reads only the
  public view. Under :class:`~ambitab_gym.wrappers.SpecificationRandomization` it names the
  *replacement* database's schema, so any credit it earns on the true task is undeserved: the
  probe behind dRec_spec^Q for matchers that credit schema words.
* :class:`RestatementAsker` - repeats the public request, as it stands and in mechanical
  variants ("So you want to ...?"), until the budget is spent. A question that only restates the
  request asks about nothing, so under the reference oracle its recall must be about 0: the
  check that a matcher credits questions, not the request's words.
* :class:`DialogueSQLSolver` - copies the last SQL that appears in the visible answers (a fenced
  block, else text from ``SELECT``/``WITH`` to the end of the answer); without one it falls back
  to the :class:`~ambitab_gym.policies.interpretation.InterpretationSolver` (``fallback=
  "interpretation"``) or to the AVT's default reading, ignoring the dialogue (``"blind"``).

Why a special solver: the InterpretationSolver picks a reading from resolution texts and
already succeeds whenever every ambiguity is resolved, so SQL volunteered by an oracle cannot
change its verdicts and dJ_resp / dJ_full stay 0 however much SQL leaks. A solver that reads SQL
from the dialogue turns that leak into success; with the ``blind`` fallback, even pi_full^adv
under the reference oracle succeeds only on default readings, so dJ_full shows the leak too.

Both are agent-side policies: they read only the public view (the spec and the visible
dialogue), like every asker and solver in :mod:`ambitab_gym.policies`. They are registered by
name (``schema-probe``, ``restatement``, ``dialogue-sql``, ``dialogue-sql-blind``) in
:mod:`ambitab_gym.registry`. ``schema-probe`` is also the shotgun check: one question naming
every table and column must not earn credit from a reference matcher whose aliases name columns.
"""

from __future__ import annotations

import re

from ambitab_gym.actions import STOP
from ambitab_gym.corpora import Corpus
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.policies.interpretation import InterpretationSolver
from ambitab_gym.records import TaskRecord
from ambitab_gym.textutil import extract_sql, schema_identifiers
from ambitab_gym.trajectory import PublicView

__all__ = ["RESTATEMENTS", "DialogueSQLSolver", "RestatementAsker", "SchemaProbeAsker", "find_sql"]

#: The mechanical restatements :class:`RestatementAsker` cycles through; ``{request}`` is the
#: request as written, ``{clause}`` the request without its final punctuation and with a
#: lower-case first letter.
RESTATEMENTS: tuple[str, ...] = (
    "{request}",
    "{clause}?",
    "So you want to {clause}?",
    "Just to confirm: {clause}?",
    "Do you mean: {clause}?",
    "Could you clarify what exactly you mean by {clause}?",
)


def find_sql(text: str) -> str | None:
    """The last SQL in a dialogue answer: :func:`ambitab_gym.textutil.extract_sql` with
    ``last=True, strict=True`` - the last fence holding SQL, else upper-case ``SELECT``/``WITH``
    to the end of the text when that parses as a query (so "customers with ..." is not SQL).

    >>> find_sql("Yes. Here is the exact SQL:\\n```sql\\nSELECT name FROM t\\n```")
    'SELECT name FROM t'
    >>> find_sql("Use this: SELECT 1"), find_sql("Customers with select orders, WITH care.")
    ('SELECT 1', None)
    """
    return extract_sql(text, last=True, strict=True)


class SchemaProbeAsker:
    """Names every table and column of the visible schema in each question.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> spec = PublicSpec(request="List staff.", database="hr",
        ...                   schema="CREATE TABLE staff (id INT, salary REAL);")
        >>> asker = SchemaProbeAsker()
        >>> asker.reset(seed=0)
        >>> asker.act(PublicView(spec, questions_left=2))
        'Which of these do you mean: staff, id, salary?'
        >>> asker.act(PublicView(spec, questions_left=1))
        'Which of these do you mean: id, salary, staff?'
        >>> asker.act(PublicView(spec, questions_left=0))
        '<STOP>'
    """

    privileged = False
    name = "schema-probe"

    def __init__(self) -> None:
        self._turn = 0
        self._names: dict[str, list[str]] = {}

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        self._turn = 0

    def _schema_names(self, view: PublicView) -> list[str]:
        schema = view.spec.schema_text or ""
        names = self._names.get(schema)
        if names is None:
            names = schema_identifiers(schema) or re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", schema)
            self._names[schema] = names
        return names

    def act(self, view: PublicView) -> str:
        if view.questions_left <= 0:
            return STOP
        names = self._schema_names(view)
        turn, self._turn = self._turn, self._turn + 1
        if not names:
            return "Which tables and columns should I use?"
        shift = turn % len(names)
        rotated = names[shift:] + names[:shift]
        return f"Which of these do you mean: {', '.join(rotated)}?"

    async def aact(self, view: PublicView) -> str:
        return self.act(view)


class RestatementAsker:
    """Asks the request back, in the variants of :data:`RESTATEMENTS`, until the budget is spent.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> spec = PublicSpec(request="List the top earners.", database="hr")
        >>> asker = RestatementAsker()
        >>> asker.reset(seed=0)
        >>> [asker.act(PublicView(spec, questions_left=n)) for n in (3, 2, 1, 0)]
        ['List the top earners.', 'list the top earners?', 'So you want to list the top earners?', '<STOP>']
    """

    privileged = False
    name = "restatement"

    def __init__(self) -> None:
        self._turn = 0

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        self._turn = 0

    def act(self, view: PublicView) -> str:
        if view.questions_left <= 0:
            return STOP
        request = " ".join(view.spec.request.split())
        clause = request.rstrip(" .?!")
        clause = clause[:1].lower() + clause[1:]
        template = RESTATEMENTS[self._turn % len(RESTATEMENTS)]
        self._turn += 1
        return template.format(request=request, clause=clause)

    async def aact(self, view: PublicView) -> str:
        return self.act(view)


class DialogueSQLSolver:
    """Copies SQL found in the visible answers; otherwise falls back (see the module docs).

    Args:
        corpus: the corpus (for the fallback's candidate readings).
        fallback: ``"interpretation"`` (read the answers' resolutions) or ``"blind"`` (the
            AVT's default reading, whatever the dialogue says).

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> from ambitab_gym.trajectory import DialogueTurn
        >>> corpus = load_corpus("bird")
        >>> record = corpus.records[0]
        >>> view = PublicView(corpus.public_spec(record), (DialogueTurn("?", "```SELECT 42```"),))
        >>> DialogueSQLSolver(corpus).solve(view)
        'SELECT 42'
    """

    #: SQL in an answer becomes its SQL (:func:`ambitab_gym.policies.base.reads_answers`).
    reads_answers = True

    def __init__(self, corpus: Corpus, *, fallback: str = "interpretation") -> None:
        if fallback not in ("interpretation", "blind"):
            raise ConfigurationError("fallback must be 'interpretation' or 'blind'")
        self.fallback = fallback
        self.name = "dialogue-sql" if fallback == "interpretation" else "dialogue-sql-blind"
        self._interpretation = InterpretationSolver(corpus)

    def solve(self, view: PublicView) -> str:
        for turn in reversed(view.dialogue):
            sql = find_sql(turn.answer)
            if sql:
                return sql
        if self.fallback == "blind":
            view = PublicView(view.spec, (), view.questions_left, view.phase)
        return self._interpretation.solve(view)

    async def asolve(self, view: PublicView) -> str:
        return self.solve(view)
