"""Wrappers for AmbiTab environments, composable with Gymnasium's own.

Leakage diagnostics (:mod:`ambitab_gym.wrappers.leakage`):
    * ``SpecificationRandomization`` - the asker sees a resampled spec x'.
    * ``HybridOracle`` - the env's matcher with the reference responder.
    * ``AdversarialProbe`` - rewords questions as the full^adv probe does.

Response guard (:mod:`ambitab_gym.wrappers.guard`):
    * ``ResponseGuard`` - redacts oracle answers that reveal SQL before the agent sees them.

Trainers (:mod:`ambitab_gym.wrappers.menu`, :mod:`ambitab_gym.wrappers.chat`):
    * ``QuestionMenu`` - discrete actions over agent-visible candidate questions.
    * ``ChatMessages`` - observations as chat messages, actions as assistant text.

Stack rules (:mod:`ambitab_gym.wrappers.stack`):
    * ``agent_view`` - the agent's view through a stack (what every agent-side wrapper reads).
    * ``AgentInterface``, ``StackOrderError`` - the agent-side marker and the order error.

Names are imported on first use, so ``import ambitab_gym.wrappers`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "SpecificationRandomization": "ambitab_gym.wrappers.leakage",
    "HybridOracle": "ambitab_gym.wrappers.leakage",
    "AdversarialProbe": "ambitab_gym.wrappers.leakage",
    "ResponseGuard": "ambitab_gym.wrappers.guard",
    "QuestionMenu": "ambitab_gym.wrappers.menu",
    "ChatMessages": "ambitab_gym.wrappers.chat",
    "AgentInterface": "ambitab_gym.wrappers.stack",
    "StackOrderError": "ambitab_gym.wrappers.stack",
    "agent_view": "ambitab_gym.wrappers.stack",
}

__all__ = sorted(_MODULES)


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'ambitab_gym.wrappers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
