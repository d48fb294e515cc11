"""Prompts and reply readers of the oracle side: the LLM matcher and the LLM responder.

* :class:`NoteEntry`, :class:`OracleNotes` - the privileged material a prompt may show, already
  filtered by the access policy (:mod:`ambitab_gym.oracles.access`).
* :func:`matcher_messages`, :func:`responder_messages` - the two stages of the LLM oracle.
* :func:`matcher_schema`, :func:`responder_schema` - JSON schemas for structured output.
* :data:`ROLE_MARKERS` - a phrase every system prompt of the matcher and of the responder
  contains (scripted test servers route on it).
* :data:`MATCHER_REPLY`, :data:`RESPONDER_REPLY` - the reply formats the prompts show, with
  their ``<...>`` placeholders: a route argument or answer that copies one is unreadable
  (:func:`prompt_echo`, :func:`parse_responder_output`).
* :class:`MatcherAction` and :func:`parse_matcher_output` - the matcher's route
  ``labeled("term")``, ``unlabeled("sql segment")`` or ``unanswerable()``;
  :func:`matcher_rationale` - the reasoning it gave (recorded for the C.3 scorer).
* :func:`parse_responder_output` - the responder's answer text.

This module is on the privileged side of the trust boundary: its prompts show resolutions,
evidence and reference SQL. Agent-side modules (:mod:`ambitab_gym.policies`) never import it.
Readers never raise on model text; they return ``None`` instead.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Literal

from ambitab_gym.textutil import ReplyTemplate, find_json_object, json_loads, strip_thinking

__all__ = [
    "MATCHER_REPLY",
    "RESPONDER_REPLY",
    "ROLE_MARKERS",
    "MatcherAction",
    "NoteEntry",
    "OracleNotes",
    "matcher_messages",
    "matcher_rationale",
    "matcher_schema",
    "parse_matcher_output",
    "parse_responder_output",
    "prompt_echo",
    "responder_messages",
    "responder_schema",
]

Messages = list[dict[str, str]]

#: A phrase found in every system prompt of each oracle role.
ROLE_MARKERS = {
    "matcher": "route one clarifying question",
    "responder": "the person who wrote the database request",
}


# the routes and the reply object as the matcher's prompt writes them
_LABELED = 'labeled("<term>")'
_UNLABELED = 'unlabeled("<sql segment>")'
_UNANSWERABLE = "unanswerable()"
_MATCHER_JSON = '{"reasoning": "<one or two sentences>", "action": "<your action>"}'

#: The matcher's reply format (its routes and JSON object) as its prompt shows it.
MATCHER_REPLY = ReplyTemplate("\n".join((_LABELED, _UNLABELED, _UNANSWERABLE, _MATCHER_JSON)))
#: The responder's reply format as its prompt shows it.
RESPONDER_REPLY = ReplyTemplate('{"answer": "<your reply>"}')


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

    The parts that do not change within an episode (the system prompt, the request, the
    database description, the points and the SQL) are built once per distinct content
    (:func:`_matcher_static`); the dialogue and the question are added per call.

    Example:
        >>> notes = OracleNotes("List top customers.", (NoteEntry("top customers"),))
        >>> msgs = matcher_messages("How many top customers?", notes)
        >>> "unlabeled" in msgs[0]["content"], '"top customers"' in msgs[1]["content"]
        (False, True)
    """
    system, head = _matcher_static(
        notes.request, notes.entries, notes.context, notes.segments, notes.reference_sql
    )
    if notes.dialogue:
        user = f"{head}\n\nEarlier questions and answers:\n{notes.dialogue}\n\nQuestion: {question}"
    else:
        user = f"{head}\n\nQuestion: {question}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# keyed by the notes' whole static content (never by a record id), so one record's text can
# only come back for notes that hold exactly that text; pure and bounded
@functools.lru_cache(maxsize=1024)
def _matcher_static(
    request: str,
    entries: tuple[NoteEntry, ...],
    context: str | None,
    segments: tuple[str, ...],
    reference_sql: str | None,
) -> tuple[str, str]:
    """The matcher's system prompt and the user message up to (not including) the dialogue."""
    notes = OracleNotes(request, entries, context, segments, reference_sql)
    actions = [
        f"- {_LABELED}: the question asks about one of the registered ambiguous points "
        "listed below. Copy that point's term exactly as listed; if the question touches several, "
        "pick the one it is mainly about."
    ]
    if notes.segments:
        actions.append(
            f"- {_UNLABELED}: the question is about none of the registered points, "
            "but about something that really matters for writing the correct query. Copy the "
            "reference SQL segment that settles it."
        )
        rest = "nor about anything else that matters for the query"
    else:
        rest = "or is too vague to be about any of them"
    actions.append(
        f"- {_UNANSWERABLE}: the question is about none of the registered points, {rest}: for "
        "example off-topic, a request to write the query, or a question the user cannot decide."
    )
    system = f"""You route one clarifying question about a database request. An assistant who \
prepares the request for an SQL writer has asked the user a question. Decide what it is about \
and choose exactly one action:
{chr(10).join(actions)}

A question does not need the exact words of a term to be about it; judge by meaning.

Reply with exactly one JSON object and nothing else:
{_MATCHER_JSON}"""
    parts = [f"Request: {notes.request}"]
    if notes.context:
        parts.append(f"Database description:\n{notes.context}")
    with_meaning = any(e.meaning for e in notes.entries)
    parts.append(f"Registered ambiguous points:\n{_entries(notes, with_meaning=with_meaning)}")
    if notes.reference_sql:
        parts.append(f"Reference SQL:\n{notes.reference_sql}")
    if notes.segments:
        parts.append(f"Reference SQL segments:\n{_segments(notes)}")
    return system, "\n\n".join(parts)


_RESPONDER = f"""You are the person who wrote the database request below, and an assistant has \
asked you one clarifying question about it. Answer the way a user would: briefly, in plain \
words, and only about what was asked.
- Say what you meant, following your notes; never contradict them and never add requirements.
- Do not write or quote SQL, and do not explain how to build the query.
- Do not ask questions back and do not show your reasoning.

Reply with exactly one JSON object and nothing else: {RESPONDER_REPLY.text}"""


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
    head = _responder_head(
        notes.request, notes.entries, notes.context, notes.segments, notes.reference_sql
    )
    parts = [head, f"The assistant asks: {question}"]
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


@functools.lru_cache(maxsize=1024)  # keyed by the whole static content, as _matcher_static
def _responder_head(
    request: str,
    entries: tuple[NoteEntry, ...],
    context: str | None,
    segments: tuple[str, ...],
    reference_sql: str | None,
) -> str:
    """The responder's user message up to (not including) the question."""
    notes = OracleNotes(request, entries, context, segments, reference_sql)
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
    return "\n\n".join(parts)


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


# -- reading the oracle stages' replies --------------------------------------------------


@dataclass(frozen=True)
class MatcherAction:
    """A matcher route: ``labeled`` (argument: a term), ``unlabeled`` (a SQL segment) or
    ``unanswerable`` (no argument)."""

    kind: Literal["labeled", "unlabeled", "unanswerable"]
    argument: str = ""

    def render(self) -> str:
        """The action as the prompts write it.

        >>> MatcherAction("labeled", "top customers").render()
        'labeled("top customers")'
        """
        if self.kind == "unanswerable":
            return "unanswerable()"
        return f"{self.kind}({json.dumps(self.argument, ensure_ascii=False)})"


_ACTION = re.compile(
    r"\b(unlabeled|labeled|unanswerable)\s*\(\s*(?:(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^()]*?))?\s*\)",
    re.IGNORECASE | re.DOTALL,
)


def _unquote(argument: str) -> str:
    argument = argument.strip()
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "\"'":
        if argument[0] == '"':
            try:
                return str(json_loads(argument)).strip()
            except json.JSONDecodeError:
                pass
        return argument[1:-1].strip()
    return argument


def _action_in(text: str) -> MatcherAction | None:
    found = _ACTION.search(text)
    if not found:
        return None
    kind = found.group(1).lower()
    argument = _unquote(found.group(2) or "")
    if kind == "unanswerable":
        return MatcherAction("unanswerable")
    if not argument:
        return None
    return MatcherAction(kind, argument)  # type: ignore[arg-type]


def parse_matcher_output(text: str) -> MatcherAction | None:
    """Read a matcher reply: JSON with an ``action`` field, or the bare action in the text.

    >>> parse_matcher_output('{"reasoning": "asks about it", "action": "labeled(\\\\"top\\\\")"}')
    MatcherAction(kind='labeled', argument='top')
    >>> parse_matcher_output("unlabeled('WHERE year = 2020')").argument
    'WHERE year = 2020'
    >>> parse_matcher_output("**unanswerable()**").kind
    'unanswerable'
    >>> parse_matcher_output("I am not sure.") is None
    True
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        action = obj.get("action")
        if isinstance(action, str):
            parsed = _action_in(action)
            if parsed is not None:
                return parsed
            bare = action.strip().lower()
            if bare == "unanswerable":
                return MatcherAction("unanswerable")
        return None
    return _action_in(text)


_RATIONALE_KEYS = ("reasoning", "rationale", "reason", "explanation")


def matcher_rationale(text: str) -> str:
    """The routing rationale of a matcher reply: its JSON ``reasoning`` (or ``rationale``,
    ``reason``, ``explanation``) field, else the reply's prose without the action. Thinking
    blocks are not part of it.

    >>> matcher_rationale('{"reasoning": "asks about top", "action": "labeled(\\\\"top\\\\")"}')
    'asks about top'
    >>> matcher_rationale('<think>hmm</think>It is about the region. unlabeled("WHERE r = 1")')
    'It is about the region.'
    >>> matcher_rationale("unanswerable()")
    ''
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        for key in _RATIONALE_KEYS:
            value = obj.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return ""
    return " ".join(_ACTION.sub(" ", text).replace("*", " ").split())


_BRACKETED = re.compile(r"^\s*<[^<>]*>\s*$")  # a whole argument in angle brackets
_ORACLE_REPLIES = (MATCHER_REPLY, RESPONDER_REPLY)

_NON_WORD = re.compile(r"[^\w]+")


def _plain(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def prompt_echo(argument: str, question: str = "") -> bool:
    """Whether a route argument is a placeholder or an echo of the prompt rather than an answer:
    anything in angle brackets alone, a placeholder of the oracle's reply formats
    (:data:`MATCHER_REPLY`, :data:`RESPONDER_REPLY`) in brackets anywhere in it, or with or
    without brackets and nothing besides but format words (``Sql Segment``, ``term: <term>``),
    or the question copied back.

    >>> prompt_echo("<sql segment>"), prompt_echo("Sql Segment"), prompt_echo("WHERE year = 2020")
    (True, True, False)
    >>> prompt_echo("Which year do you mean?", "Which year do you mean?")
    True
    """
    if _BRACKETED.match(argument):
        return True
    if any(f.holds_placeholder(argument) or f.echoes(argument) for f in _ORACLE_REPLIES):
        return True
    plain = _plain(argument)
    if not plain:
        return True
    return bool(question) and plain == _plain(question)


def parse_responder_output(text: str) -> str | None:
    """Read a responder reply: JSON ``answer``/``output``/``response``, else the plain text.
    None when there is none, or when it copies the format's placeholder (``<your reply>``,
    :data:`RESPONDER_REPLY`) instead of answering.

    >>> parse_responder_output('{"answer": "The five biggest spenders."}')
    'The five biggest spenders.'
    >>> parse_responder_output("Just the last year.")
    'Just the last year.'
    >>> parse_responder_output("<think>x</think>") is None
    True
    >>> parse_responder_output('{"answer": "<your reply>"}') is None
    True
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        for key in ("answer", "output", "response", "reply"):
            value = obj.get(key)
            if isinstance(value, str) and value.strip() and not RESPONDER_REPLY.echoes(value):
                return value.strip()
        return None
    if RESPONDER_REPLY.echoes(text):
        return None
    return text or None
