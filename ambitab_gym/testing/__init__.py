"""Test tooling shipped with the package (used by tests, benchmarks and examples).

* :mod:`ambitab_gym.testing.llm_server` - a scripted OpenAI-compatible HTTP server on 127.0.0.1
  (:class:`~ambitab_gym.testing.llm_server.ScriptedServer`, :class:`ScriptRule`, :func:`role_rules`);
  ``python -m ambitab_gym.testing.llm_server`` runs it standalone.

No module of the package imports :mod:`ambitab_gym.testing`: it sits above everything else in the
import graph (it may import both sides of the trust boundary to route on their prompts).
"""

from __future__ import annotations

__all__: list[str] = []
