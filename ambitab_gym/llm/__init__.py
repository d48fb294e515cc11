"""The LLM transport: an async client for any OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...).

* :class:`LLMClient` - the chat-completions client (:mod:`ambitab_gym.llm.client`): timeouts,
  retries with backoff, a concurrency limit, small connection pools, sampling pass-through.
* :class:`ChatResult` - one completion; :class:`CallRecord`, :class:`UsageSummary` - token usage
  and latency (:mod:`ambitab_gym.llm.usage`).
* :class:`LLMError` and its subclasses, each with a ``category`` (:mod:`ambitab_gym.llm.errors`).
* :func:`response_format` - the ``response_format`` request field for structured output.
* :class:`Sampling`, :class:`SamplingTable`, :data:`DEFAULT_SAMPLING` - sampling per role;
  :class:`EpisodeKey`, :func:`episode_scope`, :func:`derive_seed` - the per-call seed
  (:mod:`ambitab_gym.llm.sampling`).
* :class:`ReplyCache` - replies stored by request in one SQLite file, so reruns reproduce
  whatever the server does (:mod:`ambitab_gym.llm.cache`; ``LLMClient(..., cache=...)``).

That is all this unit holds. What is sent and how replies are read belongs to the side of the
trust boundary that sends it: the asker and solver (agent side) in :mod:`ambitab_gym.policies.llm`
and :mod:`ambitab_gym.policies.llm_prompts`; the matcher, responder and their access policy
(privileged side) in :mod:`ambitab_gym.oracles.llm`, :mod:`ambitab_gym.oracles.llm_prompts` and
:mod:`ambitab_gym.oracles.access`. Command-line options are in
:mod:`ambitab_gym.commands.llm_options`, the scripted test server in
:mod:`ambitab_gym.testing.llm_server`. No module of this unit imports the oracles, the policies,
the commands or the testing package.
"""

from __future__ import annotations

from ambitab_gym.llm.cache import ReplyCache, ReplyCacheError
from ambitab_gym.llm.client import (
    ChatResult,
    LLMClient,
    ServerInfo,
    response_format,
)
from ambitab_gym.llm.errors import (
    LLMAuthError,
    LLMCacheMiss,
    LLMConnectionError,
    LLMContextOverflow,
    LLMError,
    LLMHTTPError,
    LLMMalformedResponse,
    LLMTimeout,
    LLMUnknownModel,
)
from ambitab_gym.llm.sampling import (
    DEFAULT_SAMPLING,
    EpisodeKey,
    Sampling,
    SamplingTable,
    derive_seed,
    episode_scope,
)
from ambitab_gym.llm.usage import CallRecord, UsageSummary

__all__ = [
    "DEFAULT_SAMPLING",
    "CallRecord",
    "ChatResult",
    "EpisodeKey",
    "LLMAuthError",
    "LLMCacheMiss",
    "LLMClient",
    "LLMConnectionError",
    "LLMContextOverflow",
    "LLMError",
    "LLMHTTPError",
    "LLMMalformedResponse",
    "LLMTimeout",
    "LLMUnknownModel",
    "ReplyCache",
    "ReplyCacheError",
    "Sampling",
    "ServerInfo",
    "SamplingTable",
    "UsageSummary",
    "derive_seed",
    "episode_scope",
    "response_format",
]
