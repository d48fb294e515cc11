"""Procedural AVTs: unlimited training tasks held to the rules of the real corpora.

* :class:`TaskGenerator`, :class:`GeneratorConfig`, :class:`GeneratedTask` - draw a verified
  AVT (a synthetic SQLite database, a request with m ambiguities, one record per combination
  of readings) from a seed.
* :data:`FAMILIES`, :data:`DOMAINS`, :data:`TRAIN_DOMAINS`, :data:`TEST_DOMAINS` - what it
  draws from.
* :func:`write_corpus` - an ordinary corpus folder (``ambitab-gym generate``).
* :class:`ProceduralCorpus`, :class:`ProceduralEnv` - the ``AmbiTab-Procedural-v0`` env: a
  fresh task at every reset.
* :class:`TaskPrefetcher`, :func:`task_seed` - worker processes that generate the env's next
  tasks ahead (``prefetch=N``), the same tasks as in process.

See ``docs/generate.md``.
"""

from __future__ import annotations

from ambitab_gym.generate.database import GeneratedDatabase, build_database
from ambitab_gym.generate.domains import DOMAINS, TEST_DOMAINS, TRAIN_DOMAINS, Domain
from ambitab_gym.generate.families import FAMILIES
from ambitab_gym.generate.prefetch import PrefetchError, TaskPrefetcher, task_seed
from ambitab_gym.generate.tasks import (
    GENERATOR_VERSION,
    DatabasePool,
    GeneratedTask,
    GeneratorConfig,
    TaskGenerator,
)

__all__ = [
    "DOMAINS",
    "DatabasePool",
    "FAMILIES",
    "GENERATOR_VERSION",
    "TEST_DOMAINS",
    "TRAIN_DOMAINS",
    "Domain",
    "GeneratedDatabase",
    "GeneratedTask",
    "GeneratorConfig",
    "PrefetchError",
    "TaskGenerator",
    "TaskPrefetcher",
    "build_database",
    "task_seed",
]
