"""Optional model-based hooks of the converters, calling an OpenAI-compatible endpoint.

Only the deterministic conversion steps are reproducible without models (paper Table 5); the
model-based filters are hooks that a user switches on with ``--llm-url URL --model NAME``.

* :class:`LLMClient` - the package's one chat-completions client
  (:class:`ambitab_gym.llm.client.LLMClient`, re-exported: timeouts, retries with backoff,
  ``<think>`` stripped); the hooks call it blocking at temperature 0 with the build's seed, and
  a call that still fails after the retries is a :class:`~ambitab_gym.convert.common.BuildError`.
  The SQL of a reply is read by :func:`ambitab_gym.textutil.extract_sql` (its last fence).
* :class:`RowFilter` - protocol of the EW-Bird row filter; :class:`EvidenceBenefitFilter`
  keeps a row when the model fails without the evidence and succeeds with it.
* :class:`Rewriter` - protocol of the Bird rewriting hook; :class:`LLMRewriter` asks the model
  for an underspecified request, its ambiguities and one SQL per reading.
* :class:`TermFinder` - protocol of the term fallback; :class:`LLMTermFinder` asks the model for
  the ambiguous phrase exactly as the request writes it, used only when the annotations give
  no phrase of the request (the converter accepts the answer only when it occurs in the
  request and passes :func:`~ambitab_gym.convert.common.term_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ambitab_gym.convert.common import BuildError, find_term, term_problem
from ambitab_gym.llm.client import LLMClient
from ambitab_gym.llm.errors import LLMError
from ambitab_gym.records import CompareRules
from ambitab_gym.textutil import extract_sql as _extract_sql
from ambitab_gym.verify.compare import results_match

__all__ = [
    "EvidenceBenefitFilter",
    "LLMClient",
    "LLMRewriter",
    "LLMTermFinder",
    "Rewriter",
    "RowFilter",
    "TermFinder",
]

_JSON = re.compile(r"\{.*\}", re.DOTALL)


def _complete(
    client: LLMClient, messages: list[dict[str, str]], *, max_tokens: int, tag: str
) -> str:
    """The text of one completion at temperature 0 (the client retries timeouts, lost
    connections, 429 and 5xx); a call that still fails is a :class:`BuildError`."""
    try:
        return client.chat(messages, tag=tag, max_tokens=max_tokens, temperature=0.0).text
    except LLMError as error:
        raise BuildError(
            f"the model endpoint {client.base_url} failed ({error.category}): {error}"
        ) from None


def _reply_sql(reply: str) -> str | None:
    """The SQL of a hook reply: its last SQL fence (or JSON / bare SQL), without a final ``;``."""
    sql = _extract_sql(reply, last=True)
    sql = sql.strip().rstrip(";").strip() if sql else ""
    return sql or None


#: ``execute(database, sql) -> rows``; raises on failure
Executor = Callable[[str, str], list[tuple]]


@runtime_checkable
class RowFilter(Protocol):
    """Decides whether an EW-Bird row is kept (paper Table 5: benefit from the evidence).

    ``keep(...)`` returns ``(keep, why)``; ``execute(database, sql)`` runs trusted SQL.

    Example:
        >>> class KeepAll:
        ...     def keep(self, **kwargs):
        ...         return True, "no filter"
        >>> isinstance(KeepAll(), RowFilter)
        True
    """

    def keep(
        self,
        *,
        request: str,
        evidence: list[str],
        reference_sql: str,
        database: str,
        schema: str,
        execute: Executor,
    ) -> tuple[bool, str]: ...


def _solve_prompt(request: str, schema: str, evidence: list[str] | None) -> list[dict[str, str]]:
    lines = [
        "Write one SQLite query that answers the request over this database.",
        "",
        "Schema:",
        schema,
        "",
        f"Request: {request}",
    ]
    if evidence:
        lines += ["", "Hints:"] + [f"- {hint}" for hint in evidence]
    lines += ["", "Answer with the SQL only, in a ```sql block."]
    return [{"role": "user", "content": "\n".join(lines)}]


@dataclass
class EvidenceBenefitFilter:
    """Keep a row when the model fails without the hints and succeeds with them.

    Args:
        client: the model endpoint.
        rules: how results are compared with the reference result.

    Example:
        >>> f = EvidenceBenefitFilter(LLMClient("http://127.0.0.1:9/v1", "m"))
        >>> f.keep(request="?", evidence=[], reference_sql="bad", database="d", schema="",
        ...        execute=lambda db, sql: 1 / 0)
        (True, 'reference fails; left to the build checks')
    """

    client: LLMClient
    rules: CompareRules = CompareRules()

    def _solves(self, sql: str | None, reference: list[tuple], database: str, execute) -> bool:
        if not sql:
            return False
        try:
            rows = execute(database, sql)
        except Exception:
            return False
        return results_match(rows, reference, self.rules)

    def keep(
        self,
        *,
        request: str,
        evidence: list[str],
        reference_sql: str,
        database: str,
        schema: str,
        execute: Executor,
    ) -> tuple[bool, str]:
        try:
            reference = execute(database, reference_sql)
        except Exception:
            return True, "reference fails; left to the build checks"
        prompts = (_solve_prompt(request, schema, None), _solve_prompt(request, schema, evidence))
        without, with_hints = (
            _reply_sql(_complete(self.client, p, max_tokens=1024, tag="convert:filter"))
            for p in prompts
        )
        fails_without = not self._solves(without, reference, database, execute)
        succeeds_with = self._solves(with_hints, reference, database, execute)
        if fails_without and succeeds_with:
            return True, "fails without the evidence, succeeds with it"
        if not fails_without:
            return False, "the model solves the row without the evidence"
        return False, "the model fails even with the evidence"


@runtime_checkable
class Rewriter(Protocol):
    """Turns one BIRD row into readings of an underspecified request (AmbiTab-Bird).

    ``rewrite(row, schema)`` returns ``{"request", "ambiguities", "readings"}`` (see
    :class:`LLMRewriter`) or None.

    Example:
        >>> class Unchanged:
        ...     def rewrite(self, row, schema):
        ...         return {"request": row["question"], "ambiguities": [],
        ...                 "readings": [{"resolutions": {}, "sql": row["SQL"]}]}
        >>> isinstance(Unchanged(), Rewriter)
        True
    """

    def rewrite(self, row: dict[str, Any], schema: str) -> dict[str, Any] | None: ...


_REWRITE_INSTRUCTIONS = """You turn a precise text-to-SQL task into an underspecified one.
Return one JSON object with these keys:
  "request": the task rewritten so that it needs clarification,
  "ambiguities": a list of {"id", "term", "kind" ("critical" or "knowledge")}, where term is
      the vague phrase of the new request,
  "readings": a list of at least two {"resolutions": {ambiguity id: what this reading means},
      "sql": one SQLite query for this reading}; the first reading is the original task.
Only JSON, nothing else."""


@dataclass
class LLMRewriter:
    """The Bird rewriting hook: asks the model for a rewrite and parses its JSON.

    The converter executes every reading's SQL and keeps the rewrite only when the readings
    run and give different results.

    Example:
        >>> LLMRewriter(LLMClient("http://127.0.0.1:9/v1", "m")).client.model
        'm'
    """

    client: LLMClient

    def rewrite(self, row: dict[str, Any], schema: str) -> dict[str, Any] | None:
        evidence = (row.get("evidence") or "").strip()
        content = "\n".join(
            [
                _REWRITE_INSTRUCTIONS,
                "",
                "Schema:",
                schema,
                "",
                f"Task: {row['question']}",
                f"Evidence: {evidence}" if evidence else "Evidence: (none)",
                f"SQL: {row['SQL']}",
            ]
        )
        messages = [{"role": "user", "content": content}]
        reply = _complete(self.client, messages, max_tokens=2048, tag="convert:rewrite")
        found = _JSON.search(reply or "")
        if not found:
            return None
        try:
            data = json.loads(found.group(0))
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("readings"), list):
            return None
        return data


@runtime_checkable
class TermFinder(Protocol):
    """Finds the ambiguous phrase of a request when the annotations do not give one."""

    def find(self, request: str, hint: str) -> str | None:
        """The phrase of ``request`` that ``hint`` (an annotation, a hint, a column) is about,
        exactly as the request writes it, or None."""
        ...


_TERM_INSTRUCTIONS = (
    "A database request is ambiguous. Below are the request and a note about what is "
    "ambiguous. Answer with the shortest whole phrase of the request (a noun phrase, a value "
    "or a modifier) that the note is about, copied exactly from the request, and nothing "
    "else. Never answer with a function word, an instruction, SQL or a column name that the "
    "request does not use. If no phrase of the request fits, answer NONE."
)


@dataclass
class LLMTermFinder:
    """The term fallback: asks the model for the phrase and keeps it only when it is a phrase
    of the request (:func:`~ambitab_gym.convert.common.find_term`) and a possible term
    (:func:`~ambitab_gym.convert.common.term_problem`).

    Example:
        >>> LLMTermFinder(LLMClient("http://127.0.0.1:9/v1", "m")).client.model
        'm'
    """

    client: LLMClient

    def find(self, request: str, hint: str) -> str | None:
        content = f"{_TERM_INSTRUCTIONS}\n\nRequest: {request}\nNote: {hint}\nPhrase:"
        messages = [{"role": "user", "content": content}]
        reply = _complete(self.client, messages, max_tokens=64, tag="convert:term")
        phrase = (
            (reply or "").strip().splitlines()[0].strip().strip("\"'`").strip() if reply else ""
        )
        if not phrase or phrase.upper() == "NONE" or term_problem(phrase) is not None:
            return None
        span = find_term(request, phrase)
        return span.phrase if span is not None else None
