"""Optional model-based hooks of the converters, calling an OpenAI-compatible endpoint (httpx).

Only the deterministic conversion steps are reproducible without models (paper Table 5); the
model-based filters are hooks that a user switches on with ``--llm-url URL --model NAME``.

* :class:`LLMClient` - a small synchronous chat-completions client (temperature 0, fixed seed).
* :func:`extract_sql` - the SQL of a model reply (a fenced block, else the reply itself).
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

import httpx

from ambitab_gym.convert.common import BuildError, find_term, term_problem
from ambitab_gym.records import CompareRules
from ambitab_gym.verify.compare import results_match

__all__ = [
    "EvidenceBenefitFilter",
    "LLMClient",
    "LLMRewriter",
    "LLMTermFinder",
    "Rewriter",
    "RowFilter",
    "TermFinder",
    "extract_sql",
]

_FENCE = re.compile(r"```(?:sql|sqlite|postgresql)?\s*\n?(.*?)```", re.DOTALL | re.IGNORECASE)
_JSON = re.compile(r"\{.*\}", re.DOTALL)


def extract_sql(reply: str) -> str | None:
    """The SQL in a model reply: the last fenced block, else the whole reply.

    >>> extract_sql("Here it is:\\n```sql\\nSELECT 1;\\n```")
    'SELECT 1'
    >>> extract_sql("   ") is None
    True
    """
    blocks = _FENCE.findall(reply or "")
    text = blocks[-1] if blocks else (reply or "")
    text = text.strip().rstrip(";").strip()
    return text or None


class LLMClient:
    """A synchronous client for ``POST {base_url}/chat/completions``.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (a URL ending in ``/chat/completions``
            is used as is).
        model: the model name the server expects.
        seed: sent with every request so servers that honour it are reproducible.
        timeout_s: per-request timeout.
        api_key: sent as a bearer token when given.

    Example:
        >>> LLMClient("http://127.0.0.1:9/v1", "m").url
        'http://127.0.0.1:9/v1/chat/completions'
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        seed: int = 0,
        timeout_s: float = 120.0,
        api_key: str | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        self.model = model
        self.seed = seed
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout_s, headers=headers)

    def complete(self, messages: list[dict[str, str]], *, max_tokens: int = 1024) -> str:
        """The assistant text of one chat completion.

        Raises:
            BuildError: when the endpoint cannot be reached or answers with an error.
        """
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.0,
            "seed": self.seed,
            "max_tokens": max_tokens,
        }
        try:
            response = self._http.post(self.url, json=payload)
        except httpx.HTTPError as error:
            raise BuildError(f"the model endpoint {self.url} is unreachable: {error}") from None
        if response.status_code != 200:
            raise BuildError(
                f"the model endpoint {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise BuildError(
                f"the model endpoint {self.url} did not answer in the chat-completions format"
            ) from None

    def close(self) -> None:
        self._http.close()


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
        without = extract_sql(self.client.complete(_solve_prompt(request, schema, None)))
        with_hints = extract_sql(self.client.complete(_solve_prompt(request, schema, evidence)))
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
        reply = self.client.complete([{"role": "user", "content": content}], max_tokens=2048)
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
        reply = self.client.complete([{"role": "user", "content": content}], max_tokens=64)
        phrase = (
            (reply or "").strip().splitlines()[0].strip().strip("\"'`").strip() if reply else ""
        )
        if not phrase or phrase.upper() == "NONE" or term_problem(phrase) is not None:
            return None
        span = find_term(request, phrase)
        return span.phrase if span is not None else None
