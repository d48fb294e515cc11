"""ambitab-gym: conversational task disambiguation over databases as Gymnasium environments.

Importing the package registers the env ids of :mod:`ambitab_gym.registry` (one per corpus,
plus ``AmbiTab-Procedural-v0``)::

    import gymnasium as gym
    import ambitab_gym

    env = gym.make("AmbiTab-Bird-v0")

Without the import, name the module in the id: Gymnasium imports it first (its
``"module:env-id"`` form), so this works in a fresh interpreter::

    env = gym.make("ambitab_gym:AmbiTab-Bird-v0")

A bare ``gym.make("AmbiTab-Bird-v0")`` in an interpreter that never imported ``ambitab_gym``
fails with Gymnasium's ``NameNotFound`` ("Environment `AmbiTab-Bird` doesn't exist"): Gymnasium
1.x has no plugin entry points that could load the package on demand. Where a linter would drop
the "unused" import, ``gym.register_envs(ambitab_gym)`` (a Gymnasium no-op) keeps it.

See :class:`ambitab_gym.env.AmbiTabEnv` for the protocol and ``docs/`` for the record format.
"""

from __future__ import annotations

from gymnasium.envs.registration import register
from gymnasium.envs.registration import registry as _gym_registry

from ambitab_gym._version import __version__
from ambitab_gym.actions import STOP, parse_action
from ambitab_gym.corpora import ENV_IDS, Corpus, load_corpus
from ambitab_gym.env import PRIVILEGED_INFO_KEYS, AmbiTabEnv
from ambitab_gym.metrics import question_f1
from ambitab_gym.oracles import Oracle, canonical_question, deterministic_oracle
from ambitab_gym.records import Ambiguity, PublicSpec, TaskRecord, VerificationSpec, load_records
from ambitab_gym.registry import components
from ambitab_gym.spaces import UnicodeText
from ambitab_gym.trajectory import PublicView, Trajectory
from ambitab_gym.verify import Verdict, Verifier

__all__ = [
    "ENV_IDS",
    "PRIVILEGED_INFO_KEYS",
    "STOP",
    "AmbiTabEnv",
    "Ambiguity",
    "Corpus",
    "Oracle",
    "PublicSpec",
    "PublicView",
    "TaskRecord",
    "Trajectory",
    "UnicodeText",
    "Verdict",
    "VerificationSpec",
    "Verifier",
    "__version__",
    "canonical_question",
    "deterministic_oracle",
    "load_corpus",
    "load_records",
    "parse_action",
    "question_f1",
]


def _register_envs() -> None:
    """Register every env id of :mod:`ambitab_gym.registry` with Gymnasium."""
    for entry in components("env"):
        if entry.name not in _gym_registry:
            register(
                id=entry.name,
                entry_point=entry.factory,
                kwargs=dict(entry.kwargs),
                disable_env_checker=False,
            )


_register_envs()
