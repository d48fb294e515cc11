"""The one reader of agent replies: env actions and raw model replies alike; it never raises.

* :data:`STOP` - the stop sentinel.
* :func:`read_reply` - the reader: a reply (an action sent to ``step``, or a chat model's raw
  text) in the asking phase or in the SQL phase becomes a :class:`ParsedAction`.
* :func:`parse_action` - :func:`read_reply` in the asking phase: a question or a stop.
* :func:`read_sql_action` / :func:`parse_sql_action` - :func:`read_reply` in the SQL phase.
* :class:`ParsedAction` - what a reply was read as: its kind, its text, its form, a short
  ``note`` and :attr:`ParsedAction.read` (``question``, ``stop``, ``sql`` or ``unreadable``:
  ``info["reply_read"]``).

The env (and so :class:`~ambitab_gym.wrappers.ChatMessages`), the LLM asker and the LLM solver
all read replies here, so a reply means the same everywhere. Replies as models write them:

* reasoning blocks are dropped: ``<think>...</think>``, ``<thinking>``, ``<reasoning>``, a
  dangling ``...</think>`` (the chat template opened the block) and an unclosed block (a reply
  cut off while reasoning is an empty, ``unreadable`` reply);
* a reply that is one Markdown fence (``` ```json``` ```, ``` ```sql``` ```, ``` ``` ``` ```,
  ``~~~``) is read as its body; Windows line ends are read as ``\\n``;
* asking phase: the stop sentinel alone (``<STOP>``, ``STOP``, ``[STOP]``, ``stop.``, ``⊥``,
  also in bold or backticks), prose that ends with ``<STOP>`` / ``[STOP]`` (or with ``STOP``
  in capitals after a line break or a full stop) or starts with the marker, and the JSON form
  ``{"type": "clarification" | "done", "output": ...}`` (bare, fenced, or inside prose) - a
  question that merely contains the word *stop* is a question;
* SQL phase: the JSON form's ``output`` (or ``sql``/``query``/``final_sql``), else the SQL that
  :func:`ambitab_gym.textutil.extract_sql` finds (a statement as it stands, a fenced query,
  a query inside prose), so fenced SQL verifies exactly like the same SQL unfenced.

Actions are untrusted input. Whatever an agent sends - bytes, ``None``, a dict, a number, JSON
with a 5,000-digit integer or 100,000 levels of nesting, lone surrogates, NUL characters, a
100 MB string - it is read as a question, a stop or SQL:

* non-text actions are read as text (bytes as UTF-8 with replacement characters, other objects
  by ``str()``) and marked ``unreadable``;
* numbers inside JSON are kept as their literal text (no integer or float conversion);
* lone surrogates and NUL characters become U+FFFD (the text must be storable as UTF-8);
* a question (and the raw action kept in the trajectory) is cut to :data:`MAX_QUESTION_CHARS`
  characters; text longer than :data:`MAX_JSON_CHARS` is read literally (no reasoning blocks,
  fences or JSON).

Notes describe the reply only; they never carry anything about the hidden interpretation.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ambitab_gym.textutil import extract_sql, find_json_object, json_loads, strip_thinking, unfence
from ambitab_gym.verify.base import bounded_text
from ambitab_gym.vocabulary import ReplyRead

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_QUESTION_CHARS",
    "STOP",
    "ParsedAction",
    "parse_action",
    "parse_sql_action",
    "read_reply",
    "read_sql_action",
    "repair_text",
]

#: The stop sentinel: ends the asking phase.
STOP = "<STOP>"

#: A question, and the raw action text kept in the trajectory, are cut to this many characters.
MAX_QUESTION_CHARS = 10_000

#: Actions longer than this are read literally: not decoded as JSON, no reasoning blocks or
#: fences removed.
MAX_JSON_CHARS = 1_000_000

#: The stop sentinel's spellings, compared in lower case after markup (``*``, `````, quotes,
#: a final ``.`` or ``!``) is taken off.
_STOP_WORDS = {STOP.lower(), "stop", "[stop]", "<stop/>", "⊥"}
_STOP_WORD_MAX = max(len(w) for w in _STOP_WORDS) + 64  # stop words padded with whitespace
_MARKUP = " \t\r\n*_`\"'.!"
_QUESTION_TYPES = {"clarification", "clarify", "question", "ask"}
_STOP_TYPES = {"done", "stop", "finish", "finished", "end"}
#: Longest Python-literal JSON (``{'type': 'done'}``) read; longer text must be real JSON.
_MAX_LITERAL_CHARS = 20_000

_MARK = r"(?:<\s*stop\s*/?\s*>|\[\s*stop\s*\])"
#: Prose that ends with the stop marker: ``... <STOP>``, ``...\nSTOP``, ``Thanks. STOP.``
_TRAILING_STOP = re.compile(
    rf"(?:(?i:{_MARK})|(?:\A|(?<=[\n.!:;—]))[ \t*_`]*STOP)[ \t\n*_`\"'.!]*\Z"
)
#: Prose that starts with the stop marker: ``<STOP>\nNo more questions.``, ``STOP. I know...``
_LEADING_STOP = re.compile(rf"\A[\s*_`]*(?:(?i:{_MARK})|STOP(?=[ \t*_`]*[\n.!:—]))")
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»"}

#: How an action was read: ``question`` (plain text), ``stop`` (the sentinel), ``json`` (the
#: JSON form), ``sql`` (plain SQL), ``unreadable`` (not text, empty, or text that claims a form
#: it does not have; read as text anyway), ``ignored`` (the env did not read it: asking was
#: skipped).
Form = Literal["question", "stop", "json", "sql", "unreadable", "ignored"]


@dataclass(frozen=True)
class ParsedAction:
    """A reply as the env understands it.

    Attributes:
        kind: ``question``, ``stop`` or ``sql``.
        text: the question or the SQL (a question is at most :data:`MAX_QUESTION_CHARS` long).
        form: how the action was read (see :data:`Form`).
        note: a short, fixed explanation when the action had to be repaired, unwrapped or was
            unreadable (empty otherwise). It describes the action only.
        raw: the action as text, repaired and cut like a question (kept in the trajectory).

    >>> reading = ParsedAction("question", "Which year?")
    >>> reading.kind, reading.read
    ('question', 'question')
    >>> ParsedAction("question", "", "unreadable").read
    'unreadable'
    """

    kind: Literal["question", "stop", "sql"]
    text: str = ""
    form: Form = "question"
    note: str = ""
    raw: str = ""

    @property
    def read(self) -> ReplyRead | None:
        """How the reply was read: ``question``, ``stop``, ``sql`` or ``unreadable`` (a question
        or SQL that is not recognisably one, asked or verified anyway); None when the env did
        not read it (form ``ignored``)."""
        if self.form == "ignored":
            return None
        if self.form == "unreadable" and self.kind != "stop":  # a stop is a stop, however sent
            return "unreadable"
        return self.kind


def repair_text(text: str) -> tuple[str, str]:
    """Text storable as UTF-8: lone surrogates and NUL characters become U+FFFD (a valid
    surrogate pair becomes its character). Returns the text and a note (empty when unchanged).

    >>> repair_text("ok")
    ('ok', '')
    >>> repair_text("a" + chr(0xD800) + "b" + chr(0))
    ('a\ufffdb\ufffd', 'invalid Unicode (lone surrogates) replaced by U+FFFD; NUL characters replaced by U+FFFD')
    """
    if text.isascii() and "\x00" not in text:  # the common case: nothing to repair
        return text, ""
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
    return "; ".join([n for n in notes if n])


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

    Numbers keep their literal text: a 5,000-digit integer or 1e400 is never converted. A short
    Python-style dict (``{'type': 'done'}``) is read too.
    """
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None, ""
    if len(stripped) > MAX_JSON_CHARS:
        return None, f"longer than {MAX_JSON_CHARS:,} characters: not decoded as JSON"
    try:
        value = json_loads(stripped, literal_numbers=True)
    except RecursionError:
        return None, "JSON nested too deeply: read as plain text"
    except (ValueError, MemoryError):
        value = _python_literal(stripped)
        if value is None:
            return None, "not valid JSON: read as plain text"
    if not isinstance(value, dict):
        return None, ""
    return value, ""


def _python_literal(text: str) -> Any:
    if len(text) > _MAX_LITERAL_CHARS:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


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


def _raw(text: str) -> str:
    return repair_text(bounded_text(text, MAX_QUESTION_CHARS))[0]


def _unquote(text: str) -> str:
    """A question without one pair of quotes around all of it (``"Which year?"``)."""
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1] and text[0] not in text[1:-1]:
        return text[1:-1].strip()
    return text


# -- the reading, step by step ----------------------------------------------------------------


class _Text(NamedTuple):
    """A reply as text: the body to read, notes so far, and the raw text kept."""

    body: str
    note: str
    raw: str
    literal: bool  # too long: read as it is
    not_text: bool  # the action was not text (any reading is unreadable)


def _prepare(text: str, note: str) -> _Text:
    """Reasoning blocks dropped, a whole-reply fence unwrapped, line ends normalised. ``note``
    is the note of reading the action as text (non-empty: it was not text)."""
    raw, not_text = _raw(text), bool(note)
    if len(text) > MAX_JSON_CHARS:
        return _Text(text, note, raw, True, not_text)
    body = text
    if "<" in body:
        stripped = strip_thinking(body)
        if stripped != body.strip():
            note = _join(
                note, "reasoning block removed" if stripped else "only reasoning, no reply"
            )
        body = stripped
    if "\r" in body:
        body = body.replace("\r\n", "\n")
    body = body.strip()
    if body[:3] in ("```", "~~~"):
        inner = unfence(body)
        if inner != body:
            body = inner
            note = _join(note, "code fence removed")
    return _Text(body, note, raw, False, not_text)


def _question(text: str, form: Form, note: str, raw: str) -> ParsedAction:
    text = _unquote(text.strip()) if len(text) <= MAX_QUESTION_CHARS else text
    if len(text) > MAX_QUESTION_CHARS:
        text = bounded_text(text, MAX_QUESTION_CHARS)
        note = _join(note, f"question cut to {MAX_QUESTION_CHARS:,} characters")
    text, cleaned = repair_text(text)
    if not text and form != "unreadable":
        form, note = "unreadable", _join(note, "" if note else "an empty reply")
    return ParsedAction("question", text, form, _join(note, cleaned), raw)


def _from_json(obj: Mapping, note: str, raw: str, text: str, not_text: bool) -> ParsedAction:
    """The JSON form of the asking phase."""
    kind = _type_of(obj)
    if kind in _STOP_TYPES:
        return ParsedAction("stop", "", "unreadable" if not_text else "json", note, raw)
    if kind in _QUESTION_TYPES:
        output, output_note = _field_text(obj.get("output", ""))
        note = _join(note, output_note)
        return _question(output, "unreadable" if not_text or output_note else "json", note, raw)
    note = _join(
        note, "a JSON object without type 'clarification' or 'done': read as a plain question"
    )
    return _question(text, "unreadable", note, raw)


def _is_stop_word(text: str) -> bool:
    """The sentinel alone, in any spelling of :data:`_STOP_WORDS`, bold, quoted or with a
    final full stop (``**STOP**``, ```<STOP>```, ``stop.``)."""
    return len(text) <= _STOP_WORD_MAX and text.strip(_MARKUP).lower() in _STOP_WORDS


def _stop_marked(body: str) -> bool:
    """Prose that ends (or starts) with the stop marker; only the last (first) 64 characters
    are looked at."""
    tail = max(0, len(body) - 64)
    if "stop" in body[tail:].lower() and _TRAILING_STOP.search(body, tail):
        return True
    return "stop" in body[:64].lower() and _LEADING_STOP.match(body[:64]) is not None


def _read_question(action: Any) -> ParsedAction:
    if type(action) is not str and isinstance(action, Mapping):
        try:
            text = json.dumps(dict(action), ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = ""
        return _from_json(action, "", _raw(text), text, False)
    text, note = _as_text(action)
    if len(text) <= _STOP_WORD_MAX and text.strip().lower() in _STOP_WORDS:
        return ParsedAction("stop", "", "unreadable" if note else "stop", note, _raw(text))
    reply = _prepare(text, note)
    body, note, raw = reply.body, reply.note, reply.raw
    unreadable: Form = "unreadable" if reply.not_text else "question"
    if reply.literal:  # too long to read: a question as it is (a JSON look-alike says so)
        _, json_note = _decode_json(body)
        form: Form = "unreadable" if json_note else unreadable
        return _question(body, form, _join(note, json_note), raw)
    if _is_stop_word(body):
        return ParsedAction("stop", "", "unreadable" if reply.not_text else "stop", note, raw)
    obj, json_note = _decode_json(body)
    if obj is not None:
        return _from_json(obj, note, raw, body, reply.not_text)
    if json_note:
        return _question(body, "unreadable", _join(note, json_note), raw)
    if "{" in body:  # the JSON form inside prose or a fence: "Sure! ```json {...}```"
        obj = find_json_object(body)
        if obj is not None and _type_of(obj) in _QUESTION_TYPES | _STOP_TYPES:
            note = _join(note, "JSON action taken from within the reply")
            return _from_json(obj, note, raw, body, reply.not_text)
    if _stop_marked(body):
        note = _join(note, "text around the stop marker ignored")
        return ParsedAction("stop", "", "unreadable" if reply.not_text else "stop", note, raw)
    return _question(body, unreadable, note, raw)


_SQL_KEYS = ("output", "sql", "query", "final_sql")


def _read_sql(action: Any) -> ParsedAction:
    if type(action) is not str and isinstance(action, Mapping):
        if "output" not in action:
            return ParsedAction("sql", "", "unreadable", "a mapping without 'output': no SQL", "")
        text, note = _field_text(action["output"])
        text, cleaned = repair_text(text)
        return ParsedAction(
            "sql", text, "unreadable" if note else "json", _join(note, cleaned), _raw(text)
        )
    text, note = _as_text(action)
    text, cleaned = repair_text(text)
    not_text = bool(note)
    reply = _prepare(text, note)
    body, note, raw = reply.body, reply.note, reply.raw
    if reply.literal:
        _, json_note = _decode_json(body)
        form: Form = "unreadable" if not_text or json_note else "sql"
        return ParsedAction("sql", body, form, _join(note, json_note, cleaned), raw)
    obj, json_note = _decode_json(body)
    if obj is not None:
        for key in _SQL_KEYS:
            if key in obj and (key == "output" or isinstance(obj[key], str)):
                sql, output_note = _field_text(obj[key])
                sql, again = repair_text(unfence(sql.strip()))
                note = _join(note, output_note, cleaned, again)
                if not sql:
                    note = _join(note, f"an empty '{key}': no SQL")
                json_form: Form = "unreadable" if not_text or output_note or not sql else "json"
                return ParsedAction("sql", sql, json_form, note, raw)
        note = _join(note, "a JSON object without 'output': read as SQL as it is", cleaned)
        return ParsedAction("sql", body, "unreadable", note, raw)
    if json_note:
        return ParsedAction("sql", body, "unreadable", _join(note, json_note, cleaned), raw)
    sql = extract_sql(body) if body else None
    if sql is None:
        missing = "no SQL found in the reply: verified as it is" if body else "an empty reply"
        note = _join(note, "" if not body and note else missing, cleaned)
        return ParsedAction("sql", body, "unreadable", note, raw)
    if sql != body:
        note = _join(note, "SQL taken from within the reply")
    return ParsedAction("sql", sql, "unreadable" if not_text else "sql", _join(note, cleaned), raw)


def read_reply(reply: Any, *, phase: Literal["ask", "sql"] = "ask") -> ParsedAction:
    """Read an agent's reply - an action sent to ``step``, or a chat model's raw text - in the
    asking phase (a question or a stop) or in the SQL phase (SQL). Never raises.

    Args:
        reply: anything; text is expected (see the module docstring for everything else).
        phase: ``ask`` or ``sql``.

    Returns:
        The reading; :attr:`ParsedAction.read` says what it is (``info["reply_read"]``).

    Examples:
        >>> read_reply("<think>They said top; ask how many.</think>Top how many?").text
        'Top how many?'
        >>> read_reply("I have everything I need now. <STOP>").read
        'stop'
        >>> read_reply("Should the list stop at 2020?").read
        'question'
        >>> read_reply('```json\\n{"type": "done", "output": null}\\n```').read
        'stop'
        >>> reading = read_reply("Here it is:\\n```SQL\\nSELECT 1;\\n```", phase="sql")
        >>> reading.read, reading.text
        ('sql', 'SELECT 1;')
        >>> read_reply("<think>Which year? I keep thinking", phase="ask").read
        'unreadable'
    """
    try:
        return _read_sql(reply) if phase == "sql" else _read_question(reply)
    except Exception:  # noqa: BLE001 - the guarantee: no reply raises
        kind: Literal["question", "sql"] = "sql" if phase == "sql" else "question"
        return ParsedAction(kind, "", "unreadable", "the action could not be read")


def parse_action(action: Any) -> ParsedAction:
    """Turn an asking-phase action into a question or a stop (:func:`read_reply` with
    ``phase="ask"``). Never raises.

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
    return read_reply(action, phase="ask")


def read_sql_action(action: Any) -> ParsedAction:
    """The SQL of an SQL-phase action (:func:`read_reply` with ``phase="sql"``), with how it
    was read. Never raises; the SQL is not cut (the verifier refuses SQL longer than its
    ``Limits.max_sql_length``).

    >>> reading = read_sql_action('{"type": "sql", "output": "SELECT 1"}')
    >>> reading.text, reading.form
    ('SELECT 1', 'json')
    >>> read_sql_action("SELECT '\\x00'").note
    'NUL characters replaced by U+FFFD'
    """
    return read_reply(action, phase="sql")


def parse_sql_action(action: Any) -> str:
    """The SQL of an SQL-phase action: plain text or ``{"type": ..., "output": SQL}``.

    >>> parse_sql_action('{"type": "sql", "output": "SELECT 1"}')
    'SELECT 1'
    >>> parse_sql_action("SELECT 2")
    'SELECT 2'
    """
    return read_sql_action(action).text
