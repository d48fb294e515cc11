"""The AmbiTab environment as a verifiers (>= 0.4) plugin module.

verifiers resolves a taskset id to a top-level module exporting its ``Taskset`` and ``Env``
subclasses in ``__all__``; this file is that module for AmbiTab. verifiers' command line imports
the id before anything else, so put this folder on the path and name it as the taskset id:

    PYTHONPATH=examples vf-eval ambitab_verifiers --env.taskset.split dev ...

In Python, ``ambitab_gym.integrations.verifiers.load_environment("AmbiTab-Bird-v0")`` needs no
path: where this module cannot be imported, it enters the adapter module under the id.
"""

from __future__ import annotations

from ambitab_gym.integrations.verifiers import (
    AmbiTabTaskset,
    AmbiTabVerifiersEnv,
    load_environment,
)

__all__ = ["AmbiTabTaskset", "AmbiTabVerifiersEnv", "load_environment"]
