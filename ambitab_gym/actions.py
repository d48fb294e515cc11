"""Parsing the asker's text actions.

* :data:`STOP` - the stop sentinel.
* :func:`parse_action` - plain questions, :data:`STOP`, and the JSON form
  ``{"type": "clarification" | "done", "output": ...}`` that LLM askers emit. Anything else is a
  question (which may earn no credit) - never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["STOP", "ParsedAction", "parse_action", "parse_sql_action"]

#: The stop sentinel: ends the asking phase.
STOP = "<STOP>"

_STOP_WORDS = {STOP.lower(), "stop", "[stop]", "<stop>", "⊥"}


@dataclass(frozen=True)
class ParsedAction:
    """An action as the env understands it: a question (with its text) or a stop.

    >>> ParsedAction("question", "Which year?").kind
    'question'
    """

    kind: Literal["question", "stop"]
    text: str = ""


def _as_text(action: Any) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, bytes):
        return action.decode("utf-8", errors="replace")
    return str(action)


def _json_object(text: str) -> dict | None:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parse_action(action: Any) -> ParsedAction:
    """Turn an asking-phase action into a question or a stop.

    >>> parse_action("Which year do you mean?")
    ParsedAction(kind='question', text='Which year do you mean?')
    >>> parse_action(STOP).kind, parse_action('{"type": "done", "output": ""}').kind
    ('stop', 'stop')
    >>> parse_action('{"type": "clarification", "output": "Top how many?"}').text
    'Top how many?'
    """
    text = _as_text(action)
    if text.strip().lower() in _STOP_WORDS:
        return ParsedAction("stop")
    obj = _json_object(text)
    if obj is not None:
        kind = str(obj.get("type", "")).strip().lower()
        if kind in {"done", "stop"}:
            return ParsedAction("stop")
        if kind in {"clarification", "question"}:
            return ParsedAction("question", _as_text(obj.get("output", "")))
    return ParsedAction("question", text)


def parse_sql_action(action: Any) -> str:
    """The SQL of an SQL-phase action: plain text or ``{"type": ..., "output": SQL}``.

    >>> parse_sql_action('{"type": "sql", "output": "SELECT 1"}')
    'SELECT 1'
    >>> parse_sql_action("SELECT 2")
    'SELECT 2'
    """
    text = _as_text(action)
    obj = _json_object(text)
    if obj is not None and "output" in obj:
        return _as_text(obj["output"])
    return text
