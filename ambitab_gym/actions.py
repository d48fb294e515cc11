"""Parsing the agent's text actions; no action ever raises.

* :data:`STOP` - the stop sentinel.
* :func:`parse_action` - plain questions, :data:`STOP`, and the JSON form
  ``{"type": "clarification" | "done", "output": ...}`` that LLM askers emit. Anything else is a
  question (which may earn no credit) - never an exception.
* :func:`read_sql_action` / :func:`parse_sql_action` - the SQL of an SQL-phase action.
* :class:`ParsedAction` - what the env made of an action: its kind, its text, how it was read
  (``form``) and a short ``note`` when it had to be repaired.

Actions are untrusted input. Whatever an agent sends - bytes, ``None``, a dict, a number, JSON
with a 5,000-digit integer or 100,000 levels of nesting, lone surrogates, NUL characters, a
100 MB string - it is read as a question, a stop or SQL:

* non-text actions are read as text (bytes as UTF-8 with replacement characters, other objects
  by ``str()``) and marked ``unreadable``;
* numbers inside JSON are kept as their literal text (no integer or float conversion);
* lone surrogates and NUL characters become U+FFFD (the text must be storable as UTF-8);
* a question (and the raw action kept in the trajectory) is cut to :data:`MAX_QUESTION_CHARS`
  characters; text longer than :data:`MAX_JSON_CHARS` is not decoded as JSON.

Notes describe the action only; they never carry anything about the hidden interpretation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ambitab_gym.verify.base import bounded_text

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_QUESTION_CHARS",
    "STOP",
    "ParsedAction",
    "parse_action",
    "parse_sql_action",
    "read_sql_action",
    "repair_text",
]

#: The stop sentinel: ends the asking phase.
STOP = "<STOP>"

#: A question, and the raw action text kept in the trajectory, are cut to this many characters.
MAX_QUESTION_CHARS = 10_000

#: Actions longer than this are not decoded as JSON (they are read as plain text).
MAX_JSON_CHARS = 1_000_000

_STOP_WORDS = {STOP.lower(), "stop", "[stop]", "<stop>", "⊥"}
_STOP_WORD_MAX = max(len(w) for w in _STOP_WORDS) + 64  # stop words padded with whitespace
_QUESTION_TYPES = {"clarification", "question"}
_STOP_TYPES = {"done", "stop"}

#: How an action was read: ``question`` (plain text), ``stop`` (the sentinel), ``json`` (the
#: JSON form), ``sql`` (plain SQL), ``unreadable`` (not text, or text that claims a form it does
#: not have; read as text anyway), ``ignored`` (the env did not read it: asking was skipped).
Form = Literal["question", "stop", "json", "sql", "unreadable", "ignored"]


@dataclass(frozen=True)
class ParsedAction:
    """An action as the env understands it.

    Attributes:
        kind: ``question``, ``stop`` or ``sql``.
        text: the question or the SQL (a question is at most :data:`MAX_QUESTION_CHARS` long).
        form: how the action was read (see :data:`Form`).
        note: a short, fixed explanation when the action had to be repaired or was unreadable
            (empty otherwise). It describes the action only.
        raw: the action as text, repaired and cut like a question (kept in the trajectory).

    >>> ParsedAction("question", "Which year?").kind
    'question'
    """

    kind: Literal["question", "stop", "sql"]
    text: str = ""
    form: Form = "question"
    note: str = ""
    raw: str = ""


def repair_text(text: str) -> tuple[str, str]:
    """Text storable as UTF-8: lone surrogates and NUL characters become U+FFFD (a valid
    surrogate pair becomes its character). Returns the text and a note (empty when unchanged).

    >>> repair_text("ok")
    ('ok', '')
    >>> repair_text("a" + chr(0xD800) + "b" + chr(0))
    ('a\ufffdb\ufffd', 'invalid Unicode (lone surrogates) replaced by U+FFFD; NUL characters replaced by U+FFFD')
    """
    notes = []
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # surrogate pairs become their character, lone surrogates U+FFFD
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        notes.append("invalid Unicode (lone surrogates) replaced by U+FFFD")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
        notes.append("NUL characters replaced by U+FFFD")
    return text, "; ".join(notes)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _as_text(action: Any) -> tuple[str, str]:
    """The action as text, and a note when it was not text (which makes it ``unreadable``)."""
    if isinstance(action, str):
        return str.__str__(action), ""  # an exact str, even for subclasses such as numpy.str_
    if isinstance(action, bytes | bytearray | memoryview):
        data = bytes(action)
        try:
            return data.decode("utf-8"), ""
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace"), "bytes that are not UTF-8, decoded with U+FFFD"
    if action is None:
        return "", "no action (None): read as an empty question"
    try:
        text = str(action)
    except Exception:  # noqa: BLE001 - an object whose str() fails is read as empty text
        return "", f"an object of type {type(action).__name__} that has no text"
    if not isinstance(text, str):
        return "", f"an object of type {type(action).__name__} that has no text"
    return text, f"not text but {type(action).__name__}: read as its str()"


def _decode_json(text: str) -> tuple[Any, str]:
    """A JSON object, or None and a note when text that looks like one does not decode.

    Numbers keep their literal text: a 5,000-digit integer or 1e400 is never converted.
    """
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None, ""
    if len(stripped) > MAX_JSON_CHARS:
        return None, f"longer than {MAX_JSON_CHARS:,} characters: not decoded as JSON"
    try:
        value = json.loads(stripped, parse_int=str, parse_float=str, parse_constant=str)
    except RecursionError:
        return None, "JSON nested too deeply: read as plain text"
    except (ValueError, MemoryError):
        return None, "not valid JSON: read as plain text"
    if not isinstance(value, dict):
        return None, ""
    return value, ""


def _field_text(value: Any) -> tuple[str, str]:
    """The text of a JSON field (``output``): strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value, ""
    if value is None:
        return "", ""
    try:
        return json.dumps(value, ensure_ascii=False), ""
    except (TypeError, ValueError, RecursionError):
        text, note = _as_text(value)
        return text, note or "an output that is not text"


def _type_of(obj: Mapping) -> str:
    kind = obj.get("type", "")
    return kind.strip().lower() if isinstance(kind, str) else ""


def _question(text: str, form: Form, note: str, raw: str) -> ParsedAction:
    if len(text) > MAX_QUESTION_CHARS:
        text = bounded_text(text, MAX_QUESTION_CHARS)
        note = _join(note, f"question cut to {MAX_QUESTION_CHARS:,} characters")
    text, cleaned = repair_text(text)
    return ParsedAction("question", text, form, _join(note, cleaned), raw)


def _raw(text: str) -> str:
    return repair_text(bounded_text(text, MAX_QUESTION_CHARS))[0]


def _parse_question(action: Any) -> ParsedAction:
    if isinstance(action, Mapping):
        obj: Any = action
        text, note, json_note = "", "", ""
        try:
            text = json.dumps(dict(action), ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = ""
    else:
        text, note = _as_text(action)
        obj, json_note = None, ""
        if len(text) <= _STOP_WORD_MAX and text.strip().lower() in _STOP_WORDS:
            return ParsedAction("stop", "", "unreadable" if note else "stop", note, _raw(text))
        obj, json_note = _decode_json(text)
    raw = _raw(text)
    if obj is not None:
        kind = _type_of(obj)
        if kind in _STOP_TYPES:
            return ParsedAction("stop", "", "unreadable" if note else "json", note, raw)
        if kind in _QUESTION_TYPES:
            output, output_note = _field_text(obj.get("output", ""))
            note = _join(note, output_note)
            return _question(output, "unreadable" if note else "json", note, raw)
        note = _join(
            note, "a JSON object without type 'clarification' or 'done': read as a plain question"
        )
        return _question(text, "unreadable", note, raw)
    if json_note:
        return _question(text, "unreadable", _join(note, json_note), raw)
    return _question(text, "unreadable" if note else "question", note, raw)


def parse_action(action: Any) -> ParsedAction:
    """Turn an asking-phase action into a question or a stop. Never raises.

    >>> reading = parse_action("Which year do you mean?")
    >>> reading.kind, reading.text, reading.form
    ('question', 'Which year do you mean?', 'question')
    >>> parse_action(STOP).kind, parse_action('{"type": "done", "output": ""}').kind
    ('stop', 'stop')
    >>> parse_action('{"type": "clarification", "output": "Top how many?"}').text
    'Top how many?'
    >>> reading = parse_action('{"type": "clarification", "output": ' + "9" * 5000 + "}")
    >>> reading.form, len(reading.text)
    ('json', 5000)
    >>> parse_action(b"\\xff").form, parse_action(None).note
    ('unreadable', 'no action (None): read as an empty question')
    """
    try:
        return _parse_question(action)
    except Exception:  # noqa: BLE001 - the guarantee: no action raises
        return ParsedAction("question", "", "unreadable", "the action could not be read")


def _read_sql(action: Any) -> ParsedAction:
    if isinstance(action, Mapping):
        obj: Any = action
        note = ""
        text = ""
    else:
        text, note = _as_text(action)
        obj, json_note = _decode_json(text)
        if json_note:
            note = _join(note, json_note)
    form: Form = "sql"
    if obj is not None:
        if "output" in obj:
            text, output_note = _field_text(obj["output"])
            note = _join(note, output_note)
            form = "json"
        elif isinstance(action, Mapping):
            note = _join(note, "a mapping without 'output': no SQL")
    text, cleaned = repair_text(text)
    note = _join(note, cleaned)
    if note and form == "sql":
        form = "unreadable"
    return ParsedAction("sql", text, form, note, _raw(text))


def read_sql_action(action: Any) -> ParsedAction:
    """The SQL of an SQL-phase action (plain text or ``{"type": ..., "output": SQL}``), with
    how it was read. Never raises; the SQL is not cut (the verifier refuses SQL longer than
    its ``Limits.max_sql_length``).

    >>> reading = read_sql_action('{"type": "sql", "output": "SELECT 1"}')
    >>> reading.text, reading.form
    ('SELECT 1', 'json')
    >>> read_sql_action("SELECT '\\x00'").note
    'NUL characters replaced by U+FFFD'
    """
    try:
        return _read_sql(action)
    except Exception:  # noqa: BLE001 - the guarantee: no action raises
        return ParsedAction("sql", "", "unreadable", "the action could not be read")


def parse_sql_action(action: Any) -> str:
    """The SQL of an SQL-phase action: plain text or ``{"type": ..., "output": SQL}``.

    >>> parse_sql_action('{"type": "sql", "output": "SELECT 1"}')
    'SELECT 1'
    >>> parse_sql_action("SELECT 2")
    'SELECT 2'
    """
    return read_sql_action(action).text
