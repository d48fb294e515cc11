"""Askers, solvers and oracles by name, as the command line and campaigns name them.

* :func:`make_asker` - ``none``, ``full``, ``full-adv``, ``generic``, ``schema-probe``,
  ``llm:STRATEGY`` or an import path ``module:callable``.
* :func:`make_solver` - ``interpretation``, ``dialogue-sql``, ``dialogue-sql-blind``, ``llm`` or
  ``module:callable``.
* :func:`make_oracle` - ``deterministic`` (the corpus's reference oracle), ``llm``, the leaky
  demonstration oracles, or ``module:callable``.

An import path names a class or factory; it is called with no arguments, or with ``corpus=`` when
its signature takes one.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ambitab_gym.corpora import Corpus
from ambitab_gym.oracles import Oracle, deterministic_oracle
from ambitab_gym.policies.interpretation import InterpretationSolver
from ambitab_gym.policies.scripted import FullAdvAsker, FullAsker, GenericAsker, NoneAsker

__all__ = [
    "ASKERS",
    "LEAKY_ORACLES",
    "SOLVERS",
    "load_object",
    "make_asker",
    "make_oracle",
    "make_solver",
]

ASKERS = {"none": NoneAsker, "full": FullAsker, "full-adv": FullAdvAsker, "generic": GenericAsker}
SOLVERS = ("interpretation", "llm")
LEAKY_ORACLES = ("leaky-sql-responder", "generic-credit-matcher", "schema-word-matcher")


def load_object(path: str, *, corpus: Corpus | None = None) -> Any:
    """Import ``module:attribute`` and instantiate it (passing ``corpus=`` when it takes one).

    Raises:
        ValueError: when the path is malformed or cannot be imported.
    """
    if ":" not in path:
        raise ValueError(f"{path!r} is neither a known name nor an import path 'module:callable'")
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
        target = getattr(module, attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot import {path!r}: {error}") from None
    if not callable(target):
        return target
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        parameters = {}
    if corpus is not None and "corpus" in parameters:
        return target(corpus=corpus)
    return target()


def make_asker(name: str, *, corpus: Corpus | None = None, llm_client: Any = None) -> Any:
    """A fresh asker for a name (askers are stateful: make one per concurrent episode)."""
    if name in ASKERS:
        return ASKERS[name]()
    from ambitab_gym.diagnostics.probes import PROBE_ASKERS

    if name in PROBE_ASKERS:
        return PROBE_ASKERS[name]()
    if name.startswith("llm:"):
        from ambitab_gym.llm import make_llm_asker

        if llm_client is None:
            raise ValueError(f"asker {name!r} needs an LLM server: pass --llm-url and --model")
        return make_llm_asker(name.split(":", 1)[1], llm_client)
    return load_object(name, corpus=corpus)


def make_solver(name: str, corpus: Corpus, *, llm_client: Any = None) -> Any:
    """A solver for a name."""
    from ambitab_gym.diagnostics.probes import PROBE_SOLVERS

    if name == "interpretation":
        return InterpretationSolver(corpus)
    if name in PROBE_SOLVERS:
        return PROBE_SOLVERS[name](corpus)
    if name == "llm":
        from ambitab_gym.llm import make_llm_solver

        if llm_client is None:
            raise ValueError("solver 'llm' needs an LLM server: pass --llm-url and --model")
        return make_llm_solver(llm_client, corpus=corpus)
    return load_object(name, corpus=corpus)


def make_oracle(name: str, corpus: Corpus, *, llm_client: Any = None, **options: Any) -> Oracle:
    """An oracle for a name."""
    if name == "deterministic":
        return deterministic_oracle(corpus.manifest.oracle)
    if name in LEAKY_ORACLES:
        from ambitab_gym.oracles.leaky import make_leaky_oracle

        return make_leaky_oracle(name, corpus)
    if name == "llm":
        from ambitab_gym.llm import make_llm_oracle

        if llm_client is None:
            raise ValueError("oracle 'llm' needs an LLM server: pass --llm-url and --model")
        return make_llm_oracle(corpus, llm_client, **options)
    oracle = load_object(name, corpus=corpus)
    if not isinstance(oracle, Oracle):
        raise ValueError(f"{name!r} did not give an Oracle (got {type(oracle).__name__})")
    return oracle
