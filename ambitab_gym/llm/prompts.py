"""Prompt texts for the LLM asker, solver and oracle (our own wording of the paper's strategies).

* :data:`ASKER_STRATEGIES` - ``direct``, ``checklist-chat``, ``checklist-ledger`` (paper Table 9).
* :func:`asker_messages` - the chat messages an asker sends for a :class:`PublicView`.
* :func:`solver_messages` - the solver's messages (request, schema and the clarifications).
* :class:`OracleNotes` - what the oracle's access policy lets a prompt show.
* :func:`matcher_messages`, :func:`responder_messages` - the two stages of the LLM oracle.
* :func:`is_refusal` - whether a visible answer declines to answer (the ledger's second list).
* :data:`ROLE_MARKERS` - a phrase that every system prompt of a role contains (scripted servers
  route on it).
* :func:`response_format` and the ``*_schema`` functions - JSON schemas for structured output
  (``response_format`` of vLLM, llama.cpp, Ollama and hosted APIs), which keep small models to the
  expected JSON.

Askers and the solver read only the :class:`~ambitab_gym.trajectory.PublicView`; the oracle's
prompts read only the :class:`OracleNotes` its policy fills in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ambitab_gym.oracles.base import REFUSAL
from ambitab_gym.trajectory import PublicView

__all__ = [
    "ASKER_STRATEGIES",
    "DIALECT_NAMES",
    "ROLE_MARKERS",
    "NoteEntry",
    "OracleNotes",
    "asker_messages",
    "asker_schema",
    "is_refusal",
    "matcher_messages",
    "matcher_schema",
    "responder_messages",
    "responder_schema",
    "response_format",
    "solver_messages",
    "solver_schema",
]

Messages = list[dict[str, str]]

#: The asking strategies of paper Table 9.
ASKER_STRATEGIES = ("direct", "checklist-chat", "checklist-ledger")

#: A phrase found in every system prompt of each role.
ROLE_MARKERS = {
    "asker": "sharpen a database request",
    "solver": "write the final SQL query",
    "matcher": "route one clarifying question",
    "responder": "the person who wrote the database request",
}

#: Display names of SQL dialects.
DIALECT_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "duckdb": "DuckDB"}

_ASKER_OUTPUT = """Reply with exactly one JSON object and nothing else:
- to ask: {"type": "clarification", "output": "<your one question>"}
- to stop: {"type": "done", "output": null}"""

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


def asker_messages(strategy: str, view: PublicView) -> Messages:
    """The messages an asker sends for its next decision.

    Args:
        strategy: one of :data:`ASKER_STRATEGIES`.
        view: what the asker may see.

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
    task = view.render_task()
    turn = len(view.dialogue) + 1
    if strategy == "direct":
        user = (
            f"{task}\n\nConversation so far:\n{_transcript(view)}\n\n"
            f"Turn {turn}. {_left(view.questions_left)} Ask one question or stop."
        )
        return [{"role": "system", "content": _DIRECT}, {"role": "user", "content": user}]
    if strategy == "checklist-chat":
        messages: Messages = [{"role": "system", "content": _CHAT}]
        first = f"{task}\n\nAsk your first question, or stop if nothing is unclear."
        messages.append({"role": "user", "content": first})
        for item in view.dialogue:
            messages.append({"role": "assistant", "content": _clarification(item.question)})
            messages.append({"role": "user", "content": item.answer})
        messages[-1]["content"] += f"\n\n({_left(view.questions_left)})"
        return messages
    if strategy == "checklist-ledger":
        settled = [t for t in view.dialogue if not is_refusal(t.answer)]
        unanswered = [t for t in view.dialogue if is_refusal(t.answer)]

        def ledger(items: Sequence) -> str:
            if not items:
                return "(none)"
            return "\n".join(
                f"- You asked: {t.question}\n  The user answered: {t.answer}" for t in items
            )

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
    raise ValueError(f"unknown asking strategy {strategy!r}; choose from {ASKER_STRATEGIES}")


def solver_messages(view: PublicView, *, dialect: str = "sqlite") -> Messages:
    """The solver's messages: the task and every question and answer of the dialogue.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="Count the rows.", database="db"), phase="sql")
        >>> "exactly one SQLite statement" in solver_messages(view)[0]["content"]
        True
    """
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
{{"reasoning": "<a few sentences: tables, joins, filters, grouping, and how the answers shape \
them>", "type": "final_sql", "output": "<the SQL>"}}"""
    clarifications = view.render_dialogue() or "(no clarifying questions were asked)"
    user = f"{view.render_task()}\n\nClarifications:\n{clarifications}\n\nWrite the {name} query."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class NoteEntry:
    """One registered ambiguity as an oracle prompt shows it."""

    term: str
    aliases: tuple[str, ...] = ()
    meaning: str | None = None
    evidence: str | None = None


@dataclass(frozen=True)
class OracleNotes:
    """The privileged material an oracle prompt may show, already filtered by the access policy.

    Attributes:
        request: the user's request.
        entries: the registered ambiguities (meanings only when the policy shows them).
        context: the database description (schema, column meanings, knowledge) or None.
        segments: reference SQL clause segments or ().
        reference_sql: the full reference SQL or None.
        dialogue: earlier questions and answers (``Q1:/A1:`` lines) or None.
    """

    request: str
    entries: tuple[NoteEntry, ...] = ()
    context: str | None = None
    segments: tuple[str, ...] = ()
    reference_sql: str | None = None
    dialogue: str | None = None


def _entries(notes: OracleNotes, *, with_meaning: bool) -> str:
    if not notes.entries:
        return "(none registered)"
    lines = []
    for entry in notes.entries:
        line = f"- {json.dumps(entry.term, ensure_ascii=False)}"
        if entry.aliases:
            line += f" (also: {', '.join(entry.aliases)})"
        if with_meaning and entry.meaning:
            line += f": {entry.meaning}"
        if entry.evidence:
            line += f" [hint: {entry.evidence}]"
        lines.append(line)
    return "\n".join(lines)


def _segments(notes: OracleNotes) -> str:
    return "\n".join(f"- {s}" for s in notes.segments)


def matcher_messages(question: str, notes: OracleNotes) -> Messages:
    """The matcher's messages: route a question to ``labeled``/``unlabeled``/``unanswerable``.

    Example:
        >>> notes = OracleNotes("List top customers.", (NoteEntry("top customers"),))
        >>> msgs = matcher_messages("How many top customers?", notes)
        >>> "unlabeled" in msgs[0]["content"], '"top customers"' in msgs[1]["content"]
        (False, True)
    """
    actions = [
        '- labeled("<term>"): the question asks about one of the registered ambiguous points '
        "listed below. Copy that point's term exactly as listed; if the question touches several, "
        "pick the one it is mainly about."
    ]
    if notes.segments:
        actions.append(
            '- unlabeled("<sql segment>"): the question is about none of the registered points, '
            "but about something that really matters for writing the correct query. Copy the "
            "reference SQL segment that settles it."
        )
        rest = "nor about anything else that matters for the query"
    else:
        rest = "or is too vague to be about any of them"
    actions.append(
        f"- unanswerable(): the question is about none of the registered points, {rest}: for "
        "example off-topic, a request to write the query, or a question the user cannot decide."
    )
    system = f"""You route one clarifying question about a database request. An assistant who \
prepares the request for an SQL writer has asked the user a question. Decide what it is about \
and choose exactly one action:
{chr(10).join(actions)}

A question does not need the exact words of a term to be about it; judge by meaning.

Reply with exactly one JSON object and nothing else:
{{"reasoning": "<one or two sentences>", "action": "<your action>"}}"""
    parts = [f"Request: {notes.request}"]
    if notes.context:
        parts.append(f"Database description:\n{notes.context}")
    with_meaning = any(e.meaning for e in notes.entries)
    parts.append(f"Registered ambiguous points:\n{_entries(notes, with_meaning=with_meaning)}")
    if notes.reference_sql:
        parts.append(f"Reference SQL:\n{notes.reference_sql}")
    if notes.segments:
        parts.append(f"Reference SQL segments:\n{_segments(notes)}")
    if notes.dialogue:
        parts.append(f"Earlier questions and answers:\n{notes.dialogue}")
    parts.append(f"Question: {question}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


_RESPONDER = """You are the person who wrote the database request below, and an assistant has \
asked you one clarifying question about it. Answer the way a user would: briefly, in plain \
words, and only about what was asked.
- Say what you meant, following your notes; never contradict them and never add requirements.
- Do not write or quote SQL, and do not explain how to build the query.
- Do not ask questions back and do not show your reasoning.

Reply with exactly one JSON object and nothing else: {"answer": "<your reply>"}"""


def responder_messages(
    question: str,
    notes: OracleNotes,
    *,
    action: str,
    focus: str | None,
) -> Messages:
    """The responder's messages: answer a routed question from the notes.

    Args:
        question: the assistant's question.
        notes: what the access policy shows.
        action: the matcher's route, e.g. ``labeled("top customers")``.
        focus: what the route points at: the matched point's meaning (labeled), the SQL segment
            (unlabeled), or None (unanswerable).

    Example:
        >>> notes = OracleNotes("List top customers.",
        ...                     (NoteEntry("top customers", meaning="the five biggest spenders"),))
        >>> msgs = responder_messages("Top how many?", notes, action='labeled("top customers")',
        ...                           focus="the five biggest spenders")
        >>> "the five biggest spenders" in msgs[1]["content"]
        True
    """
    parts = [f"Your request: {notes.request}"]
    if notes.context:
        parts.append(f"Database description (for your reference):\n{notes.context}")
    parts.append(
        "What you meant (your private notes; the assistant cannot see them):\n"
        f"{_entries(notes, with_meaning=True)}"
    )
    if notes.reference_sql:
        parts.append(f"The query you have in mind (never show it):\n{notes.reference_sql}")
    if notes.segments:
        parts.append(f"Its parts:\n{_segments(notes)}")
    parts.append(f"The assistant asks: {question}")
    if action.startswith("labeled"):
        guide = f"This question is about {action[len('labeled(') : -1]}. What you meant: {focus}"
    elif action.startswith("unlabeled"):
        guide = (
            "This question is about a detail your notes do not cover. The part of your query "
            f"that settles it: {focus}\nExplain in plain words what you want there, without SQL."
        )
    else:
        guide = "This question is not about anything you need to settle. Say politely that you "
        guide += "cannot help with that."
    parts.append(guide)
    return [
        {"role": "system", "content": _RESPONDER},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def response_format(name: str, schema: dict) -> dict:
    """An OpenAI ``response_format`` asking for JSON that follows ``schema``.

    >>> response_format("answer", responder_schema())["json_schema"]["name"]
    'answer'
    """
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


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


def responder_schema() -> dict:
    """The responder's reply: ``{"answer": str}``."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 400}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def matcher_schema(notes: OracleNotes) -> dict:
    """The matcher's reply, its ``action`` limited to the routes these notes allow.

    >>> notes = OracleNotes("List top customers.", (NoteEntry("top customers"),), segments=("LIMIT 5",))
    >>> matcher_schema(notes)["properties"]["action"]["enum"]
    ['labeled("top customers")', 'unlabeled("LIMIT 5")', 'unanswerable()']
    """
    actions = [f"labeled({json.dumps(e.term, ensure_ascii=False)})" for e in notes.entries]
    actions += [f"unlabeled({json.dumps(s, ensure_ascii=False)})" for s in notes.segments]
    actions.append("unanswerable()")
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": 300},
            "action": {"type": "string", "enum": actions},
        },
        "required": ["reasoning", "action"],
        "additionalProperties": False,
    }
