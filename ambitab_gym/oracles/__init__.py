"""Oracles: matchers that credit ambiguities and responders that answer.

See docs/design.md section 5, Oracles.
"""

from __future__ import annotations

from ambitab_gym.oracles.base import (
    REFUSAL,
    Matcher,
    Oracle,
    OracleContext,
    OracleTurn,
    Responder,
    Route,
)
from ambitab_gym.oracles.deterministic import (
    IntentMatcher,
    KnowledgeMatcher,
    ReferenceResponder,
    canonical_question,
    deterministic_oracle,
    evidence_concept,
)
from ambitab_gym.oracles.routes import score_route

__all__ = [
    "REFUSAL",
    "IntentMatcher",
    "KnowledgeMatcher",
    "Matcher",
    "Oracle",
    "OracleContext",
    "OracleTurn",
    "ReferenceResponder",
    "Responder",
    "Route",
    "canonical_question",
    "deterministic_oracle",
    "evidence_concept",
    "score_route",
]
