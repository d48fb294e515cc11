"""Prompts and reply readers of the agent side: the LLM askers and the LLM solver.

* :class:`AskerStrategy` and :data:`STRATEGIES` - the asking strategies of paper Table 9
  (``direct``, ``checklist-chat``, ``checklist-ledger``) by name; :data:`ASKER_STRATEGIES` their
  names.
* :func:`asker_messages` - the chat messages an asker sends for a :class:`PublicView`.
* :func:`solver_messages` - the solver's messages (request, schema and the clarifications).
* :func:`is_refusal` - whether a visible answer declines to answer (the ledger's second list).
* :data:`ROLE_MARKERS` - a phrase every system prompt of the asker and of the solver contains
  (scripted test servers route on it).
* :data:`ASKER_REPLY`, :data:`SOLVER_REPLY` - the reply formats the prompts show, with their
  ``<...>`` placeholders: a reply that copies one is unreadable.
* :func:`asker_schema`, :func:`solver_schema` - JSON schemas for structured output
  (``response_format``), which keep small models to the expected JSON.
* :class:`AskerOutput` and :func:`parse_asker_output` - the asker's reply, read by the one
  reply reader :func:`ambitab_gym.actions.read_reply` (as the env reads it): the JSON action
  ``{"type": "clarification" | "done", "output": ...}``, a stop, or a plain question; the
  solver's reply is read by the same reader in the SQL phase.

This module is on the agent side of the trust boundary: it reads only the
:class:`~ambitab_gym.trajectory.PublicView` (the public spec and the visible dialogue) and imports
nothing from the oracle's prompts or access policy. The texts are this project's own wording of
the paper's strategies.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ambitab_gym.actions import read_reply
from ambitab_gym.oracles.base import REFUSAL
from ambitab_gym.textutil import ReplyTemplate
from ambitab_gym.trajectory import PublicView

__all__ = [
    "ASKER_REPLY",
    "ASKER_STRATEGIES",
    "DIALECT_NAMES",
    "MAX_PLAIN_QUESTION_CHARS",
    "ROLE_MARKERS",
    "SOLVER_REPLY",
    "STRATEGIES",
    "AskerOutput",
    "AskerStrategy",
    "TaskTexts",
    "asker_messages",
    "asker_schema",
    "is_refusal",
    "parse_asker_output",
    "solver_messages",
    "solver_schema",
]

Messages = list[dict[str, str]]

#: A phrase found in every system prompt of each agent-side role.
ROLE_MARKERS = {
    "asker": "sharpen a database request",
    "solver": "write the final SQL query",
}

#: The solver's reply format as its prompt shows it; a reply whose SQL copies a placeholder of
#: it (``<the SQL>``) holds no SQL (:func:`ambitab_gym.policies.llm.solver_sql`).
SOLVER_REPLY = ReplyTemplate(
    '{"reasoning": "<a few sentences: tables, joins, filters, grouping, and how the answers '
    'shape them>", "type": "final_sql", "output": "<the SQL>"}'
)

#: Display names of SQL dialects.
DIALECT_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "duckdb": "DuckDB"}

#: The asker's reply format as its prompts show it; :func:`parse_asker_output` reads a reply that
#: copies its placeholder (``<your one question>``) as unreadable, not as a question.
ASKER_REPLY = ReplyTemplate("""- to ask: {"type": "clarification", "output": "<your one question>"}
- to stop: {"type": "done", "output": null}""")

_ASKER_OUTPUT = f"Reply with exactly one JSON object and nothing else:\n{ASKER_REPLY.text}"

_ASKER_INTRO = (
    "You help a user sharpen a database request before a separate SQL writer turns it into a "
    "query. You cannot run SQL and you must not write any; your only tool is asking the user."
)

_DIRECT = f"""{_ASKER_INTRO}

Compare the request with the database description. If a part of the request could reasonably \
be read in more than one way, or rests on a notion the description does not pin down, ask the \
user about it. Ask one short, concrete question per turn and never repeat a question that was \
already asked.

Stop as soon as the request is clear enough for one unambiguous query, or when nothing new is \
left to ask.

{_ASKER_OUTPUT}"""

_CHECKLIST_METHOD = """Work through this method on every turn before you reply:
1. Make a checklist. Go over the request phrase by phrase against the schema, the column \
meanings and the external knowledge, and list every item that is (a) a term whose meaning is \
not defined, (b) unclear about which table, column or value it points to, or (c) an operation \
whose exact rule is left open: a threshold, a time window, rounding, ties, ranking, duplicates, \
missing values, how tables are joined. Requests usually hide several such items; listing too \
few is the most common and most costly mistake.
2. Tick off what is settled. An item the user has answered is settled: do not ask about it \
again and do not rephrase a question you already asked.
3. Ask about one open item: one clear question in the user's own terms."""

_CHAT_STOP = """4. Stop when every item on your checklist is settled, or when no item is left \
that you have not asked about."""

_LEDGER_STOP = """4. Keep asking while any item is still open and you have questions left. Do \
not stop because the request feels clear after one or two answers: an item you guess at \
usually means a wrong query. Stop only when every item is settled or was asked without an \
answer."""

_CHAT = f"{_ASKER_INTRO}\n\n{_CHECKLIST_METHOD}\n{_CHAT_STOP}\n\n{_ASKER_OUTPUT}"
_LEDGER = f"{_ASKER_INTRO}\n\n{_CHECKLIST_METHOD}\n{_LEDGER_STOP}\n\n{_ASKER_OUTPUT}"

_REFUSAL_WORDS = re.compile(
    r"\b(sorry|can(?:no|')t (?:help|answer|say|tell)|unable to (?:help|answer)|out of scope|"
    r"not (?:able|sure)|(?:don't|do not) know|no idea|not relevant|doesn't matter)\b",
    re.IGNORECASE,
)


def is_refusal(answer: str) -> bool:
    """Whether a visible answer declines to answer (judged from its text alone).

    >>> is_refusal(REFUSAL), is_refusal("The five biggest spenders.")
    (True, False)
    """
    answer = answer.strip()
    return answer == REFUSAL or bool(_REFUSAL_WORDS.search(answer))


def _left(n: int) -> str:
    if n <= 1:
        return "This is your last question; stop unless an item is still open."
    return f"You may ask {n} more questions."


def _clarification(question: str) -> str:
    return json.dumps({"type": "clarification", "output": question}, ensure_ascii=False)


def _transcript(view: PublicView) -> str:
    return view.render_dialogue() or "(no questions asked yet)"


def _direct(view: PublicView, task: str | None = None) -> Messages:
    task = view.render_task() if task is None else task
    turn = len(view.dialogue) + 1
    user = (
        f"{task}\n\nConversation so far:\n{_transcript(view)}\n\n"
        f"Turn {turn}. {_left(view.questions_left)} Ask one question or stop."
    )
    return [{"role": "system", "content": _DIRECT}, {"role": "user", "content": user}]


def _checklist_chat(view: PublicView, task: str | None = None) -> Messages:
    messages: Messages = [{"role": "system", "content": _CHAT}]
    task = view.render_task() if task is None else task
    first = f"{task}\n\nAsk your first question, or stop if nothing is unclear."
    messages.append({"role": "user", "content": first})
    for item in view.dialogue:
        messages.append({"role": "assistant", "content": _clarification(item.question)})
        messages.append({"role": "user", "content": item.answer})
    messages[-1]["content"] += f"\n\n({_left(view.questions_left)})"
    return messages


def _checklist_ledger(view: PublicView, task: str | None = None) -> Messages:
    settled = [t for t in view.dialogue if not is_refusal(t.answer)]
    unanswered = [t for t in view.dialogue if is_refusal(t.answer)]

    def ledger(items: Sequence) -> str:
        if not items:
            return "(none)"
        return "\n".join(
            f"- You asked: {t.question}\n  The user answered: {t.answer}" for t in items
        )

    turn = len(view.dialogue) + 1
    task = view.render_task() if task is None else task
    user = (
        f"{task}\n\n"
        f"Questions already answered (settled - do not ask about them again):\n"
        f"{ledger(settled)}\n\n"
        f"Questions the user could not answer (do not ask about them again):\n"
        f"{ledger(unanswered)}\n\n"
        f"Turn {turn}. {_left(view.questions_left)} Ask about an item that is in neither "
        "list and is still open, or stop if every item is settled or was asked."
    )
    return [{"role": "system", "content": _LEDGER}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class AskerStrategy:
    """One asking strategy of paper Table 9.

    Attributes:
        name: ``direct``, ``checklist-chat`` or ``checklist-ledger``.
        description: what the model reads and when it stops, in one line.
        build: the chat messages for the next decision, from the agent's view only (the
            built-in ones also take ``task``: ``view.render_task()`` rendered already).

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="List top customers.", database="shop"),
        ...                   questions_left=2)
        >>> strategy = STRATEGIES["direct"]
        >>> [m["role"] for m in strategy.messages(view)]
        ['system', 'user']
    """

    name: str
    description: str
    build: Callable[[PublicView], Messages]

    def messages(self, view: PublicView, *, task: str | None = None) -> Messages:
        """The messages for the asker's next decision (``task``: ``view.render_task()`` when
        the caller has it already)."""
        if task is None:
            return self.build(view)
        return self.build(view, task)  # type: ignore[call-arg]


#: The asking strategies of paper Table 9, by name (the registry lists them from here).
STRATEGIES: Mapping[str, AskerStrategy] = MappingProxyType(
    {
        "direct": AskerStrategy(
            "direct",
            "the task and a Q/A transcript, no checklist; stops when the request is clear",
            _direct,
        ),
        "checklist-chat": AskerStrategy(
            "checklist-chat",
            "a checklist of unclear items, earlier turns as chat messages; stops when every "
            "item is settled or asked",
            _checklist_chat,
        ),
        "checklist-ledger": AskerStrategy(
            "checklist-ledger",
            "a checklist, the request plus answered and unanswerable lists; stops only when "
            "every item is settled or was asked (the paper's default)",
            _checklist_ledger,
        ),
    }
)

#: The names of :data:`STRATEGIES`.
ASKER_STRATEGIES: tuple[str, ...] = tuple(STRATEGIES)


def asker_messages(strategy: str, view: PublicView, *, task: str | None = None) -> Messages:
    """The messages an asker sends for its next decision.

    Args:
        strategy: one of :data:`ASKER_STRATEGIES`.
        view: what the asker may see.
        task: ``view.render_task()`` when the caller has it already (:class:`TaskTexts`).

    Returns:
        OpenAI chat messages.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> from ambitab_gym.trajectory import DialogueTurn
        >>> view = PublicView(PublicSpec(request="List top customers.", database="shop"),
        ...                   (DialogueTurn("Top how many?", "Five."),), questions_left=2)
        >>> [m["role"] for m in asker_messages("checklist-chat", view)]
        ['system', 'user', 'assistant', 'user']
        >>> "Top how many?" in asker_messages("checklist-ledger", view)[1]["content"]
        True
    """
    found = STRATEGIES.get(strategy)
    if found is None:
        raise ValueError(f"unknown asking strategy {strategy!r}; choose from {ASKER_STRATEGIES}")
    return found.messages(view, task=task)


def solver_messages(
    view: PublicView, *, dialect: str = "sqlite", task: str | None = None
) -> Messages:
    """The solver's messages: the task and every question and answer of the dialogue.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="Count the rows.", database="db"), phase="sql")
        >>> "exactly one SQLite statement" in solver_messages(view)[0]["content"]
        True
    """
    name, system = _solver_system(dialect)
    clarifications = view.render_dialogue() or "(no clarifying questions were asked)"
    task = view.render_task() if task is None else task
    user = f"{task}\n\nClarifications:\n{clarifications}\n\nWrite the {name} query."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@functools.lru_cache(maxsize=64)
def _solver_system(dialect: str) -> tuple[str, str]:
    """The dialect's display name and the solver's system prompt (one per dialect)."""
    name = DIALECT_NAMES.get(dialect, dialect)
    if dialect == "sqlite":
        statement = "Write exactly one SQLite statement: a SELECT (a WITH clause is fine), no "
        statement += "other statements and no comments."
    else:
        statement = f"Write one {name} SELECT statement (a WITH clause is fine)."
    system = f"""You write the final SQL query for a database request. The request may have \
been unclear; the user answered the clarifying questions below, and those answers take \
precedence over the literal wording of the request. Do not ask questions.

Rules:
- {statement}
- Use only tables and columns that exist in the schema.
- Return the columns the request asks for, in the order it names them, and nothing more.

Reply with exactly one JSON object and nothing else:
{SOLVER_REPLY.text}"""
    return name, system


class TaskTexts:
    """``view.render_task()`` once per public spec: the request, schema, column meanings and
    knowledge do not change within an episode, so an asker or solver renders them on its first
    call and reuses the text on later turns.

    A text is reused only for the very spec object it was rendered from (compared by identity,
    the spec kept alive with it), never for another spec, even one of the same record id.
    Bounded (cleared past ``limit`` specs); pickles empty.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> texts = TaskTexts()
        >>> view = PublicView(PublicSpec(request="Count staff.", database="hr"))
        >>> texts.get(view) == view.render_task(), texts.get(view) is texts.get(view)
        (True, True)
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._texts: dict[int, tuple[object, str]] = {}

    def get(self, view: PublicView) -> str:
        """The rendered task of ``view``."""
        spec = view.spec
        found = self._texts.get(id(spec))
        if found is not None and found[0] is spec:
            return found[1]
        text = view.render_task()
        if len(self._texts) >= self.limit:
            self._texts.clear()
        self._texts[id(spec)] = (spec, text)
        return text

    def __getstate__(self) -> dict:  # pickling: the limit, not the texts (keyed by identity)
        return {"limit": self.limit}

    def __setstate__(self, state: dict) -> None:
        self.limit = state["limit"]
        self._texts = {}


def asker_schema() -> dict:
    """The asker's action: ``{"type": "clarification" | "done", "output": str | null}``."""
    return {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["clarification", "done"]},
            "output": {"type": ["string", "null"], "maxLength": 300},
        },
        "required": ["type", "output"],
        "additionalProperties": False,
    }


def solver_schema() -> dict:
    """The solver's reply: ``{"reasoning": str, "type": "final_sql", "output": str}``."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": 600},
            "type": {"type": "string", "enum": ["final_sql"]},
            "output": {"type": "string"},
        },
        "required": ["reasoning", "type", "output"],
        "additionalProperties": False,
    }


# -- reading the asker's reply ------------------------------------------------------------


@dataclass(frozen=True)
class AskerOutput:
    """What an asker reply says: a question, a stop, or nothing readable."""

    kind: Literal["question", "stop", "invalid"]
    text: str = ""


#: The longest plain-text (not JSON) reply the asker takes as its question.
MAX_PLAIN_QUESTION_CHARS = 500


def parse_asker_output(text: str) -> AskerOutput:
    """Read an asker reply with :func:`ambitab_gym.actions.read_reply`, the reader the env uses:
    reasoning blocks dropped, the JSON action ``{"type": "clarification" | "done", "output":
    ...}`` (bare, fenced or inside prose), the stop sentinel alone or ending the prose.

    The asker is asked for JSON, so of the replies the env would ask as plain text, it takes
    only one line ending in ``?`` (at most :data:`MAX_PLAIN_QUESTION_CHARS` characters) as its
    question; any other reply is ``invalid`` (its ``on_unreadable`` policy decides).

    A reply that copies the format's placeholder (:data:`ASKER_REPLY`: ``<your one question>``,
    alone or with nothing but format words around it, such as ``Question: <your one
    question>?``) is no question: ``invalid`` with no text, so no policy asks it.

    >>> parse_asker_output('{"type": "clarification", "output": "Which year?"}')
    AskerOutput(kind='question', text='Which year?')
    >>> parse_asker_output('{"type": "done", "output": null}').kind
    'stop'
    >>> parse_asker_output("<think>Two points are clear.</think>Which year do you mean?").text
    'Which year do you mean?'
    >>> parse_asker_output("Nothing else is unclear to me. <STOP>").kind
    'stop'
    >>> parse_asker_output("I will now write SQL.").kind
    'invalid'
    >>> parse_asker_output('{"type": "clarification", "output": "<your one question>"}')
    AskerOutput(kind='invalid', text='')
    """
    reading = read_reply(text or "", phase="ask")
    if reading.read == "stop":
        return AskerOutput("stop")
    found = reading.text or str(text or "").strip()
    if ASKER_REPLY.echoes(found):  # the prompt's template copied back: not a question
        return AskerOutput("invalid")
    if reading.read == "question" and reading.text:
        question = reading.text
        if reading.form == "json":
            return AskerOutput("question", question)
        one_line = "\n" not in question and len(question) <= MAX_PLAIN_QUESTION_CHARS
        if one_line and question.endswith("?"):
            return AskerOutput("question", question)
    return AskerOutput("invalid", found)
