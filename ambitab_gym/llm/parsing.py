"""Reading what language models write: thinking blocks, JSON actions, oracle routes and SQL.

* :func:`strip_thinking` - drop ``<think>...</think>`` reasoning from a reply.
* :func:`find_json_object` - the first JSON object in a reply (bare, fenced or embedded).
* :class:`AskerOutput` and :func:`parse_asker_output` - the asker's JSON action
  ``{"type": "clarification" | "done", "output": ...}``.
* :class:`MatcherAction` and :func:`parse_matcher_output` - the oracle matcher's route
  ``labeled("term")``, ``unlabeled("sql segment")`` or ``unanswerable()``;
  :func:`matcher_rationale` - the reasoning it gave (recorded for the C.3 scorer).
* :func:`parse_responder_output` - the oracle responder's answer text.
* :func:`extract_sql` - the SQL of a solver reply.

Parsers never raise on model text; they return ``None`` (or an ``invalid`` result) instead, and
the caller decides what an unreadable reply means.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "AskerOutput",
    "MatcherAction",
    "extract_sql",
    "find_json_object",
    "matcher_rationale",
    "parse_asker_output",
    "parse_matcher_output",
    "parse_responder_output",
    "strip_thinking",
]

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.DOTALL)


def strip_thinking(text: str) -> str:
    """Remove reasoning blocks: ``<think>...</think>``, a dangling ``...</think>`` prefix (when the
    chat template opened the block) and an unclosed ``<think>...`` tail.

    >>> strip_thinking("<think>hmm, maybe 3</think>\\n\\nThree.")
    'Three.'
    >>> strip_thinking("reasoning the template opened</think>Answer")
    'Answer'
    >>> strip_thinking("Answer <think>never closed")
    'Answer'
    """
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError):
        pass
    try:  # single-quoted dicts, True/None: models write Python now and then
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def find_json_object(text: str) -> dict | None:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded in prose.

    >>> find_json_object('Sure! ```json\\n{"type": "done", "output": null}\\n``` Bye.')
    {'type': 'done', 'output': None}
    >>> find_json_object('I think {"answer": "three"} is right')
    {'answer': 'three'}
    >>> find_json_object("no object here") is None
    True
    """
    if not isinstance(text, str):
        return None
    candidates = [text.strip()]
    candidates += [m.group(2).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        if candidate.startswith("{"):
            value = _loads(candidate)
            if isinstance(value, dict):
                return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


@dataclass(frozen=True)
class AskerOutput:
    """What an asker reply says: a question, a stop, or nothing readable."""

    kind: Literal["question", "stop", "invalid"]
    text: str = ""


_ASK_TYPES = {"clarification", "clarify", "question", "ask"}
_STOP_TYPES = {"done", "stop", "finish", "finished", "end"}


def parse_asker_output(text: str) -> AskerOutput:
    """Read an asker reply ``{"type": "clarification" | "done", "output": ...}``.

    A reply without JSON that is a single line ending in ``?`` is taken as the question.

    >>> parse_asker_output('{"type": "clarification", "output": "Which year?"}')
    AskerOutput(kind='question', text='Which year?')
    >>> parse_asker_output('{"type": "done", "output": null}').kind
    'stop'
    >>> parse_asker_output("Which year do you mean?").text
    'Which year do you mean?'
    >>> parse_asker_output("I will now write SQL.").kind
    'invalid'
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        kind = str(obj.get("type", "")).strip().lower()
        output = obj.get("output")
        if kind in _STOP_TYPES:
            return AskerOutput("stop")
        if kind in _ASK_TYPES and isinstance(output, str) and output.strip():
            return AskerOutput("question", output.strip())
        return AskerOutput("invalid", text)
    stripped = text.strip().strip('"').strip()
    if stripped and "\n" not in stripped and stripped.endswith("?") and len(stripped) <= 500:
        return AskerOutput("question", stripped)
    return AskerOutput("invalid", text)


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
                return str(json.loads(argument)).strip()
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


def parse_responder_output(text: str) -> str | None:
    """Read a responder reply: JSON ``answer``/``output``/``response``, else the plain text.

    >>> parse_responder_output('{"answer": "The five biggest spenders."}')
    'The five biggest spenders.'
    >>> parse_responder_output("Just the last year.")
    'Just the last year.'
    >>> parse_responder_output("<think>x</think>") is None
    True
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        for key in ("answer", "output", "response", "reply"):
            value = obj.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None
    return text or None


_SQL_START = re.compile(r"(?is)\b(WITH\s+\w+(?:\s*\([^)]*\))?\s+AS\s*\(|SELECT\b)")


def extract_sql(text: str) -> str | None:
    """The SQL of a solver reply: JSON ``output``/``sql``, a fenced block, or bare SQL.

    >>> extract_sql('{"reasoning": "...", "type": "final_sql", "output": "SELECT 1"}')
    'SELECT 1'
    >>> extract_sql("Here it is:\\n```sql\\nSELECT name FROM t;\\n```")
    'SELECT name FROM t;'
    >>> extract_sql("The answer: SELECT a FROM b WHERE c = 1")
    'SELECT a FROM b WHERE c = 1'
    >>> extract_sql("no query") is None
    True
    """
    text = strip_thinking(text or "")
    obj = find_json_object(text)
    if obj is not None:
        for key in ("output", "sql", "query", "final_sql"):
            value = obj.get(key)
            if isinstance(value, str) and value.strip():
                return _strip_fence(value.strip())
    for lang_first in (True, False):
        for m in _FENCE.finditer(text):
            lang, body = m.group(1).lower(), m.group(2).strip()
            labeled = lang in {"sql", "sqlite", "postgresql", "postgres"}
            if body and (labeled or not lang_first) and _SQL_START.search(body):
                return body
    found = _SQL_START.search(text)
    if found:
        return text[found.start() :].strip()
    return None


def _strip_fence(sql: str) -> str:
    found = _FENCE.fullmatch(sql.strip())
    return found.group(2).strip() if found else sql
