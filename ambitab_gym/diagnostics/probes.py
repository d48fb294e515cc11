"""Deprecated alias of :mod:`ambitab_gym.policies.probes` (the probes are agent-side policies).

Kept for one release: import :class:`SchemaProbeAsker`, :class:`DialogueSQLSolver` and
:func:`find_sql` from :mod:`ambitab_gym.policies.probes` (or :mod:`ambitab_gym.diagnostics`),
and build probes by name with :func:`ambitab_gym.registry.create`. :data:`PROBE_ASKERS` and
:data:`PROBE_SOLVERS` are views of the registry's probe entries.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial

from ambitab_gym import registry
from ambitab_gym.corpora import Corpus
from ambitab_gym.policies.probes import DialogueSQLSolver, SchemaProbeAsker, find_sql

__all__ = ["PROBE_ASKERS", "PROBE_SOLVERS", "DialogueSQLSolver", "SchemaProbeAsker", "find_sql"]

warnings.warn(
    "ambitab_gym.diagnostics.probes moved to ambitab_gym.policies.probes; probes by name are in "
    "ambitab_gym.registry",
    DeprecationWarning,
    stacklevel=2,
)

_MODULE = "ambitab_gym.policies.probes:"


def _solver(name: str, corpus: Corpus) -> object:
    return registry.create("solver", name, corpus=corpus)


#: Deprecated: ``registry.create("asker", "schema-probe")``.
PROBE_ASKERS: dict[str, Callable[[], object]] = {
    c.name: partial(registry.create, "asker", c.name)
    for c in registry.components("asker")
    if c.factory.startswith(_MODULE)
}

#: Deprecated: ``registry.create("solver", name, corpus=corpus)``.
PROBE_SOLVERS: dict[str, Callable[[Corpus], object]] = {
    c.name: partial(_solver, c.name)
    for c in registry.components("solver")
    if c.factory.startswith(_MODULE)
}
