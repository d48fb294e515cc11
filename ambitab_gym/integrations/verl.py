"""verl adapter: AmbiTab episodes inside verl's agent loop (verl >= 0.9), and its older interaction.

* :class:`AmbiTabAgentLoop` - an ``AgentLoopBase`` of ``verl.experimental.agent_loop`` (the
  multi-turn rollout interface of verl 0.9), registered as :data:`AGENT_NAME`. Its ``run``
  plays one AmbiTab episode: it tokenizes the opening transcript with verl's Continuous Token
  builder, asks verl's LLM server for each asker turn, sends the decoded reply to the env,
  appends the env's messages as context tokens (``response_mask`` 0), and ends with the
  episode's reward as ``reward_score`` (so verl's ``rm_scores`` carry the env's reward on the
  last token) and the per-turn rewards in ``extra_fields["turn_scores"]``. An episode still open
  when ``response_length`` is spent ends as a stop. Built on first use (importing verl loads
  Ray and torch), so this module imports without verl.
* :class:`AmbiTabInteraction` - ``start_interaction``, ``generate_response``,
  ``calculate_score`` and ``finalize_interaction`` (all ``async``) as ``verl/interactions/base.py``
  of verl 0.4-0.8 defines them (verl 0.9 removed interactions). It subclasses verl's
  ``BaseInteraction`` when that exists, and a stand-in with the same interface otherwise.
* :func:`verl_dataset` - one row per record: ``prompt`` (the opening transcript),
  ``agent_name`` (:data:`AGENT_NAME`) and ``extra_info.interaction_kwargs`` (``name`` and
  ``record_id``), as verl's ``RLHFDataset`` reads them.

Agent-loop options (keys of the agent loop's entry in ``agent_loop_config_path``, next to
``name`` and ``_target_: ambitab_gym.integrations.verl.AmbiTabAgentLoop``) and interaction config
(the ``config`` of the interaction YAML entry): ``env_id`` (default ``AmbiTab-Bird-v0``),
``env_kwargs`` (``split``, ``mode``, ``reward``, ...), ``prompt``, ``wrappers`` (below the chat
layer, innermost first: ``"module:callable"`` paths or callables). The interaction's
``generate_response`` pays the episode's reward on the turn that ends it (0 before), so the turn
scores sum to the raw env's reward.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from ambitab_gym.actions import STOP
from ambitab_gym.integrations.common import ChatSession, WrapperSpec

__all__ = [
    "AGENT_NAME",
    "INTERACTION_NAME",
    "AmbiTabAgentLoop",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabInteraction",
    "verl_dataset",
]

#: The interaction name the dataset rows and the YAML config use.
INTERACTION_NAME = "ambitab"

#: The agent-loop name :class:`AmbiTabAgentLoop` is registered under (the rows' ``agent_name``).
AGENT_NAME = "ambitab_agent"



def _has_interactions() -> bool:
    """Whether the installed verl has ``verl/interactions/base.py`` (verl < 0.9), found without
    importing verl (its package import starts Ray and torch)."""
    spec = importlib.util.find_spec("verl")
    return bool(
        spec is not None
        and spec.submodule_search_locations
        and any(
            (Path(location) / "interactions" / "base.py").is_file()
            for location in spec.submodule_search_locations
        )
    )


if _has_interactions():  # the real base class of verl < 0.9
    from verl.interactions.base import BaseInteraction as _Base

    HAVE_VERL_INTERACTIONS = True
else:  # a stand-in with the interface of verl/interactions/base.py
    HAVE_VERL_INTERACTIONS = False

    class _Base:  # type: ignore[no-redef]
        def __init__(self, config: dict[str, Any]) -> None:
            self.config = config
            self.name: str = config.get("name", "interaction_agent")


class AmbiTabInteraction(_Base):
    """The AmbiTab oracle as verl's simulated user; one env per interaction instance.

    Args:
        config: ``name``, ``env_id``, ``env_kwargs``, ``prompt``, ``wrappers``.

    Example:
        >>> import asyncio
        >>> async def episode():
        ...     user = AmbiTabInteraction({"name": "ambitab"})
        ...     iid = await user.start_interaction(record_id="bird-0014")
        ...     messages = [{"role": "assistant", "content": 'What is "recently"?'}]
        ...     first = await user.generate_response(iid, messages)
        ...     messages.append({"role": "assistant", "content": "<STOP>"})
        ...     last = await user.generate_response(iid, messages)
        ...     score = await user.calculate_score(iid)
        ...     await user.finalize_interaction(iid)
        ...     return first[0], last[0], last[2], score
        >>> asyncio.run(episode())
        (False, True, 1.0, 1.0)
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        super().__init__(config)
        self.env_id = str(config.get("env_id", "AmbiTab-Bird-v0"))
        self.env_kwargs = dict(config.get("env_kwargs") or {})
        self.prompt = config.get("prompt")
        self.wrappers = list(config.get("wrappers") or ())
        self._sessions: dict[str, ChatSession] = {}

    def _session(self, instance_id: str) -> ChatSession:
        session = self._sessions.get(instance_id)
        if session is None:
            raise KeyError(
                f"no interaction {instance_id!r}: call start_interaction() first "
                "(or it was finalized)"
            )
        return session

    async def start_interaction(
        self,
        instance_id: str | None = None,
        record_id: str | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> str:
        """Start an episode on ``record_id`` (from the row's ``interaction_kwargs``).

        Returns:
            the instance id.
        """
        if instance_id is None:
            instance_id = str(uuid4())
        old = self._sessions.pop(instance_id, None)
        if old is not None:
            old.close()
        session = ChatSession(
            self.env_id, env_kwargs=self.env_kwargs, prompt=self.prompt, wrappers=self.wrappers
        )
        session.start(record_id=record_id, seed=seed)
        self._sessions[instance_id] = session
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Answer the model's last assistant message.

        Returns:
            ``(should_terminate_sequence, response_content, current_turn_score, data)``.
        """
        session = self._session(instance_id)
        if session.done:
            return True, "", 0.0, {}
        content = ""
        for message in reversed(messages):
            if message.get("role") == "assistant":
                content = str(message.get("content") or "")
                break
        added, reward, done, info = session.step(content)
        response = "\n\n".join(m["content"] for m in added)
        data = {key: info[key] for key in ("questions_asked", "stop_reason") if key in info}
        return done, response, reward, data

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """The episode's reward so far (the final reward once it is over)."""
        return self._session(instance_id).reward

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Release the instance's env."""
        session = self._sessions.pop(instance_id, None)
        if session is not None:
            session.close()


def verl_dataset(
    env_id: str = "AmbiTab-Bird-v0",
    *,
    name: str = INTERACTION_NAME,
    data_source: str = "ambitab",
    wrappers: Sequence[WrapperSpec] = (),
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """One verl multi-turn row per record (write them to parquet for verl's RL dataset).

    Args:
        env_id: a registered AmbiTab id.
        name: the interaction name (as in the interaction YAML).
        data_source: the rows' ``data_source``.
        wrappers: wrappers below the chat layer (the same as the interaction config's).
        **env_kwargs: env options (``split="train"``, ...).

    >>> row = verl_dataset("AmbiTab-Bird-v0", split="dev")[0]
    >>> row["extra_info"]["interaction_kwargs"]["name"], row["prompt"][0]["role"]
    ('ambitab', 'system')
    """
    session = ChatSession(env_id, env_kwargs=env_kwargs, wrappers=wrappers)
    rows = []
    try:
        for index, record_id in enumerate(session.record_ids):
            rows.append(
                {
                    "data_source": data_source,
                    "prompt": session.start(record_id=record_id),
                    "agent_name": AGENT_NAME,
                    "ability": "clarification",
                    "reward_model": {"style": "interaction", "ground_truth": ""},
                    "extra_info": {
                        "index": index,
                        "interaction_kwargs": {"name": name, "record_id": record_id},
                    },
                }
            )
    finally:
        session.close()
    return rows


def _record_of(kwargs: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The record (or seed) of a verl row: ``interaction_kwargs``, ``extra_info`` or top level."""
    for source in (
        kwargs.get("interaction_kwargs"),
        (kwargs.get("extra_info") or {}).get("interaction_kwargs"),
        kwargs.get("extra_info"),
        kwargs,
    ):
        if isinstance(source, Mapping) and (
            source.get("record_id") is not None or source.get("seed") is not None
        ):
            seed = source.get("seed")
            return source.get("record_id"), None if seed is None else int(seed)
    return None, None


@functools.cache
def _agent_loop_class() -> type:
    try:
        from verl.experimental.agent_loop.agent_loop import (
            AgentLoopBase,
            AgentLoopOutput,
            register,
        )
        from verl.utils.profiler import simple_timer
    except ImportError as error:
        raise ImportError(
            "AmbiTabAgentLoop needs verl >= 0.9 (verl.experimental.agent_loop): "
            "pip install 'ambitab-gym[verl]' and pip install --no-deps verl"
        ) from error

    class AmbiTabAgentLoop(AgentLoopBase):
        """One AmbiTab episode per rollout, the env answering each asker turn.

        Args (beyond verl's): ``env_id``, ``env_kwargs``, ``prompt``, ``wrappers`` - the
        agent loop entry's options (see the module doc); ``name`` is verl's registry name.
        """

        def __init__(
            self,
            *args: Any,
            env_id: str = "AmbiTab-Bird-v0",
            env_kwargs: Mapping[str, Any] | None = None,
            prompt: str | None = None,
            wrappers: Sequence[WrapperSpec] = (),
            name: str | None = None,
            tools: Any = None,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.env_id = str(env_id)
            self.env_kwargs = dict(env_kwargs or {})
            self.prompt = prompt
            self.wrappers = list(wrappers or ())
            self.prompt_length = self.rollout_config.prompt_length
            self.response_length = self.rollout_config.response_length

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            """Play the row's episode; returns verl's ``AgentLoopOutput``."""
            record_id, seed = _record_of(kwargs)
            session = ChatSession(
                self.env_id, env_kwargs=self.env_kwargs, prompt=self.prompt, wrappers=self.wrappers
            )
            try:
                return await self._episode(session, record_id, seed, sampling_params)
            finally:
                session.close()

        async def _episode(
            self,
            session: ChatSession,
            record_id: str | None,
            seed: int | None,
            sampling_params: dict[str, Any],
        ) -> Any:
            messages: list[dict[str, Any]] = session.start(record_id=record_id, seed=seed)
            token_ids = await self.ct_build_initial_tokens(messages)
            response_mask: list[int] = []
            logprobs: list[float] | None = None
            turn_scores: list[float] = []
            metrics: dict[str, Any] = {}
            request_id = uuid4().hex
            turns = answered = 0
            while not session.done:
                with simple_timer("generate_sequences", metrics):
                    output = await self.server_manager.generate(
                        request_id=request_id, prompt_ids=token_ids, sampling_params=sampling_params
                    )
                turns += 1
                merged, response_mask, logprobs = await self.ct_merge_assistant_token(
                    token_ids,
                    output.token_ids,
                    response_mask,
                    logprobs if (logprobs or output.log_probs) else None,
                    assistant_logprobs=output.log_probs or None,
                )
                token_ids = merged.token_ids
                reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
                previous = [*messages, {"role": "assistant", "content": reply}]
                added, reward, done, _ = session.step(reply)
                turn_scores.append(reward)
                if done:
                    break
                if len(response_mask) >= self.response_length:
                    turn_scores[-1] += session.step(STOP)[1]  # out of room: a stop
                    break
                messages = [*previous, *added]
                answered += 1
                merged, response_mask, logprobs = await self.ct_merge_context_msg(
                    previous, messages, token_ids, response_mask, logprobs
                )
                token_ids = merged.token_ids
            n = len(response_mask)
            prompt_ids = token_ids[: len(token_ids) - n]
            return AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=token_ids[len(prompt_ids) :][: self.response_length],
                response_mask=response_mask[: self.response_length],
                response_logprobs=logprobs[: self.response_length] if logprobs else None,
                reward_score=session.reward,
                num_turns=1 + turns + answered,  # the opening, asker turns, env answers
                metrics=metrics,
                extra_fields={"turn_scores": turn_scores, "tool_rewards": []},
            )

    AmbiTabAgentLoop.__module__ = __name__
    AmbiTabAgentLoop.__qualname__ = "AmbiTabAgentLoop"
    return register(AGENT_NAME)(AmbiTabAgentLoop)


def __getattr__(name: str) -> Any:
    if name == "AmbiTabAgentLoop":
        return _agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
