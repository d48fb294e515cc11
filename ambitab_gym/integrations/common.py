"""Shared pieces of the trainer adapters: chat sessions, episode scores, group advantages.

* :class:`ChatSession` - one AmbiTab episode at a time behind a chat interface: ``start``
  returns the opening messages, ``step(text)`` the environment's new messages, the reward and
  whether the episode is over. Every LLM-trainer adapter drives its env through one; its
  ``wrappers`` (for instance a ``SpecificationRandomization``) go below the chat layer, whose
  messages are built from the agent's view of that stack.
* :func:`apply_wrappers` - wrap an env in a sequence of wrappers (callables or
  ``"module:callable"`` import paths, innermost first), as the adapters' ``wrappers`` options do.
* :class:`EpisodeScore`, :func:`score_episode` and :func:`macro_means` - re-exported from
  :mod:`ambitab_gym.metrics`: the one episode scorer and the one aggregation of paper C.3
  (precision over episodes that asked; recall and F1 over ambiguity-bearing episodes that did
  not end in a fallback stop), the same numbers ``ambitab-gym evaluate`` reports.
* :func:`group_advantages` - trajectory-level advantages of paper eq. 4 with zero-advantage group
  filtering (Appendix D.1): constant-reward groups are dropped; if every group is constant, one
  complete group is kept so the batch is not empty.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.metrics import EpisodeScore, macro_means, score_episode
from ambitab_gym.wrappers.chat import ChatMessages, new_messages

__all__ = [
    "ChatSession",
    "WrapperSpec",
    "apply_wrappers",
    "EpisodeScore",
    "GroupAdvantages",
    "group_advantages",
    "macro_means",
    "score_episode",
]

Message = dict[str, str]

#: A wrapper for :func:`apply_wrappers`: ``callable(env) -> env`` or ``"module:callable"``.
WrapperSpec = Callable[[gym.Env], gym.Env] | str


def apply_wrappers(env: gym.Env, wrappers: Sequence[WrapperSpec] = ()) -> gym.Env:
    """Wrap ``env`` in ``wrappers``, the first innermost (as ``gym.make_vec(wrappers=...)``).

    Args:
        env: the env to wrap.
        wrappers: callables ``env -> env`` (a wrapper class, a ``functools.partial`` of one) or
            import paths ``"module:callable"`` (for YAML configs of verl and SkyRL).

    Returns:
        the wrapped env.

    >>> import ambitab_gym
    >>> env = apply_wrappers(ambitab_gym.AmbiTabEnv("bird"),
    ...                      ["ambitab_gym.wrappers.leakage:SpecificationRandomization"])
    >>> type(env).__name__
    'SpecificationRandomization'
    """
    if isinstance(wrappers, str) or callable(wrappers):
        wrappers = [wrappers]
    for wrapper in wrappers:
        if isinstance(wrapper, str):
            module, _, name = wrapper.partition(":")
            if not module or not name:
                raise ConfigurationError(f"a wrapper path is 'module:callable', not {wrapper!r}")
            wrapper = getattr(importlib.import_module(module), name)
        if not callable(wrapper):
            raise TypeError(f"a wrapper is a callable env -> env, not {type(wrapper).__name__}")
        env = wrapper(env)
    return env


class ChatSession:
    """One episode at a time of an AmbiTab env behind a chat interface.

    The messages are :class:`ChatMessages` of the agent's view of the wrapper stack, so a
    ``SpecificationRandomization`` in ``wrappers`` (or in ``env``) randomizes every text the
    model reads, system prompt included, while the oracle and the reward see the true record.

    Args:
        env_id: a registered AmbiTab id (or ``ambitab_gym:<id>``).
        env_kwargs: keyword arguments of the env (``split=``, ``mode=``, ``reward=``, ...).
        prompt: a system-message template for :class:`ChatMessages` (``{task}``, ``{budget}``,
            ``{stop}``); default its own instructions.
        env: an already built AmbiTab env (possibly wrapped) to use instead of
            ``env_id``/``env_kwargs``.
        wrappers: wrappers put around the env below the chat layer, innermost first (see
            :func:`apply_wrappers`), e.g. ``[HybridOracle, SpecificationRandomization]``.

    Example:
        >>> session = ChatSession("AmbiTab-Bird-v0")
        >>> opening = session.start(record_id="bird-0014")
        >>> opening[0]["role"]
        'system'
        >>> new, reward, done, info = session.step('What do you mean by "recently"?')
        >>> new[0]["role"], done
        ('user', False)
        >>> new, reward, done, info = session.step("<STOP>")
        >>> reward, done, session.reward
        (1.0, True, 1.0)
    """

    def __init__(
        self,
        env_id: str = "AmbiTab-Bird-v0",
        *,
        env_kwargs: dict[str, Any] | None = None,
        prompt: str | None = None,
        env: gym.Env | None = None,
        wrappers: Sequence[WrapperSpec] = (),
    ) -> None:
        base = env if env is not None else gym.make(env_id, **dict(env_kwargs or {}))
        self.env = ChatMessages(apply_wrappers(base, wrappers), prompt=prompt)
        self.messages: list[Message] = []
        self.done = True
        self.reward = 0.0
        self.info: dict[str, Any] = {}

    @property
    def record_ids(self) -> list[str]:
        """Ids of the records this session's env draws from."""
        return [r.id for r in self.env.get_wrapper_attr("records")]

    def start(self, *, record_id: str | None = None, seed: int | None = None) -> list[Message]:
        """Begin an episode (on ``record_id``, or a record drawn with ``seed``).

        Returns:
            the opening transcript (the system message with the task).
        """
        options = {"record_id": record_id} if record_id is not None else None
        self.messages, self.info = self.env.reset(seed=seed, options=options)
        self.done = False
        self.reward = 0.0
        return [dict(m) for m in self.messages]

    def step(self, text: str) -> tuple[list[Message], float, bool, dict[str, Any]]:
        """Send the assistant's reply.

        Returns:
            ``(new_messages, reward, done, info)``: the environment's messages after the reply,
            this step's reward (paid at the end of the episode), whether the episode is over,
            and the env's (unprivileged) info.
        """
        if self.done:
            raise RuntimeError("the episode is over: call start() for a new one")
        observation, reward, terminated, truncated, info = self.env.step(text)
        added = new_messages(self.messages, observation)
        self.messages, self.info = observation, info
        self.done = bool(terminated or truncated)
        self.reward += float(reward)
        return added, float(reward), self.done, info

    def close(self) -> None:
        """Close the env."""
        self.env.close()


@dataclass(frozen=True)
class GroupAdvantages:
    """Advantages per group (eq. 4) and which groups survive zero-advantage filtering."""

    advantages: tuple[tuple[float, ...], ...]
    kept: tuple[bool, ...]
    all_constant: bool


def group_advantages(
    rewards: Sequence[Sequence[float]], *, eps: float = 1e-6, min_std: float = 1e-6
) -> GroupAdvantages:
    """Group-relative advantages with zero-advantage group filtering (paper eq. 4, D.1).

    For each group (the K trajectories sampled for one request),
    ``A_k = (R_k - mean) / (s + eps)`` with the sample standard deviation ``s`` (K - 1 in the
    denominator). A group with constant reward, or ``s <= min_std``, gets zero advantage and
    is dropped before the update; if every group is dropped, the first complete group is kept
    (its advantages stay zero, so only regularization terms would contribute).

    Args:
        rewards: one sequence of trajectory rewards per group.
        eps: the stabilizer added to the standard deviation.
        min_std: groups whose standard deviation is at most this are constant.

    Returns:
        a :class:`GroupAdvantages`.

    >>> result = group_advantages([[1.0, 0.0], [0.5, 0.5]])
    >>> [round(a, 4) for a in result.advantages[0]], result.kept
    ([0.7071, -0.7071], (True, False))
    >>> group_advantages([[0.0, 0.0], [1.0, 1.0]]).kept
    (True, False)
    """
    advantages: list[tuple[float, ...]] = []
    kept: list[bool] = []
    for group in rewards:
        values = [float(r) for r in group]
        if len(values) < 2:
            advantages.append(tuple(0.0 for _ in values))
            kept.append(False)
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        if std <= min_std:
            advantages.append(tuple(0.0 for _ in values))
            kept.append(False)
        else:
            advantages.append(tuple((v - mean) / (std + eps) for v in values))
            kept.append(True)
    all_constant = bool(kept) and not any(kept)
    if all_constant:
        kept[0] = True
    return GroupAdvantages(tuple(advantages), tuple(kept), all_constant)
