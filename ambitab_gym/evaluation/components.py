"""Deprecated: askers, solvers and oracles by name now come from :mod:`ambitab_gym.registry`.

Kept for one release; each function is a thin call of the registry:

* :func:`make_asker` - ``registry.create("asker", name, corpus=..., llm_client=...)``.
* :func:`make_solver` - ``registry.create("solver", name, corpus=..., llm_client=...)``.
* :func:`make_oracle` - :func:`ambitab_gym.evaluation.engine.create_oracle`.
* :func:`load_object` - :func:`ambitab_gym.registry.load_object`.
* :data:`ASKERS`, :data:`SOLVERS`, :data:`LEAKY_ORACLES` - names read from the registry.
"""

from __future__ import annotations

import warnings
from typing import Any

from ambitab_gym import registry
from ambitab_gym.corpora import Corpus
from ambitab_gym.evaluation.engine import create_oracle
from ambitab_gym.oracles import Oracle

__all__ = [
    "ASKERS",
    "LEAKY_ORACLES",
    "SOLVERS",
    "load_object",
    "make_asker",
    "make_oracle",
    "make_solver",
]

warnings.warn(
    "ambitab_gym.evaluation.components is deprecated; use ambitab_gym.registry",
    DeprecationWarning,
    stacklevel=2,
)

#: Deprecated: the scripted askers by name (``registry.names("asker")`` lists them all).
ASKERS = {
    c.name: c.load()
    for c in registry.components("asker")
    if c.factory.startswith("ambitab_gym.policies.scripted:")
}
#: Deprecated: ``registry.names("solver")``.
SOLVERS = registry.names("solver")
#: Deprecated: ``registry.names("oracle", tag="leaky")``.
LEAKY_ORACLES = registry.names("oracle", tag="leaky")


def load_object(path: str, *, corpus: Corpus | None = None) -> Any:
    """Deprecated: :func:`ambitab_gym.registry.load_object`."""
    return registry.load_object(path, corpus=corpus)


def make_asker(name: str, *, corpus: Corpus | None = None, llm_client: Any = None) -> Any:
    """Deprecated: ``registry.create("asker", name, ...)``."""
    return registry.create("asker", name, corpus=corpus, llm_client=llm_client)


def make_solver(name: str, corpus: Corpus, *, llm_client: Any = None) -> Any:
    """Deprecated: ``registry.create("solver", name, ...)``."""
    return registry.create("solver", name, corpus=corpus, llm_client=llm_client)


def make_oracle(name: str, corpus: Corpus, *, llm_client: Any = None, **options: Any) -> Oracle:
    """Deprecated: :func:`ambitab_gym.evaluation.engine.create_oracle`."""
    return create_oracle(name, corpus, llm_client=llm_client, **options)
