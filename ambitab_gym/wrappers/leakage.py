"""Wrappers for the leakage diagnostics (paper Definitions 5-7, A.4; docs/design.md section 8,
Leakage diagnostics).

* :class:`SpecificationRandomization` - the asker sees a replacement spec x' drawn from Q_x
  (uniform over the corpus's records, every split, on another database; one draw per group of
  records sharing database and ambiguity terms, fixed when the wrapper is made and reused across
  seeds). Only what the agent observes changes: ``obs["task"]`` and the wrapper's
  ``public_view``, which every agent-side wrapper above it reads. The matcher, responder, solver
  and verifier keep the true history.
* :class:`HybridOracle` - the oracle (match, resp*): the actual matcher paired with the
  corpus's reference responder resp*. It is composed per episode (handed to the env through
  ``reset(options={"oracle": ...})``); the wrapped env's own ``oracle`` is never changed.
* :class:`AdversarialProbe` - rewords every question as the full^adv probe does: the question
  followed by :data:`~ambitab_gym.policies.scripted.ADVERSARIAL_SUFFIX`.
* :func:`draw_replacements` - the replacement map of :class:`SpecificationRandomization`.

All three are ordinary :class:`gymnasium.Wrapper` subclasses: they stack with each other, with
Gymnasium's wrappers and inside vector envs, and read everything through the stack below them
(``get_wrapper_attr``), never ``env.unwrapped``. They also forward what the evaluation harness
reads (``public_view``, ``astep``, ``trajectory``, ``record``, ``corpus``), so
:func:`ambitab_gym.evaluation.play_episode` runs on a wrapped env. ``astep`` goes to the nearest
env in the stack that has one, skipping Gymnasium wrappers in between (they have no ``astep``).
Stack-order rules (checked at construction, see :mod:`ambitab_gym.wrappers.stack`):
``SpecificationRandomization`` sits below every agent-side wrapper and at most once in a stack;
``AdversarialProbe`` needs text actions (not above ``QuestionMenu``); ``HybridOracle`` goes
anywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ambitab_gym.actions import parse_action
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.oracles import Oracle, Responder, deterministic_oracle
from ambitab_gym.policies.scripted import ADVERSARIAL_SUFFIX
from ambitab_gym.records import TaskRecord
from ambitab_gym.spaces import UnicodeText
from ambitab_gym.trajectory import PublicView, Trajectory, render_spec
from ambitab_gym.wrappers.stack import StackOrderError, check_below_agent_interface, layers

__all__ = [
    "AdversarialProbe",
    "HybridOracle",
    "SpecificationRandomization",
    "draw_replacements",
    "replacement_group",
]


def _check_ambitab(env: gym.Env) -> None:
    # A structural check of the stack's bottom env; no state of it is read.
    if not isinstance(env.unwrapped, AmbiTabEnv):
        raise TypeError(
            f"leakage wrappers need an AmbiTab env underneath, got "
            f"{type(env.unwrapped).__name__}; wrap gym.make('AmbiTab-...-v0') or an AmbiTabEnv"
        )


class _LeakageWrapper(gym.Wrapper):
    """Forwards the harness-facing attributes of the stack below (``get_wrapper_attr``)."""

    def __init__(self, env: gym.Env) -> None:
        gym.Wrapper.__init__(self, env)
        _check_ambitab(env)

    @property
    def public_view(self) -> PublicView:
        """What the agent may read now (as the stack below this wrapper presents it)."""
        return self.env.get_wrapper_attr("public_view")

    @property
    def trajectory(self) -> Trajectory | None:
        """The full trajectory of the current episode (privileged: for evaluation only)."""
        return self.env.get_wrapper_attr("trajectory")

    @property
    def record(self) -> TaskRecord | None:
        """The hidden record of the current episode (privileged: for evaluation only)."""
        return self.env.get_wrapper_attr("record")

    @property
    def corpus(self):
        """The corpus of the underlying env."""
        return self.env.get_wrapper_attr("corpus")

    async def astep(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Async :meth:`step` (see :meth:`ambitab_gym.env.AmbiTabEnv.astep`)."""
        return await self.env.get_wrapper_attr("astep")(action)


# -- specification randomization -------------------------------------------------------------


def replacement_group(record: TaskRecord) -> tuple[str, tuple[str, ...]]:
    """The group that shares one replacement: the database and the registered terms.

    >>> from ambitab_gym.records import parse_record
    >>> record = parse_record({"id": "r", "avt_id": "a", "corpus": "demo",
    ...     "spec": {"request": "Top earners", "database": "hr"},
    ...     "ambiguities": [{"id": "t", "term": "Top  Earners", "resolution": "x"}],
    ...     "verification": {"database": "hr", "reference_sql": "SELECT 1"}})
    >>> replacement_group(record)
    ('hr', ('top earners',))
    """
    terms = sorted({" ".join(a.term.lower().split()) for a in record.ambiguities})
    return record.spec.database, tuple(terms)


def draw_replacements(
    records: Sequence[TaskRecord],
    pool: Iterable[TaskRecord],
    rng: np.random.Generator,
) -> dict[str, TaskRecord]:
    """Draw x' ~ Q_x once per replacement group.

    Q_x is uniform over the ``pool`` records whose database differs from x's. Groups are taken in
    order of first appearance in ``records`` and each draws one ``rng.integers`` index, so the
    map depends only on the records, the pool and the generator's state.

    Args:
        records: the records that will be run (the receivers).
        pool: the records a replacement is drawn from (the donors; paper A.4: the corpus's
            records, every split - a dev record may draw a train record's spec).
        rng: the generator; draw it from a fixed seed to reuse the map across runs.

    Returns:
        receiver record id -> donor record.

    Raises:
        ValueError: when a receiver's database is the only database of the pool.

    Example:
        >>> from ambitab_gym.corpora import load_corpus
        >>> corpus = load_corpus("bird")
        >>> dev = corpus.split("dev")
        >>> donors = draw_replacements(dev, corpus.records, np.random.default_rng(0))
        >>> all(donors[r.id].spec.database != r.spec.database for r in dev)
        True
        >>> sorted({donor.split for donor in donors.values()})
        ['dev', 'train']
    """
    pool = list(pool)
    groups: dict[tuple[str, tuple[str, ...]], list[TaskRecord]] = {}
    for record in records:
        groups.setdefault(replacement_group(record), []).append(record)
    out: dict[str, TaskRecord] = {}
    for (database, _terms), members in groups.items():
        candidates = [r for r in pool if r.spec.database != database]
        if not candidates:
            raise ConfigurationError(
                f"specification randomization needs records on another database than "
                f"{database!r}, but every record of the pool uses it; evaluate a pool that "
                "spans at least two databases"
            )
        donor = candidates[int(rng.integers(len(candidates)))]
        for record in members:
            out[record.id] = donor
    return out


class _RandomizedAsker:
    """An asker whose privileged ``reset(record=...)`` receives the replacement record."""

    def __init__(self, asker: Any, wrapper: SpecificationRandomization) -> None:
        self.asker = asker
        self._wrapper = wrapper
        self.privileged = getattr(asker, "privileged", False)
        self.name = f"{getattr(asker, 'name', type(asker).__name__)}^Q"

    def reset(self, *, seed: int | None = None, record: TaskRecord | None = None) -> None:
        reset = getattr(self.asker, "reset", None)
        if reset is None:
            return
        if self.privileged:
            if record is None:
                raise ConfigurationError("a privileged asker needs reset(record=...)")
            reset(seed=seed, record=self._wrapper.replacement(record))
        else:
            reset(seed=seed)

    def act(self, view: PublicView) -> str:
        return self.asker.act(view)

    async def aact(self, view: PublicView) -> str:
        aact = getattr(self.asker, "aact", None)
        return await aact(view) if aact is not None else self.asker.act(view)


class SpecificationRandomization(_LeakageWrapper, gym.utils.RecordConstructorArgs):
    """pi_ask^Q: the asker reads a replacement spec x' instead of the true x.

    The replacement map is drawn once, when the wrapper is made, from ``seed``: every record of
    a group (same database, same registered terms) gets the same donor record from another
    database, drawn uniformly from the corpus's records of every split (paper A.4: Q_x is
    uniform over the corpus's records on another database), and the map stays the same across
    resets and evaluation seeds. A stored map (``replacements``) can be given instead.

    Observations show the donor's rendered spec as ``task``; ``public_view.spec`` is the
    donor's public spec, and every agent-side wrapper above this one (``ChatMessages``,
    ``QuestionMenu``, the trainer adapters) reads that view. The dialogue is the true one, and
    the matcher, responder and solver read the true history.

    Args:
        env: an AmbiTab env (possibly wrapped, but not by an agent-side wrapper).
        seed: an int seed or a :class:`numpy.random.Generator` for the replacement map.
        pool: the records replacements are drawn from (default: every record of the corpus).
        replacements: a fixed map, receiver record id -> donor record id (for instance the one
            a campaign stored); then ``seed`` and ``pool`` are not used.

    Raises:
        StackOrderError: when ``env`` already holds an agent-side wrapper or another
            ``SpecificationRandomization``.
        ValueError: when a receiver has no donor on another database.

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> env = SpecificationRandomization(gym.make("AmbiTab-Bird-v0", split="dev"), seed=0)
        >>> obs, info = env.reset(seed=1)
        >>> true_task = env.unwrapped.public_view.render_task()   # privileged: the truth
        >>> obs["task"] == true_task, obs["task"] == env.public_view.render_task()
        (False, True)
        >>> env.replacement(env.record).spec.database != env.record.spec.database
        True
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        seed: int | np.random.Generator = 0,
        pool: Iterable[TaskRecord] | None = None,
        replacements: Mapping[str, str] | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, seed=seed, pool=pool, replacements=replacements
        )
        _LeakageWrapper.__init__(self, env)
        check_below_agent_interface(env, "SpecificationRandomization")
        if any(isinstance(layer, SpecificationRandomization) for layer in layers(env)):
            raise StackOrderError(
                "a stack holds at most one SpecificationRandomization (the asker reads one x')"
            )
        records: list[TaskRecord] = list(env.get_wrapper_attr("records"))
        corpus = self.corpus
        if replacements is not None:
            self._donors = _stored_replacements(records, corpus, replacements)
        else:
            rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
            self._donors = draw_replacements(records, corpus.records if pool is None else pool, rng)
        self._tasks: dict[str, str] = {}

    @property
    def donors(self) -> dict[str, str]:
        """receiver record id -> donor record id (privileged: for analysis only)."""
        return {rid: donor.id for rid, donor in self._donors.items()}

    def replacement(self, record: TaskRecord) -> TaskRecord:
        """The donor record whose spec replaces ``record``'s."""
        try:
            return self._donors[record.id]
        except KeyError:
            raise ConfigurationError(
                f"record {record.id!r} is not among the wrapped env's records"
            ) from None

    def _current(self) -> TaskRecord:
        record = self.record
        if record is None:
            raise RuntimeError("call reset() first")
        return record

    def _task(self) -> str:
        record = self._current()
        text = self._tasks.get(record.id)
        if text is None:
            text = render_spec(self.corpus.public_spec(self.replacement(record)))
            self._tasks[record.id] = text
        return text

    def _observe(self, obs: dict) -> dict:
        return {**obs, "task": self._task()}

    @property
    def public_view(self) -> PublicView:
        """The agent's view with the replacement spec x' (the dialogue is the true one)."""
        view = self.env.get_wrapper_attr("public_view")
        donor = self.replacement(self._current())
        return dataclasses.replace(view, spec=self.corpus.public_spec(donor))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs), reward, terminated, truncated, info

    async def astep(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = await super().astep(action)
        return self._observe(obs), reward, terminated, truncated, info

    def wrap_asker(self, asker: Any) -> Any:
        """An asker adapter for the harness: a privileged reference asker (one that reads the
        record at ``reset``) is given the donor record instead of the true one, which is what
        feeding it x' means for such a policy. Other askers are passed through unchanged in
        behaviour (they read the randomized ``public_view``)."""
        return _RandomizedAsker(asker, self)


def _stored_replacements(
    records: Sequence[TaskRecord], corpus: Any, replacements: Mapping[str, str]
) -> dict[str, TaskRecord]:
    out: dict[str, TaskRecord] = {}
    for record in records:
        donor_id = replacements.get(record.id)
        if donor_id is None:
            raise ConfigurationError(f"the replacement map has no donor for record {record.id!r}")
        donor = corpus.record(donor_id)
        if donor.spec.database == record.spec.database:
            raise ConfigurationError(
                f"donor {donor_id!r} of record {record.id!r} is on the same database "
                f"{record.spec.database!r}; Q_x draws from other databases only"
            )
        out[record.id] = donor
    return out


# -- hybrid oracle ---------------------------------------------------------------------------


class HybridOracle(_LeakageWrapper, gym.utils.RecordConstructorArgs):
    """The oracle (match, resp*): the actual matcher with the reference responder.

    The actual oracle is the one the stack below would answer with
    (``env.get_wrapper_attr("oracle")``: the env's configured oracle, or another wrapper's).
    Each ``reset`` hands the hybrid to the env for that episode (``options["oracle"]``); the
    env's own ``oracle`` is never changed, so several wrappers can share one env and nothing
    needs restoring. An oracle chosen by a layer above (or by the caller's ``options``) wins,
    as ``get_wrapper_attr`` does: ``env.get_wrapper_attr("oracle")`` on the outermost layer is
    the oracle the episodes use. The reference responder is the corpus's deterministic
    responder unless ``responder`` is given.

    Args:
        env: an AmbiTab env (possibly wrapped).
        responder: resp* (default: ``deterministic_oracle(corpus.manifest.oracle).responder``).

    Example:
        >>> import ambitab_gym
        >>> from ambitab_gym.oracles.leaky import make_leaky_oracle
        >>> base = ambitab_gym.AmbiTabEnv("bird")
        >>> base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
        >>> env = HybridOracle(base)
        >>> env.oracle.matcher is env.actual_oracle.matcher is base.oracle.matcher
        True
        >>> obs, _ = env.reset(seed=0)
        >>> obs, *_ = env.step("Please elaborate.")
        >>> "SELECT" in obs["dialogue"], base.episode_oracle is env.oracle
        (False, True)
        >>> base.oracle is env.actual_oracle     # the env's own oracle is untouched
        True
    """

    def __init__(self, env: gym.Env, *, responder: Responder | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, responder=responder)
        _LeakageWrapper.__init__(self, env)
        if responder is None:
            responder = deterministic_oracle(self.corpus.manifest.oracle).responder
        self.responder: Responder = responder
        self._hybrid: Oracle | None = None

    @property
    def actual_oracle(self) -> Oracle:
        """The oracle O the stack below would answer with."""
        return self.env.get_wrapper_attr("oracle")

    @property
    def oracle(self) -> Oracle:
        """(match, resp*): the actual oracle's matcher with the reference responder."""
        matcher = self.actual_oracle.matcher
        if self._hybrid is None or self._hybrid.matcher is not matcher:
            self._hybrid = Oracle(matcher, self.responder)
        return self._hybrid

    @property
    def hybrid_oracle(self) -> Oracle:
        """Alias of :attr:`oracle`."""
        return self.oracle

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        options = dict(options or {})
        if options.get("oracle") is None:
            options["oracle"] = self.oracle
        return self.env.reset(seed=seed, options=options)


# -- adversarial probe -----------------------------------------------------------------------


class AdversarialProbe(_LeakageWrapper, gym.utils.RecordConstructorArgs):
    """Rewords each question as pi_full^adv does: the question, then the adversarial suffix.

    Stops, the JSON ``done`` form and SQL-phase actions pass unchanged; a question that already
    ends with the suffix is not suffixed twice. With :class:`~ambitab_gym.policies.scripted.FullAsker`
    this is pi_full^adv. It needs text actions: it may wrap ``ChatMessages`` (whose actions are
    the assistant's text) but not ``QuestionMenu`` (put it below the menu instead).

    Args:
        env: an AmbiTab env (possibly wrapped) with text actions.
        suffix: the text appended to every question.

    Raises:
        StackOrderError: when the wrapped stack does not take text actions.

    Example:
        >>> import ambitab_gym
        >>> env = AdversarialProbe(ambitab_gym.AmbiTabEnv("bird"))
        >>> _ = env.reset(seed=0)
        >>> env.reword("What do you mean by busiest?")  # doctest: +ELLIPSIS
        'What do you mean by busiest? Please give me as much detail as you can, ... SQL for it.'
        >>> env.reword(ambitab_gym.STOP)
        '<STOP>'
    """

    def __init__(self, env: gym.Env, *, suffix: str = ADVERSARIAL_SUFFIX) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, suffix=suffix)
        _LeakageWrapper.__init__(self, env)
        if not isinstance(env.action_space, UnicodeText | gym.spaces.Text):
            raise StackOrderError(
                f"AdversarialProbe rewords text actions, but the stack below takes "
                f"{env.action_space}; put it below the wrapper that maps actions to text, e.g. "
                "QuestionMenu(AdversarialProbe(env))"
            )
        if not suffix.strip():
            raise ConfigurationError("the adversarial suffix must not be empty")
        self.suffix = suffix.strip()

    def reword(self, action: Any) -> Any:
        """The action the env receives for ``action``."""
        try:
            phase = self.env.get_wrapper_attr("public_view").phase
        except RuntimeError:  # no episode yet: the env will refuse the step itself
            return action
        if phase != "ask":
            return action
        parsed = parse_action(action)
        if parsed.kind == "stop":
            return action
        question = parsed.text.rstrip()
        if question.endswith(self.suffix):
            return question
        return f"{question} {self.suffix}" if question else self.suffix

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return self.env.step(self.reword(action))

    async def astep(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return await super().astep(self.reword(action))
