"""Adapters that plug AmbiTab envs into third-party RL trainers.

Modules (each imports its trainer only if installed; names load on first use):

* :mod:`ambitab_gym.integrations.sb3` - stable-baselines3: ``MenuPolicy`` for
  :class:`~ambitab_gym.wrappers.QuestionMenu` envs, ``evaluate_menu_policy``,
  ``random_menu_policy`` (needs the ``sb3`` extra).
* :mod:`ambitab_gym.integrations.skyrl` - SkyRL: ``AmbiTabTextEnv`` (a ``BaseTextEnv``),
  ``register_skyrl``, ``skyrl_dataset``.
* :mod:`ambitab_gym.integrations.verl` - verl: ``AmbiTabAgentLoop`` (an ``AgentLoopBase`` of
  verl >= 0.9), ``AmbiTabInteraction`` (a ``BaseInteraction`` of verl < 0.9), ``verl_dataset``.
* :mod:`ambitab_gym.integrations.trl` - TRL: ``AmbiTabToolEnvironment`` and
  ``trl_environment_factory`` for ``GRPOTrainer(environment_factory=...)``, ``trl_dataset``,
  ``trl_reward``.
* :mod:`ambitab_gym.integrations.verifiers` - verifiers >= 0.4: ``AmbiTabTaskset`` and
  ``AmbiTabVerifiersEnv`` (``load_environment``); ``AmbiTabProtocol`` (verifiers 0.1.x
  ``MultiTurnEnv``-style methods), ``verifiers_dataset``.

Each test of these against the installed trainer is in ``tests/test_trainers_real.py``.
* :mod:`ambitab_gym.integrations.common` - ``ChatSession``, ``score_episode``, ``macro_means``,
  ``group_advantages`` (paper eq. 4 with zero-advantage group filtering).
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "ChatSession": "ambitab_gym.integrations.common",
    "EpisodeScore": "ambitab_gym.integrations.common",
    "GroupAdvantages": "ambitab_gym.integrations.common",
    "group_advantages": "ambitab_gym.integrations.common",
    "macro_means": "ambitab_gym.integrations.common",
    "score_episode": "ambitab_gym.integrations.common",
    "MenuPolicy": "ambitab_gym.integrations.sb3",
    "evaluate_menu_policy": "ambitab_gym.integrations.sb3",
    "make_menu_env": "ambitab_gym.integrations.sb3",
    "random_menu_policy": "ambitab_gym.integrations.sb3",
    "AmbiTabTextEnv": "ambitab_gym.integrations.skyrl",
    "register_skyrl": "ambitab_gym.integrations.skyrl",
    "skyrl_dataset": "ambitab_gym.integrations.skyrl",
    "AmbiTabAgentLoop": "ambitab_gym.integrations.verl",
    "AmbiTabInteraction": "ambitab_gym.integrations.verl",
    "verl_dataset": "ambitab_gym.integrations.verl",
    "AmbiTabToolEnvironment": "ambitab_gym.integrations.trl",
    "trl_dataset": "ambitab_gym.integrations.trl",
    "trl_environment_factory": "ambitab_gym.integrations.trl",
    "trl_reward": "ambitab_gym.integrations.trl",
    "AmbiTabProtocol": "ambitab_gym.integrations.verifiers",
    "AmbiTabTaskset": "ambitab_gym.integrations.verifiers",
    "AmbiTabVerifiersEnv": "ambitab_gym.integrations.verifiers",
    "load_environment": "ambitab_gym.integrations.verifiers",
    "verifiers_dataset": "ambitab_gym.integrations.verifiers",
}

__all__ = sorted(_MODULES)


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'ambitab_gym.integrations' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
