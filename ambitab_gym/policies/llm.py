"""LLM askers and the LLM solver (paper Section 4.1, Table 9, Appendix G).

* :class:`LLMAsker` - asks one clarifying question per turn with one of the strategies
  ``direct``, ``checklist-chat`` or ``checklist-ledger``; emits the JSON action form
  ``{"type": "clarification" | "done", "output": ...}``.
* :class:`LLMSolver` - writes the final SQL from the request and the visible dialogue.
* :func:`make_llm_asker`, :func:`make_llm_solver` - build them (by strategy name; by corpus for
  the solver's SQL dialect); :func:`parse_llm_spec` - ``llm:checklist-ledger`` ->
  ``checklist-ledger``.

Replies are read by the one reply reader, :func:`ambitab_gym.actions.read_reply` (the env reads
actions with it too): reasoning blocks, fences, STOP variants and the JSON form mean the same
to an LLM role as to the env.

Both read only a :class:`~ambitab_gym.trajectory.PublicView` (the agent side of the trust
boundary), take their prompts from :mod:`ambitab_gym.policies.llm_prompts` and import nothing
from the oracle side; they offer an async method (``aact``/``asolve``) for campaigns and a blocking one
(``act``/``solve``) for plain ``env.step`` loops.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

from ambitab_gym.actions import read_sql_action
from ambitab_gym.llm.client import LLMMalformedResponse, response_format
from ambitab_gym.llm.sampling import EpisodeKey, Sampling, current_episode, episode_scope
from ambitab_gym.policies.llm_prompts import (
    ASKER_STRATEGIES,
    SOLVER_REPLY,
    TaskTexts,
    asker_messages,
    asker_schema,
    parse_asker_output,
    solver_messages,
    solver_schema,
)
from ambitab_gym.textutil import extract_sql  # noqa: F401 - kept as policies.llm.extract_sql
from ambitab_gym.trajectory import FALLBACK_STOP, PublicView

if TYPE_CHECKING:
    from ambitab_gym.corpora import Corpus
    from ambitab_gym.llm.client import LLMClient

__all__ = [
    "DONE_ACTION",
    "FALLBACK_STOP",
    "LLMAsker",
    "LLMSolver",
    "clarification_action",
    "make_llm_asker",
    "make_llm_solver",
    "parse_llm_spec",
    "solver_sql",
]

#: The JSON stop action the LLM asker emits.
DONE_ACTION = json.dumps({"type": "done", "output": None})

# json.dumps(..., ensure_ascii=False) without building an encoder on every call
_JSON_TEXT = json.JSONEncoder(ensure_ascii=False)

# the structured-output formats (constant: built once, never changed)
_ASKER_FORMAT = response_format("asker_action", asker_schema())
_SOLVER_FORMAT = response_format("final_sql", solver_schema())


def solver_sql(reply: str) -> str | None:
    """The SQL of a solver reply as the env would read it in the SQL phase
    (:func:`ambitab_gym.actions.read_sql_action`); None when the reply holds no SQL, or when
    its SQL copies a placeholder of the prompt's format (``<the SQL>``,
    :data:`~ambitab_gym.policies.llm_prompts.SOLVER_REPLY`).

    >>> solver_sql("<think>Count them.</think>\\n```sql\\nSELECT COUNT(*) FROM staff\\n```")
    'SELECT COUNT(*) FROM staff'
    >>> solver_sql("I cannot write this query.") is None
    True
    >>> solver_sql('{"reasoning": "r", "type": "final_sql", "output": "<the SQL>"}') is None
    True
    """
    reading = read_sql_action(reply)
    if reading.read != "sql" or SOLVER_REPLY.echoes(reading.text):
        return None
    return reading.text


def clarification_action(question: str) -> str:
    """The JSON action for a question.

    >>> clarification_action("Which year?")
    '{"type": "clarification", "output": "Which year?"}'
    """
    return _JSON_TEXT.encode({"type": "clarification", "output": question})


class _Counts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter = Counter()

    def add(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._counts[key] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def __getstate__(self) -> dict:  # pickling (Ray workers): the counts, not the lock
        return {"counts": self.snapshot()}

    def __setstate__(self, state: dict) -> None:
        self._lock = threading.Lock()
        self._counts = Counter(state["counts"])


class LLMAsker:
    """An asking policy backed by a chat model.

    Args:
        client: the LLM client.
        strategy: ``direct``, ``checklist-chat`` or ``checklist-ledger`` (paper Table 9).
        on_unreadable: what an unreadable reply means: ``stop`` (a fallback stop, the paper's
            convention: :data:`~ambitab_gym.trajectory.FALLBACK_STOP`, which the env records as
            stop reason ``fallback`` and the scorer leaves out of recall and F1), ``raise`` (a
            ``malformed_output`` error) or ``question`` (the raw text is asked as the question).
            A reply that copies the prompt's placeholder (``<your one question>``) is
            unreadable too, and never asked: under ``question`` it is a fallback stop.
        max_tokens, temperature, seed: overrides of ``sampling``.
        structured: ask for schema-constrained JSON (default: the client's
            ``structured_output``).
        sampling: the asker's sampling (default: the client's ``sampling["asker"]``). Each call
            sends a seed derived from the episode, the turn and the attempt
            (:func:`~ambitab_gym.llm.sampling.derive_seed`); outside a campaign the seed given
            to :meth:`reset` stands for the campaign seed.

    Counts of questions, stops and fallback stops are in :attr:`stats`.

    Example:
        >>> from ambitab_gym.llm import LLMClient
        >>> from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="List top customers.", database="shop"),
        ...                   questions_left=3)
        >>> rule = ScriptRule('{"type": "clarification", "output": "Top how many?"}')
        >>> with ScriptedServer([rule]) as server, LLMClient(server.url, "m") as client:
        ...     LLMAsker(client, "direct").act(view)
        '{"type": "clarification", "output": "Top how many?"}'
    """

    def __init__(
        self,
        client: LLMClient,
        strategy: str = "checklist-ledger",
        *,
        on_unreadable: Literal["stop", "raise", "question"] = "stop",
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        structured: bool | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        if strategy not in ASKER_STRATEGIES:
            raise ValueError(
                f"unknown asking strategy {strategy!r}; choose from {', '.join(ASKER_STRATEGIES)}"
            )
        if on_unreadable not in ("stop", "raise", "question"):
            raise ValueError("on_unreadable must be 'stop', 'raise' or 'question'")
        self.client = client
        self.strategy = strategy
        self.on_unreadable = on_unreadable
        self.sampling = (sampling or client.sampling["asker"]).replace(
            max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        self.episode_seed: int | None = None
        self.structured = client.structured_output if structured is None else structured
        self._counts = _Counts()
        self._tasks = TaskTexts()

    @property
    def max_tokens(self) -> int | None:
        return self.sampling.max_tokens

    @property
    def stats(self) -> dict[str, int]:
        """``calls``, ``questions``, ``stops``, ``unreadable`` and ``fallback_stops`` so far."""
        return self._counts.snapshot()

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; outside a campaign a given seed stands for the campaign seed in
        the derived per-call seeds (inside one, the episode's key decides)."""
        if seed is not None:
            self.episode_seed = int(seed)

    async def aact(self, view: PublicView) -> str:
        """The next action for ``view``: a JSON clarification, the JSON stop, or (unreadable
        reply, ``on_unreadable="stop"``) the fallback stop.

        Raises:
            LLMError: the server failed (its ``category`` says how), or the reply was
                unreadable and ``on_unreadable="raise"``.
        """
        if view.phase != "ask" or view.questions_left <= 0:
            return DONE_ACTION
        messages = asker_messages(self.strategy, view, task=self._tasks.get(view))
        scope: Any = contextlib.nullcontext()
        if current_episode() is None and self.episode_seed is not None:
            scope = episode_scope(EpisodeKey(seed=self.episode_seed))
        with scope:
            result = await self.client.achat(
                messages,
                tag=f"asker:{self.strategy}",
                role="asker",
                turn=len(view.dialogue),
                sampling=self.sampling,
                parse=parse_asker_output,
                response_format=_ASKER_FORMAT if self.structured else None,
            )
        self._counts.add("calls")
        output = result.parsed
        if output.kind == "question":
            self._counts.add("questions")
            return clarification_action(output.text)
        if output.kind == "stop":
            self._counts.add("stops")
            return DONE_ACTION
        self._counts.add("unreadable")
        if self.on_unreadable == "raise":
            raise LLMMalformedResponse(f"the asker's reply is not an action: {result.text[:200]!r}")
        if self.on_unreadable == "question" and output.text:
            self._counts.add("questions")  # the reply as the env would ask it
            return clarification_action(output.text)
        self._counts.add("fallback_stops")
        return FALLBACK_STOP

    def act(self, view: PublicView) -> str:
        """Blocking :meth:`aact` (runs on the client's private event loop)."""
        return self.client.run_sync(self.aact(view))


class LLMSolver:
    """A solution policy backed by a chat model: SQL from the request and the dialogue.

    Args:
        client: the LLM client.
        dialect: ``sqlite``, ``postgres`` or ``duckdb`` (worded into the prompt).
        max_tokens, temperature, seed: overrides of ``sampling``.
        structured: ask for schema-constrained JSON (default: the client's
            ``structured_output``).
        sampling: the solver's sampling (default: the client's ``sampling["solver"]``); each
            call sends a seed derived from the episode (its turn: the questions asked).

    The reply is read by :func:`solver_sql` (reasoning blocks dropped; the JSON form, a fenced
    query or SQL inside prose). A reply without recognisable SQL is returned as it is (the
    verifier then fails it) and counted in ``stats["unreadable"]``; one that copies the
    format's placeholder (``<the SQL>``) is counted too and submits no SQL (verdict ``no_sql``).

    Example:
        >>> from ambitab_gym.llm import LLMClient
        >>> from ambitab_gym.testing.llm_server import ScriptedServer, ScriptRule
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="Count staff.", database="hr"), phase="sql")
        >>> rule = ScriptRule('{"reasoning": "easy", "type": "final_sql", '
        ...                   '"output": "SELECT COUNT(*) FROM staff"}')
        >>> with ScriptedServer([rule]) as server, LLMClient(server.url, "m") as client:
        ...     LLMSolver(client).solve(view)
        'SELECT COUNT(*) FROM staff'
    """

    #: The model reads the answers as text (:func:`ambitab_gym.policies.base.reads_answers`).
    reads_answers = True

    def __init__(
        self,
        client: LLMClient,
        *,
        dialect: str = "sqlite",
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        structured: bool | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.client = client
        self.dialect = dialect
        self.sampling = (sampling or client.sampling["solver"]).replace(
            max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        self.structured = client.structured_output if structured is None else structured
        self._counts = _Counts()
        self._tasks = TaskTexts()

    @property
    def stats(self) -> dict[str, int]:
        """``calls`` and ``unreadable`` replies so far."""
        return self._counts.snapshot()

    async def asolve(self, view: PublicView) -> str:
        """The SQL for ``view``.

        Raises:
            LLMError: the server failed; its ``category`` says how.
        """
        result = await self.client.achat(
            solver_messages(view, dialect=self.dialect, task=self._tasks.get(view)),
            tag="solver",
            role="solver",
            turn=len(view.dialogue),
            sampling=self.sampling,
            parse=solver_sql,
            response_format=_SOLVER_FORMAT if self.structured else None,
        )
        self._counts.add("calls")
        sql = result.parsed
        if sql is None:  # verified as the env would verify it: without reasoning or fences
            self._counts.add("unreadable")
            text = read_sql_action(result.text).text
            return "" if SOLVER_REPLY.echoes(text) else text  # a placeholder is no SQL
        return sql

    def solve(self, view: PublicView) -> str:
        """Blocking :meth:`asolve`."""
        return self.client.run_sync(self.asolve(view))


def parse_llm_spec(spec: str) -> str | None:
    """The strategy in an ``llm`` or ``llm:<strategy>`` spec; None when there is none.

    >>> parse_llm_spec("llm:checklist-chat"), parse_llm_spec("llm"), parse_llm_spec("direct")
    ('checklist-chat', None, 'direct')
    """
    spec = spec.strip()
    if spec == "llm":
        return None
    if spec.startswith("llm:"):
        spec = spec[4:]
    if spec not in ASKER_STRATEGIES:
        raise ValueError(
            f"unknown LLM asking strategy {spec!r}; use llm:{' / llm:'.join(ASKER_STRATEGIES)}"
        )
    return spec


def make_llm_asker(
    strategy: str,
    client: LLMClient,
    *,
    on_unreadable: Literal["stop", "raise", "question"] = "stop",
    max_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    structured: bool | None = None,
    sampling: Sampling | None = None,
) -> LLMAsker:
    """An LLM asker.

    Args:
        strategy: ``direct``, ``checklist-chat`` or ``checklist-ledger`` (an ``llm:`` prefix is
            accepted; plain ``llm`` means ``checklist-ledger``).
        client: the LLM client.
        on_unreadable, max_tokens, temperature, seed, structured, sampling: as for
            :class:`LLMAsker`.

    Returns:
        The asker.
    """
    return LLMAsker(
        client,
        parse_llm_spec(strategy) or "checklist-ledger",
        on_unreadable=on_unreadable,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        structured=structured,
        sampling=sampling,
    )


def make_llm_solver(
    client: LLMClient, *, corpus: Corpus | str | None = None, **options: Any
) -> LLMSolver:
    """An LLM solver.

    Args:
        client: the LLM client.
        corpus: a corpus (or its name) whose manifest names the SQL dialect, unless ``dialect``
            is given.
        **options: further :class:`LLMSolver` options (``dialect``, ``max_tokens``,
            ``temperature``, ``seed``, ``structured``, ``sampling``).

    Returns:
        The solver.
    """
    if corpus is not None and "dialect" not in options:
        if isinstance(corpus, str):
            from ambitab_gym.corpora import load_corpus

            corpus = load_corpus(corpus)
        options["dialect"] = corpus.manifest.dialect
    return LLMSolver(client, **options)
