"""The ask-then-solve environment (docs/design.md section 4, Protocol; paper A.2, C.1, D.2).

* :class:`AmbiTabEnv` - one AmbiTab corpus as a Gymnasium environment with text actions.

An episode draws a record (its interpretation stays hidden), shows the public spec, and takes
questions until the asker stops or the budget runs out. Each question goes to the oracle's
matcher (credits, recorded in the trajectory only) and responder (the visible answer). On stop the
env either terminates (``ask_only``), calls its solver and verifies the SQL (``solver``), or waits
for SQL as the next action (``agent``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ambitab_gym import defaults
from ambitab_gym.actions import ParsedAction, parse_action, read_sql_action
from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.errors import ConfigurationError, category_of
from ambitab_gym.metrics import REWARDS, RewardFn
from ambitab_gym.oracles import Oracle, OracleContext, OracleTurn, deterministic_oracle
from ambitab_gym.oracles.sqltext import answer_reveals_sql
from ambitab_gym.policies.base import Solver
from ambitab_gym.records import TaskRecord
from ambitab_gym.spaces import UnicodeText
from ambitab_gym.trajectory import (
    DialogueTurn,
    PublicView,
    Trajectory,
    Turn,
    is_fallback_stop,
    render_spec,
)
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.vocabulary import PHASES, STOP_REASONS, Phase, StopReason, check

__all__ = ["ALL_SPLITS", "PRIVILEGED_INFO_KEYS", "TRAIN_SPLIT", "AmbiTabEnv", "select_records"]

logger = logging.getLogger("ambitab_gym")

#: Info fields that reveal the hidden interpretation; only present when asked for by name.
PRIVILEGED_INFO_KEYS = (
    "record_id",
    "avt_id",
    "credits",
    "ambiguities",
    "resolutions",
    "reference_sql",
    "verdict_detail",
)

#: The ``split`` that selects every record of the corpus, whatever its splits.
ALL_SPLITS = "all"
#: The split the env draws from when none is given and the corpus has it.
TRAIN_SPLIT = "train"


def select_records(
    corpus: Corpus, split: str | None = None, record_ids: Sequence[str] | None = None
) -> tuple[str, list[TaskRecord]]:
    """The records an env draws from, and the name of their split.

    * ``split=None`` (the env's default): the ``train`` split when the corpus has one, so that
      a training loop never draws a held-out record; every record when the corpus has a single
      split (``all`` in the AmbiQT, TACO and BIRD-Interact samples) or ``record_ids`` names the
      records; every record, with a warning, when the corpus has several splits but no
      ``train``.
    * ``split="all"``: every record, whatever the corpus's splits.
    * a split name: that split's records; a name the corpus lacks raises a
      :class:`~ambitab_gym.errors.ConfigurationError` naming the valid ones.

    ``record_ids`` then keeps the named records (each must be among the selected ones).

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> corpus = load_corpus("bird")
        >>> split, records = select_records(corpus)
        >>> split, {r.split for r in records}
        ('train', {'train'})
        >>> select_records(corpus, "all")[0], len(select_records(corpus, "all")[1]) == len(corpus)
        ('all', True)
        >>> select_records(load_corpus("ambiqt"))[0]
        'all'
    """
    splits = corpus.splits
    valid = [*splits, *([] if ALL_SPLITS in splits else [ALL_SPLITS])]
    if split is not None and not isinstance(split, str):
        raise ConfigurationError(
            f"split must be a split name or None, not {type(split).__name__}; "
            f"corpus {corpus.name!r} has {valid}"
        )
    if split is None:
        if record_ids is None and TRAIN_SPLIT in splits:
            split = TRAIN_SPLIT
        else:
            if record_ids is None and len(splits) > 1:
                warnings.warn(
                    f"corpus {corpus.name!r} has splits {splits} and no {TRAIN_SPLIT!r} split: "
                    f"the env draws from all of them; pass split= (one of {valid}) to choose",
                    UserWarning,
                    stacklevel=3,
                )
            split = ALL_SPLITS
    if split == ALL_SPLITS:
        records = list(corpus.records)
    elif split in splits:
        records = [r for r in corpus.records if r.split == split]
    else:
        raise ConfigurationError(
            f"corpus {corpus.name!r} has no split {split!r}; valid splits: {valid} "
            f"({ALL_SPLITS!r}: every record; None: {TRAIN_SPLIT!r} when the corpus has it)"
        )
    if record_ids is not None:
        wanted = set(record_ids)
        records = [r for r in records if r.id in wanted]
        missing = wanted - {r.id for r in records}
        if missing:
            where = "" if split == ALL_SPLITS else f" split {split!r} of"
            raise ConfigurationError(
                f"records not in{where} corpus {corpus.name!r}: {sorted(missing)}"
            )
    return split, records


Mode = Literal["ask_only", "solver", "agent"]
_NEEDS_SOLVER = object()  # step-internal marker: asking ended and the solver must run
_PHASES: dict[str, int] = {phase: index for index, phase in enumerate(PHASES)}  # observation
#: Longest action text whose reading is remembered (a longer one is parsed every time, so the
#: cache stays small whatever an agent sends).
_CACHED_ACTION_CHARS = 2048
# the same short actions and canned answers recur every episode: pure functions, cached
_read_text = functools.lru_cache(maxsize=4096)(parse_action)
_reveals_sql = functools.lru_cache(maxsize=4096)(answer_reveals_sql)


class AmbiTabEnv(gym.Env[dict, str]):
    """Ask-then-solve over one AmbiTab corpus.

    ## Description

    An episode draws a record (one hidden interpretation of an ambiguous database request) and
    shows its public task. The agent asks clarifying questions; the oracle's matcher credits
    registered ambiguities (kept in :attr:`trajectory`, never shown) and its responder answers.
    When asking ends, a solver writes SQL from the visible dialogue (or the agent does, in
    ``agent`` mode) and the verifier runs it against the record's database.

    ## Action Space

    Text (:class:`~ambitab_gym.spaces.UnicodeText`): a question, :data:`ambitab_gym.STOP`, or
    the JSON form ``{"type": "clarification" | "done", "output": ...}``; in the SQL phase, SQL.
    No action raises: anything unreadable is read as a question (or SQL) that earns nothing.

    ## Observation Space

    A ``Dict``: ``task`` (the public spec as text), ``dialogue`` (the visible questions and
    answers), ``questions_left`` (``Discrete(B + 1)``) and ``phase`` (0 asking, 1 writing SQL,
    2 done).

    ## Rewards

    Paid once, on the terminating step (0 on every other step):

    * ``reward="question_f1"`` (default, paper eq. 2): the harmonic mean of the episode's
      question precision and ambiguity recall; 1 for stopping at once on a record without
      ambiguities, 0 for asking there or when no question credits anything.
    * ``reward="outcome"`` (eq. 3): 1 when the verifier accepts the final SQL, else 0.
    * any callable ``(trajectory, record) -> float``.

    ## Starting State

    ``reset`` picks ``options["record_id"]`` or draws a record with the env's RNG; the dialogue
    is empty and ``questions_left`` is the record's budget (m + ``budget_slack`` - 1 questions
    for m > 0 counted ambiguities).

    ## Episode End

    The episode *terminates* (``terminated=True``) when asking ends and, depending on the mode,
    nothing more is needed (``ask_only``), the solver's SQL was verified (``solver``) or the
    agent's SQL was verified (``agent``, one action after asking ends). Asking ends when the
    agent stops (``info["stop_reason"] == "asker"``), the budget is spent (``"budget"``), a
    record without ambiguities skips asking (``"skipped"``) or an unreadable LLM reply is read
    as a stop (``"fallback"``). The env never *truncates*: the budget is part of the task (the
    observation shows it), so running out of questions is a true terminal state; wrap the env
    in ``TimeLimit`` for an external limit.

    ## Version History

    * v0: initial release - six corpora (``AmbiTab-Bird-v0``, ``AmbiTab-EW-Bird-v0``,
      ``AmbiTab-BIRD-Interact-v0``, ``AmbiTab-Ambrosia-v0``, ``AmbiTab-AmbiQT-v0``,
      ``AmbiTab-TACO-v0``) and ``AmbiTab-Procedural-v0``; fallback stops (stop reason
      ``fallback``) and the ``verifier`` argument are part of v0.

    Args:
        corpus: an env id, corpus name, corpus folder or :class:`Corpus`.
        split: the records to draw from: a split name (``"train"``, ``"dev"``, ...), ``"all"``
            for every record, or None (default): ``"train"`` when the corpus has that split
            (held-out records are never drawn by accident), else every record
            (:func:`select_records`).
        record_ids: restrict episodes to these records.
        oracle: an :class:`Oracle`; default the corpus's deterministic oracle.
        solver: a :class:`Solver` called on stop; implies ``mode="solver"``.
        mode: ``ask_only`` (terminate at stop), ``solver`` or ``agent`` (next action is SQL).
        reward: ``"question_f1"`` (paper eq. 2), ``"outcome"`` (eq. 3) or a callable
            ``(trajectory, record) -> float``; paid at the end of the episode.
        budget_slack: a record with m > 0 ambiguities allows m + slack decisions, the last one
            reserved for stopping (at most m + slack - 1 questions).
        zero_ambiguity: for m = 0: ``single_decision`` (one decision meant for stopping; a
            question instead is recorded and ends asking) or ``skip`` (no asking at all).
        info_keys: privileged info fields to include, by name (see ``PRIVILEGED_INFO_KEYS``).
        limits: limits of the verifier's engines.
        engine, engine_options: run every record on this engine kind with these options (e.g.
            ``engine="postgres", engine_options={"dsn": ...}``).
        verifier: a :class:`~ambitab_gym.verify.Verifier` to verify with, shared with other
            envs (a campaign's); the env does not close it. Default: a verifier of its own.
        max_action_length: the action space's maximum length (longer text is still accepted).
        render_mode: ``"ansi"`` or None.

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> env = gym.make("AmbiTab-Bird-v0")
        >>> obs, info = env.reset(seed=0)
        >>> sorted(obs), info["questions_asked"]
        (['dialogue', 'phase', 'questions_left', 'task'], 0)
        >>> obs, reward, terminated, truncated, info = env.step("Which year do you mean?")
        >>> obs["dialogue"].startswith("Q1: Which year do you mean?")
        True
        >>> obs, reward, terminated, truncated, info = env.step(ambitab_gym.STOP)
        >>> terminated, info["stop_reason"]
        (True, 'asker')
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        corpus: str | Corpus = "bird",
        *,
        split: str | None = None,
        record_ids: Sequence[str] | None = None,
        oracle: Oracle | None = None,
        solver: Solver | None = None,
        mode: Mode | None = None,
        reward: str | RewardFn = "question_f1",
        budget_slack: int = defaults.BUDGET_SLACK,
        zero_ambiguity: Literal["single_decision", "skip"] = "single_decision",
        info_keys: Sequence[str] = (),
        limits: Limits | None = None,
        max_action_length: int = 4096,
        render_mode: str | None = None,
        engine: str | None = None,
        engine_options: dict | None = None,
        verifier: Verifier | None = None,
    ) -> None:
        self.corpus = load_corpus(
            corpus, limits=limits, engine_override=engine, options=engine_options
        )
        #: the split the records were selected by (``"all"``: every record)
        self.split, records = select_records(self.corpus, split, record_ids)
        if not records:
            raise ConfigurationError(f"no records to run in corpus {self.corpus.name!r}")
        self.records: list[TaskRecord] = records
        self._index = {r.id: i for i, r in enumerate(records)}

        self.oracle = (
            oracle if oracle is not None else deterministic_oracle(self.corpus.manifest.oracle)
        )
        self.solver = solver
        if mode is None:
            mode = "solver" if solver is not None else "ask_only"
        if mode not in ("ask_only", "solver", "agent"):
            raise ConfigurationError(f"mode must be 'ask_only', 'solver' or 'agent', not {mode!r}")
        if mode == "solver" and solver is None:
            raise ConfigurationError("mode='solver' needs a solver (pass solver=...)")
        self.mode: Mode = mode
        if isinstance(reward, str):
            if reward not in REWARDS:
                raise ConfigurationError(
                    f"unknown reward {reward!r}; use one of {sorted(REWARDS)} or a callable"
                )
            if reward == "outcome" and mode == "ask_only":
                raise ConfigurationError(
                    "the outcome reward needs SQL: use mode='solver' or mode='agent'"
                )
            self.reward_name, self.reward_fn = reward, REWARDS[reward]
        else:
            self.reward_name, self.reward_fn = getattr(reward, "__name__", "custom"), reward
        if budget_slack < 1:
            raise ConfigurationError(
                "budget_slack must be at least 1 (the final decision is the stop)"
            )
        self.budget_slack = int(budget_slack)
        if zero_ambiguity not in ("single_decision", "skip"):
            raise ConfigurationError("zero_ambiguity must be 'single_decision' or 'skip'")
        self.zero_ambiguity = zero_ambiguity
        unknown = set(info_keys) - set(PRIVILEGED_INFO_KEYS)
        if unknown:
            raise ConfigurationError(
                f"unknown info keys {sorted(unknown)}; choose from {PRIVILEGED_INFO_KEYS}"
            )
        self.info_keys = tuple(info_keys)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigurationError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        # a verifier passed in is shared (a campaign's envs share one): the caller closes it
        self._owns_verifier = verifier is None
        self.verifier = (
            verifier if verifier is not None else Verifier(self.corpus.open_engine, limits=limits)
        )

        self._budgets = [self.max_questions(r) for r in records]  # by index, like _index
        max_questions = max(self._budgets)
        text = UnicodeText(max_length=1_000_000)
        self.observation_space = spaces.Dict(
            {
                "task": text,
                "dialogue": text,
                "questions_left": spaces.Discrete(max_questions + 1),
                "phase": spaces.Discrete(3),
            }
        )
        self.action_space = UnicodeText(max_length=max_action_length)
        self.metadata = {
            **type(self).metadata,
            "corpus": self.corpus.name,
            "corpus_path": str(self.corpus.path),
            "corpus_origin": self.corpus.origin,
            "split": self.split,
        }
        logger.info(
            "ambitab-gym: corpus %r (%s, split %r, %d records) from %s",
            self.corpus.name,
            self.corpus.origin,
            self.split,
            len(records),
            self.corpus.path,
        )

        self.record: TaskRecord | None = None
        self.trajectory: Trajectory | None = None
        self._context: OracleContext | None = None
        self._episode_oracle: Oracle = self.oracle
        self._answer_guard: Any = None
        self._phase: Phase = "done"
        self._questions_left = 0
        self._dialogue: list[DialogueTurn] = []
        self._dialogue_text = ""
        self._task_text = ""
        self._task_texts: dict[str, str] = {}
        self._last_action: ParsedAction | None = None
        # step memos of pure functions (same key, same value): action text -> its reading,
        # (answer, reference SQL, dialect) -> whether the answer reveals SQL

    # -- budget ----------------------------------------------------------------------------------

    def max_questions(self, record: TaskRecord) -> int:
        """Questions the record allows: m + slack - 1 when m > 0; for m = 0, 1 or 0 (skip)."""
        if record.m > 0:
            return record.m + self.budget_slack - 1
        return 0 if self.zero_ambiguity == "skip" else 1

    def _budget(self, record: TaskRecord) -> int:
        """:meth:`max_questions`, computed once for each of :attr:`records`."""
        index = self._index.get(record.id)
        if index is not None and self.records[index] is record:
            return self._budgets[index]
        return self.max_questions(record)

    @property
    def episode_oracle(self) -> Oracle:
        """The oracle answering the current episode: ``options["oracle"]`` of the last
        :meth:`reset`, else :attr:`oracle` (privileged: for analysis only)."""
        return self._episode_oracle

    # -- views -----------------------------------------------------------------------------------

    @property
    def public_view(self) -> PublicView:
        """What the agent may see now."""
        if self.record is None:
            raise RuntimeError("call reset() first")
        return PublicView(
            self.corpus.public_spec(self.record),
            tuple(self._dialogue),
            self._questions_left,
            self._phase,
        )

    def _task(self, record: TaskRecord) -> str:
        text = self._task_texts.get(record.id)
        if text is None:
            text = render_spec(self.corpus.public_spec(record))
            self._task_texts[record.id] = text
        return text

    def _observation(self) -> dict[str, Any]:
        left = self._questions_left
        return {
            "task": self._task_text,
            "dialogue": self._dialogue_text,
            "questions_left": np.int64(left),
            "phase": np.int64(_PHASES[self._phase]),
        }

    def _info(self) -> dict[str, Any]:
        trajectory = self.trajectory
        assert trajectory is not None and self.record is not None
        info: dict[str, Any] = {
            "questions_asked": len(trajectory.turns),
            "questions_left": self._questions_left,
            "phase": self._phase,
        }
        if trajectory.stop_reason is not None:
            info["stop_reason"] = trajectory.stop_reason
        if trajectory.verdict is not None:
            info["success"] = trajectory.verdict.success
            info["verdict_reason"] = trajectory.verdict.reason
        if self._last_action is not None:
            info["action_parse"] = self._last_action.form
            info["action_note"] = self._last_action.note
            read = self._last_action.read  # question | stop | sql | unreadable (None: not read)
            if read is not None:
                info["reply_read"] = read
        for key in self.info_keys:
            info[key] = self._privileged(key)
        return info

    def _privileged(self, key: str) -> Any:
        record, trajectory = self.record, self.trajectory
        assert record is not None and trajectory is not None
        if key == "record_id":
            return record.id
        if key == "avt_id":
            return record.avt_id
        if key == "credits":
            return [sorted(t.credits) for t in trajectory.turns]
        if key == "ambiguities":
            return [a.model_dump() for a in record.ambiguities]
        if key == "resolutions":
            return {a.id: a.resolution for a in record.ambiguities}
        if key == "reference_sql":
            return record.verification.reference_sql
        if key == "verdict_detail":
            return None if trajectory.verdict is None else trajectory.verdict.detail
        raise KeyError(key)

    # -- gymnasium API ---------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode on ``options["record_id"]``, or on a record drawn with the env's RNG.

        ``options["oracle"]`` (an :class:`Oracle`) answers this episode instead of
        :attr:`oracle`, which stays as configured: wrappers compose an oracle per episode this
        way (:class:`~ambitab_gym.wrappers.HybridOracle`) instead of mutating the env.
        ``options["answer_guard"]`` (a callable: answer -> the text the agent is shown) rewrites
        answers flagged as revealing SQL for this episode
        (:class:`~ambitab_gym.wrappers.ResponseGuard`); the trajectory keeps the original.
        """
        super().reset(seed=seed)
        options = options or {}
        episode_oracle = options.get("oracle")
        if episode_oracle is None:
            episode_oracle = self.oracle
        elif not callable(getattr(episode_oracle, "answer", None)):
            raise TypeError(
                f"options['oracle'] must be an Oracle (with answer/aanswer), "
                f"not {type(episode_oracle).__name__}"
            )
        record = self._draw_record(options)
        self.record = record
        self._episode_oracle = episode_oracle
        self._answer_guard = options.get("answer_guard")
        self.trajectory = Trajectory(record.id, record.avt_id, seed=seed)
        self._context = OracleContext(record, spec=self.corpus.public_spec(record))
        self._dialogue = []
        self._dialogue_text = ""
        self._last_action = None
        self._task_text = self._task(record)
        self._questions_left = self._budget(record)
        self._phase = "ask"
        return self._observation(), self._info()

    def _draw_record(self, options: dict[str, Any]) -> TaskRecord:
        """The record source: ``options["record_id"]``, else a record drawn with the env's RNG.

        A subclass may draw records another way (``AmbiTab-Procedural-v0`` generates one per
        episode, :class:`ambitab_gym.generate.env.ProceduralEnv`).
        """
        record_id = options.get("record_id")
        if record_id is not None:
            if record_id not in self._index:
                raise ConfigurationError(self._not_drawn(record_id))
            return self.records[self._index[record_id]]
        return self.records[int(self.np_random.integers(len(self.records)))]

    def _not_drawn(self, record_id: Any) -> str:
        """Why ``options["record_id"]`` is refused (naming the record's split, when the
        corpus has it: the env's split is a boundary an explicit id does not cross)."""
        message = f"record {record_id!r} is not among this env's records"
        try:
            split = self.corpus.record(record_id).split
        except (KeyError, TypeError):
            hint = getattr(self.corpus, "record_hint", None)  # a generated corpus has none
            return f"{message}; {hint(record_id)}" if hint is not None else message
        return (
            f"{message}: it is in split {split!r} of corpus {self.corpus.name!r} and this env "
            f"draws from split {self.split!r} (make the env with split={split!r} or "
            f"split={ALL_SPLITS!r})"
        )

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Take one decision. No action raises: anything unreadable is a question (or, in the
        SQL phase, SQL) and ``info["reply_read"]`` (``question``, ``stop``, ``sql`` or
        ``unreadable``), ``info["action_parse"]`` and ``info["action_note"]`` say how it was
        read (see :func:`ambitab_gym.actions.read_reply`)."""
        outcome = self._begin_step(action)
        if isinstance(outcome, ParsedAction):
            assert self._context is not None
            start = time.perf_counter()
            credits, answer = self._episode_oracle.answer(outcome.text, self._context)
            elapsed = time.perf_counter() - start
            outcome = self._record_turn(outcome, credits, answer, elapsed)
        if outcome is _NEEDS_SOLVER:
            return self._finish(sql=self._solve_sync())
        return outcome

    async def astep(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """:meth:`step` for asyncio campaigns: awaits the oracle's and solver's async methods."""
        outcome = self._begin_step(action)
        if isinstance(outcome, ParsedAction):
            assert self._context is not None
            start = time.perf_counter()
            credits, answer = await self._episode_oracle.aanswer(outcome.text, self._context)
            elapsed = time.perf_counter() - start
            outcome = self._record_turn(outcome, credits, answer, elapsed)
        if outcome is _NEEDS_SOLVER:
            return self._finish(sql=await self._solve_async())
        return outcome

    # -- step internals (shared by step and astep) ----------------------------------------------

    def _begin_step(self, action: Any):
        """Everything before the oracle: returns the parsed question, a step result, or
        ``_NEEDS_SOLVER``. Reading the action never raises."""
        if self.trajectory is None or self._phase == "done":
            raise RuntimeError("the episode is over: call reset()")
        if self._phase == "sql":
            self._last_action = read_sql_action(action)
            return self._finish(sql=self._last_action.text)
        record = self.record
        assert record is not None
        if self.zero_ambiguity == "skip" and record.m == 0:
            self._last_action = ParsedAction(
                "stop", form="ignored", note="asking is skipped for this task: action not read"
            )
            return self._stop("skipped")
        parsed = self._last_action = self._read_action(action)
        if parsed.kind == "stop":
            return self._stop("fallback" if is_fallback_stop(action) else "asker")
        return parsed

    def _read_action(self, action: Any) -> ParsedAction:
        """:func:`parse_action`, cached for short text actions."""
        if type(action) is not str or len(action) > _CACHED_ACTION_CHARS:
            return parse_action(action)
        return _read_text(action)

    def _record_turn(self, parsed: ParsedAction, credits, answer: str, elapsed: float):
        """Append a turn; returns the step result (or ``_NEEDS_SOLVER`` at the budget)."""
        trajectory, context = self.trajectory, self._context
        assert trajectory is not None and context is not None
        question = parsed.text
        route = context.take_route()  # an LLM matcher's route: privileged, for re-scoring
        verification = context.record.verification
        reveals = _reveals_sql(answer, verification.reference_sql, verification.engine)
        shown = answer
        if reveals and self._answer_guard is not None:
            shown = str(self._answer_guard(answer))
        trajectory.turns.append(
            Turn(
                parsed.raw,
                question,
                answer,
                credits,
                None if route is None else route.to_dict(),
                answer_reveals_sql=reveals,
                shown_answer=None if shown == answer else shown,
            )
        )
        context.turns.append(OracleTurn(question, answer, credits))
        trajectory.timings["oracle_s"] = trajectory.timings.get("oracle_s", 0.0) + elapsed
        self._dialogue.append(DialogueTurn(question, shown))
        n = len(self._dialogue)
        self._dialogue_text += f"{'' if n == 1 else chr(10)}Q{n}: {question}\nA{n}: {shown}"
        self._questions_left -= 1
        if self._questions_left <= 0:
            return self._stop("budget")
        return self._observation(), 0.0, False, False, self._info()

    def _stop(self, reason: StopReason):
        assert self.trajectory is not None
        self.trajectory.stop_reason = check(reason, STOP_REASONS, "stop reason")
        self._questions_left = 0
        if self.mode == "agent":
            self._phase = "sql"
            return self._observation(), 0.0, False, False, self._info()
        if self.mode == "solver":
            return _NEEDS_SOLVER
        return self._finish(sql=None)

    def _solver_view(self) -> PublicView:
        return dataclasses.replace(self.public_view, phase="sql")

    def _solve_sync(self) -> str | None:
        assert self.solver is not None and self.trajectory is not None
        start = time.perf_counter()
        try:
            return self.solver.solve(self._solver_view())
        except Exception as error:  # a broken solver fails the episode, not the loop
            self._solver_error(error)
            return None
        finally:
            self.trajectory.timings["solver_s"] = time.perf_counter() - start

    async def _solve_async(self) -> str | None:
        assert self.solver is not None and self.trajectory is not None
        start = time.perf_counter()
        try:
            asolve = getattr(self.solver, "asolve", None)
            if asolve is not None:
                return await asolve(self._solver_view())
            return self.solver.solve(self._solver_view())
        except Exception as error:
            self._solver_error(error)
            return None
        finally:
            self.trajectory.timings["solver_s"] = time.perf_counter() - start

    def _solver_error(self, error: Exception) -> None:
        assert self.trajectory is not None
        self.trajectory.error = category_of(error)
        logger.warning("solver failed: %s: %s", type(error).__name__, error)

    def _finish(self, sql: str | None):
        trajectory, record = self.trajectory, self.record
        assert trajectory is not None and record is not None
        if self.mode != "ask_only":
            trajectory.sql = sql
            start = time.perf_counter()
            trajectory.verdict = self.verifier.verify(record, sql)
            trajectory.timings["verify_s"] = time.perf_counter() - start
        reward = float(self.reward_fn(trajectory, record))
        trajectory.reward = reward
        self._phase = "done"
        return self._observation(), reward, True, False, self._info()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the task and the visible dialogue as text."""
        if self.render_mode != "ansi":
            return None
        if self.record is None:
            return ""
        lines = [self._task_text, "", self._dialogue_text or "(no questions yet)"]
        if self.trajectory is not None and self.trajectory.stop_reason:
            lines.append(f"[asking ended: {self.trajectory.stop_reason}]")
        if self.trajectory is not None and self.trajectory.verdict is not None:
            verdict = self.trajectory.verdict
            lines.append(f"SQL: {self.trajectory.sql}")
            lines.append(
                f"Verdict: {'success' if verdict.success else 'failure'} ({verdict.reason})"
            )
        return "\n".join(lines)

    def close(self) -> None:
        if self._owns_verifier:
            self.verifier.close()
        super().close()
