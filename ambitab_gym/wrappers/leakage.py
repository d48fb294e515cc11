"""Wrappers for the leakage diagnostics (paper Definitions 5-7, A.4; DESIGN section 9).

* :class:`SpecificationRandomization` - the asker sees a replacement spec x' drawn from Q_x
  (uniform over records on another database; one draw per group of records sharing database and
  ambiguity terms, fixed when the wrapper is made and reused across seeds). Only what the agent
  observes changes: ``obs["task"]`` and the wrapper's ``public_view``. The matcher, responder,
  solver and verifier keep the true history.
* :class:`HybridOracle` - the env's actual matcher paired with the corpus's reference responder
  resp*, i.e. the oracle (match, resp*).
* :class:`AdversarialProbe` - rewords every question as the full^adv probe does: the question
  followed by :data:`~ambitab_gym.policies.scripted.ADVERSARIAL_SUFFIX`.
* :func:`draw_replacements` - the replacement map of :class:`SpecificationRandomization`.

All three are ordinary :class:`gymnasium.Wrapper` subclasses: they stack with each other, with
Gymnasium's wrappers and inside vector envs. They also forward what the evaluation harness reads
(``public_view``, ``astep``, ``trajectory``, ``record``, ``corpus``), so
:func:`ambitab_gym.evaluation.play_episode` runs on a wrapped env. ``astep`` goes to the nearest
env in the stack that has one, skipping Gymnasium wrappers in between (they have no ``astep``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ambitab_gym.actions import parse_action
from ambitab_gym.env import AmbiTabEnv
from ambitab_gym.oracles import Oracle, Responder, deterministic_oracle
from ambitab_gym.policies.scripted import ADVERSARIAL_SUFFIX
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import PublicView, render_spec

__all__ = [
    "AdversarialProbe",
    "HybridOracle",
    "SpecificationRandomization",
    "draw_replacements",
    "replacement_group",
]


def _ambitab(env: gym.Env) -> AmbiTabEnv:
    base = env.unwrapped
    if not isinstance(base, AmbiTabEnv):
        raise TypeError(
            f"leakage wrappers need an AmbiTab env underneath, got {type(base).__name__}; "
            "wrap gym.make('AmbiTab-...-v0') or an AmbiTabEnv"
        )
    return base


class _LeakageWrapper(gym.Wrapper):
    """Forwards the harness-facing attributes of the wrapped AmbiTab env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._ambitab = _ambitab(env)

    @property
    def public_view(self) -> PublicView:
        """What the agent may read now (as the envs below this wrapper present it)."""
        return self.env.get_wrapper_attr("public_view")

    @property
    def trajectory(self):
        """The full trajectory of the current episode (privileged: for evaluation only)."""
        return self._ambitab.trajectory

    @property
    def record(self) -> TaskRecord | None:
        """The hidden record of the current episode (privileged: for evaluation only)."""
        return self._ambitab.record

    @property
    def corpus(self):
        """The corpus of the underlying env."""
        return self._ambitab.corpus

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
        pool: the records a replacement is drawn from (the donors).
        rng: the generator; draw it from a fixed seed to reuse the map across runs.

    Returns:
        receiver record id -> donor record.

    Raises:
        ValueError: when a receiver's database is the only database of the pool.
    """
    pool = list(pool)
    groups: dict[tuple[str, tuple[str, ...]], list[TaskRecord]] = {}
    for record in records:
        groups.setdefault(replacement_group(record), []).append(record)
    out: dict[str, TaskRecord] = {}
    for (database, _terms), members in groups.items():
        candidates = [r for r in pool if r.spec.database != database]
        if not candidates:
            raise ValueError(
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
                raise ValueError("a privileged asker needs reset(record=...)")
            reset(seed=seed, record=self._wrapper.replacement(record))
        else:
            reset(seed=seed)

    def act(self, view: PublicView) -> str:
        return self.asker.act(view)

    async def aact(self, view: PublicView) -> str:
        aact = getattr(self.asker, "aact", None)
        return await aact(view) if aact is not None else self.asker.act(view)


class SpecificationRandomization(_LeakageWrapper):
    """pi_ask^Q: the asker reads a replacement spec x' instead of the true x.

    The replacement map is drawn once, when the wrapper is made, from ``seed``: every record of
    a group (same database, same registered terms) gets the same donor record from another
    database, and the map stays the same across resets and evaluation seeds. Observations show
    the donor's rendered spec as ``task``; ``public_view.spec`` is the donor's public spec. The
    dialogue is the true one, and the matcher, responder and solver read the true history.

    Args:
        env: an AmbiTab env (possibly wrapped).
        seed: an int seed or a :class:`numpy.random.Generator` for the replacement map.
        pool: the records replacements are drawn from (default: the env's records).

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> env = SpecificationRandomization(gym.make("AmbiTab-Bird-v0"), seed=0)
        >>> obs, info = env.reset(seed=1)
        >>> true_task = env.unwrapped.public_view.render_task()
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
    ) -> None:
        super().__init__(env)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        base = self._ambitab
        self._donors = draw_replacements(base.records, base.records if pool is None else pool, rng)
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
            raise ValueError(
                f"record {record.id!r} is not among the wrapped env's records"
            ) from None

    def _task(self) -> str:
        record = self.record
        assert record is not None
        text = self._tasks.get(record.id)
        if text is None:
            text = render_spec(self.corpus.public_spec(self.replacement(record)))
            self._tasks[record.id] = text
        return text

    def _observe(self, obs: dict) -> dict:
        return {**obs, "task": self._task()}

    @property
    def public_view(self) -> PublicView:
        view = self.env.get_wrapper_attr("public_view")
        record = self.record
        assert record is not None
        return dataclasses.replace(view, spec=self.corpus.public_spec(self.replacement(record)))

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


# -- hybrid oracle ---------------------------------------------------------------------------


class HybridOracle(_LeakageWrapper):
    """The oracle (match, resp*): the env's own matcher with the reference responder.

    Installs the hybrid oracle on the underlying env for the wrapper's lifetime (``close``
    puts the actual oracle back). The reference responder is the corpus's deterministic
    responder unless ``responder`` is given.

    Args:
        env: an AmbiTab env (possibly wrapped).
        responder: resp* (default: ``deterministic_oracle(corpus.manifest.oracle).responder``).

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> from ambitab_gym.oracles.leaky import make_leaky_oracle
        >>> base = ambitab_gym.AmbiTabEnv("bird")
        >>> base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
        >>> env = HybridOracle(base)
        >>> env.hybrid_oracle.matcher is env.actual_oracle.matcher
        True
        >>> obs, _ = env.reset(seed=0)
        >>> obs, *_ = env.step("Please elaborate.")
        >>> "SELECT" in obs["dialogue"]
        False
    """

    def __init__(self, env: gym.Env, *, responder: Responder | None = None) -> None:
        super().__init__(env)
        base = self._ambitab
        if responder is None:
            responder = deterministic_oracle(base.corpus.manifest.oracle).responder
        self.actual_oracle: Oracle = base.oracle
        self.hybrid_oracle = Oracle(self.actual_oracle.matcher, responder)
        base.oracle = self.hybrid_oracle

    def close(self) -> None:
        if self._ambitab.oracle is self.hybrid_oracle:
            self._ambitab.oracle = self.actual_oracle
        super().close()


# -- adversarial probe -----------------------------------------------------------------------


class AdversarialProbe(_LeakageWrapper):
    """Rewords each question as pi_full^adv does: the question, then the adversarial suffix.

    Stops, the JSON ``done`` form and SQL-phase actions pass unchanged; a question that already
    ends with the suffix is not suffixed twice. With :class:`~ambitab_gym.policies.scripted.FullAsker`
    this is pi_full^adv.

    Args:
        env: an AmbiTab env (possibly wrapped).
        suffix: the text appended to every question.

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
        super().__init__(env)
        if not suffix.strip():
            raise ValueError("the adversarial suffix must not be empty")
        self.suffix = suffix.strip()

    def reword(self, action: Any) -> Any:
        """The action the env receives for ``action``."""
        if self._ambitab.record is None or self._ambitab.public_view.phase != "ask":
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
