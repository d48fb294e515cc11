"""stable-baselines3 support for :class:`~ambitab_gym.wrappers.menu.QuestionMenu` envs.

* :class:`MenuPolicy` - an ``ActorCriticPolicy`` that scores every menu slot with one shared
  network (so what it learns about a phrase carries over to other slots and other requests),
  masks empty slots, and pools the slots for the value. Use it as ``PPO(MenuPolicy, env)``;
  plain ``"MlpPolicy"`` works too. :func:`maskable_menu_policy` is the same network for
  sb3-contrib's ``MaskablePPO``.
* :func:`make_menu_env` - an AmbiTab env wrapped in ``QuestionMenu`` (for ``make_vec_env``),
  optionally with leakage wrappers below the menu (``wrappers=``).
* :func:`evaluate_menu_policy` - one episode per record, question-F1/precision/recall.
* :func:`random_menu_policy` - the uniform-over-valid-slots baseline.

Needs the ``sb3`` extra: ``pip install "ambitab-gym[sb3]"`` (stable-baselines3 with a pinned
``torch``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

try:
    import torch as th
    from stable_baselines3.common.policies import ActorCriticPolicy
    from torch import nn
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ambitab_gym.integrations.sb3 needs stable-baselines3 and torch: "
        'pip install "ambitab-gym[sb3]"'
    ) from error

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.integrations.common import WrapperSpec, apply_wrappers
from ambitab_gym.metrics import EpisodeScore, macro_means, score_episode
from ambitab_gym.wrappers.menu import MenuLayout, QuestionMenu

__all__ = [
    "MenuPolicy",
    "maskable_menu_policy",
    "evaluate_menu_policy",
    "make_menu_env",
    "random_menu_policy",
]

#: ``policy(observation, env) -> slot``
MenuPolicyFn = Callable[[np.ndarray, QuestionMenu], int]


def _layout_for(size: int) -> MenuLayout:
    probe = MenuLayout(1)
    slots, rest = divmod(size - probe.global_dim, probe.slot_dim)
    if rest or slots < 1:
        raise ConfigurationError(
            f"an observation of {size} values is not a QuestionMenu observation; "
            "wrap the env in ambitab_gym.wrappers.QuestionMenu"
        )
    return MenuLayout(slots)


class _SlotScorer(nn.Module):
    """Shared per-slot scorer (actor) and pooled value features (critic)."""

    def __init__(self, layout: MenuLayout, hidden: int) -> None:
        super().__init__()
        self.layout = layout
        context = 32
        self.global_net = nn.Sequential(nn.Linear(layout.global_dim, context), nn.Tanh())
        self.slot_net = nn.Sequential(
            nn.Linear(layout.slot_dim + context, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
        )
        self.score = nn.Linear(hidden, 1)
        self.value_features = nn.Sequential(nn.Linear(context + hidden, hidden), nn.Tanh())
        self.latent_dim_pi = layout.n_slots
        self.latent_dim_vf = hidden

    def _encode(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        layout = self.layout
        glob = features[:, : layout.global_dim]
        slots = features[:, layout.global_dim :].reshape(-1, layout.n_slots, layout.slot_dim)
        context = self.global_net(glob)
        expanded = context.unsqueeze(1).expand(-1, layout.n_slots, -1)
        hidden = self.slot_net(th.cat([slots, expanded], dim=-1))
        return context, hidden, slots[..., 0]

    def _actor(self, hidden: th.Tensor, valid: th.Tensor) -> th.Tensor:
        logits = self.score(hidden).squeeze(-1)
        return logits.masked_fill(valid < 0.5, -1e9)

    def _critic(self, context: th.Tensor, hidden: th.Tensor, valid: th.Tensor) -> th.Tensor:
        weights = valid.unsqueeze(-1)
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.value_features(th.cat([context, pooled], dim=-1))

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        context, hidden, valid = self._encode(features)
        return self._actor(hidden, valid), self._critic(context, hidden, valid)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        _, hidden, valid = self._encode(features)
        return self._actor(hidden, valid)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        context, hidden, valid = self._encode(features)
        return self._critic(context, hidden, valid)


class _SlotNetwork:
    """The menu policies' common part: the shared slot network, one logit per slot (mixed
    into an SB3 actor-critic policy class, before it)."""

    def __init__(
        self,
        observation_space: gym.spaces.Space,
        action_space: gym.spaces.Space,
        lr_schedule: Callable[[float], float],
        *,
        menu_hidden: int = 64,
        **kwargs: Any,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(
                f"{type(self).__name__} needs the Discrete actions of a QuestionMenu env"
            )
        self.menu_hidden = int(menu_hidden)
        self.menu_layout = _layout_for(int(np.prod(observation_space.shape)))
        if self.menu_layout.n_slots != action_space.n:
            raise ConfigurationError(
                f"observation holds {self.menu_layout.n_slots} slots but there are "
                f"{action_space.n} actions; use an unmodified QuestionMenu env"
            )
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = _SlotScorer(self.menu_layout, self.menu_hidden)

    def _build(self, lr_schedule: Callable[[float], float]) -> None:
        super()._build(lr_schedule)
        # The scorer already yields one logit per slot: no extra linear layer on top.
        self.action_net = nn.Identity()
        nn.init.orthogonal_(self.mlp_extractor.score.weight, gain=0.01)
        nn.init.zeros_(self.mlp_extractor.score.bias)
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["menu_hidden"] = self.menu_hidden
        return data


class MenuPolicy(_SlotNetwork, ActorCriticPolicy):
    """Actor-critic policy for ``QuestionMenu`` observations (layout read from the space).

    Args:
        observation_space, action_space, lr_schedule: as for ``ActorCriticPolicy``.
        menu_hidden: width of the shared slot network.
        **kwargs: passed on to ``ActorCriticPolicy``.

    Example:
        >>> import gymnasium as gym
        >>> from stable_baselines3 import PPO
        >>> env = make_menu_env("AmbiTab-Bird-v0", n_slots=8)
        >>> model = PPO(MenuPolicy, env, n_steps=16, batch_size=16, n_epochs=1, seed=0)
        >>> model.policy.mlp_extractor.latent_dim_pi
        8
    """


@functools.cache
def maskable_menu_policy() -> type:
    """:class:`MenuPolicy`'s network as a sb3-contrib ``MaskableActorCriticPolicy``, for
    ``MaskablePPO`` with the env's ``action_masks()`` (imports sb3-contrib, which the ``sb3``
    extra installs)."""
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    class MaskableMenuPolicy(_SlotNetwork, MaskableActorCriticPolicy):
        """:class:`MenuPolicy` for ``MaskablePPO``."""

    return MaskableMenuPolicy


def make_menu_env(
    env_id: str = "AmbiTab-Bird-v0",
    *,
    n_slots: int = 32,
    env_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[WrapperSpec] = (),
    **menu_kwargs: Any,
) -> QuestionMenu:
    """``QuestionMenu(<wrappers>(gym.make(env_id, **env_kwargs)))``.

    Args:
        env_id: a registered AmbiTab id.
        n_slots: menu size.
        env_kwargs: keyword arguments of the env (``split=``, ``record_ids=``, ...).
        wrappers: wrappers below the menu, innermost first (e.g.
            ``[SpecificationRandomization]``: the menu is then built from x').
        **menu_kwargs: further ``QuestionMenu`` options.
    """
    env = apply_wrappers(gym.make(env_id, **(env_kwargs or {})), wrappers)
    return QuestionMenu(env, n_slots=n_slots, **menu_kwargs)


def random_menu_policy(seed: int | np.random.Generator | None) -> MenuPolicyFn:
    """A policy that picks uniformly among the current menu's valid slots.

    Args:
        seed: seed or generator of its draws.
    """
    rng = np.random.default_rng(seed)

    def act(observation: np.ndarray, env: QuestionMenu) -> int:
        valid = np.flatnonzero(env.action_masks())
        return int(rng.choice(valid))

    return act


def evaluate_menu_policy(
    policy: MenuPolicyFn | Any,
    env: QuestionMenu,
    record_ids: Sequence[str] | None = None,
    *,
    deterministic: bool = True,
) -> tuple[dict[str, float | int | None], list[EpisodeScore]]:
    """Run one episode per record and score it (question-F1, precision, recall).

    Args:
        policy: an SB3 model (anything with ``predict``) or ``policy(obs, env) -> slot``.
        env: a ``QuestionMenu`` env over the records to evaluate.
        record_ids: the records (default: all of the env's records).
        deterministic: passed to ``predict``.

    Returns:
        ``(summary, scores)``: macro means (see :func:`~ambitab_gym.metrics.macro_means`)
            and per-episode scores.
    """
    ids = (
        list(record_ids)
        if record_ids is not None
        else [r.id for r in env.get_wrapper_attr("records")]
    )
    scores = []
    for record_id in ids:
        obs, _ = env.reset(options={"record_id": record_id})
        done = False
        while not done:
            if hasattr(policy, "predict"):
                action, _ = policy.predict(obs, deterministic=deterministic)
                action = int(np.asarray(action).reshape(-1)[0])
            else:
                action = int(policy(obs, env))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        # the privileged scoring path: the true record and its credits
        record = env.get_wrapper_attr("record")
        scores.append(score_episode(env.get_wrapper_attr("trajectory"), record))
    return macro_means(scores), scores
