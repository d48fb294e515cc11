"""verifiers adapter: AmbiTab as a ``MultiTurnEnv``-style environment.

The protocol follows ``verifiers/envs/multiturn_env.py`` of verifiers 0.1.x: ``async
setup_state(state)``, ``async env_response(messages, state, **kwargs) -> Messages``, stop
conditions ``async (state) -> bool`` decorated with ``vf.stop``, termination signalled by
``state["final_env_response"]``, and rubric reward functions ``async (state, **kwargs)``.
(verifiers 0.4 replaced this API with ``verifiers.v1``; these methods still describe one
rollout step by step and port directly.)

* :class:`AmbiTabProtocol` - the protocol methods, with no dependency on verifiers; each rollout
  keeps its episode in ``state["ambitab"]``. The record comes from ``state["info"]["record_id"]``.
* :func:`verifiers_dataset` - rows with ``prompt`` and ``info.record_id`` (the dataset columns
  verifiers reads).
* :func:`load_environment` - the ``vf.MultiTurnEnv`` subclass with dataset and rubric, for
  verifiers 0.1.x installs (``vf-eval``/``prime`` load environments through this function).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ambitab_gym.integrations.common import ChatSession, WrapperSpec

__all__ = ["AmbiTabProtocol", "load_environment", "verifiers_dataset"]

State = dict[str, Any]
Messages = list[dict[str, Any]]


class AmbiTabProtocol:
    """``MultiTurnEnv`` protocol methods over AmbiTab episodes (one env per rollout state).

    Args:
        env_id: a registered AmbiTab id.
        env_kwargs: env options (``split``, ``mode``, ``reward``, ...).
        prompt: a system-message template (see :class:`~ambitab_gym.wrappers.ChatMessages`).
        wrappers: wrappers below the chat layer, innermost first (see
            :func:`~ambitab_gym.integrations.common.apply_wrappers`).

    Example:
        >>> import asyncio
        >>> protocol = AmbiTabProtocol()
        >>> async def episode():
        ...     state = {"info": {"record_id": "bird-0014"}, "prompt": []}
        ...     state = await protocol.setup_state(state)
        ...     ask = [{"role": "assistant", "content": 'What is "recently"?'}]
        ...     answer = await protocol.env_response(ask, state)
        ...     stop = [{"role": "assistant", "content": "<STOP>"}]
        ...     await protocol.env_response(ask + answer + stop, state)
        ...     return await protocol.episode_over(state), await protocol.question_f1(state)
        >>> asyncio.run(episode())
        (True, 1.0)
    """

    def __init__(
        self,
        env_id: str = "AmbiTab-Bird-v0",
        *,
        env_kwargs: dict[str, Any] | None = None,
        prompt: str | None = None,
        wrappers: Sequence[WrapperSpec] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ambitab_env_id = env_id
        self.ambitab_env_kwargs = dict(env_kwargs or {})
        self.ambitab_prompt = prompt
        self.ambitab_wrappers = tuple(wrappers)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Start the rollout's episode; ``state["prompt"]`` gets the opening transcript."""
        info = state.get("info") or {}
        session = ChatSession(
            self.ambitab_env_id,
            env_kwargs=self.ambitab_env_kwargs,
            prompt=self.ambitab_prompt,
            wrappers=self.ambitab_wrappers,
        )
        state["prompt"] = session.start(record_id=info.get("record_id"), seed=info.get("seed"))
        state["ambitab"] = session
        return state

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        """Answer the last assistant message; set ``final_env_response`` when it ends."""
        session: ChatSession = state["ambitab"]
        if session.done:
            state.setdefault("final_env_response", [])
            return []
        content = ""
        for message in reversed(messages):
            if message.get("role") == "assistant":
                content = str(message.get("content") or "")
                break
        added, _, done, _ = session.step(content)
        if done:
            state["final_env_response"] = added
            state["ambitab_reward"] = session.reward
            session.close()
        return added

    async def episode_over(self, state: State, **kwargs: Any) -> bool:
        """Stop condition: the AmbiTab episode has ended."""
        session = state.get("ambitab")
        return session is not None and session.done

    async def question_f1(self, state: State, **kwargs: Any) -> float:
        """Rubric function: the env's reward (question-F1 by default) of the finished episode."""
        session = state.get("ambitab")
        if session is None or not session.done:
            return 0.0
        return float(state.get("ambitab_reward", session.reward))


def verifiers_dataset(
    env_id: str = "AmbiTab-Bird-v0", *, wrappers: Sequence[WrapperSpec] = (), **env_kwargs: Any
) -> list[dict[str, Any]]:
    """Rows with ``prompt`` (the opening transcript of the agent's view) and ``info.record_id``.

    >>> row = verifiers_dataset("AmbiTab-Bird-v0", split="dev")[0]
    >>> sorted(row), sorted(row["info"])
    (['answer', 'info', 'prompt'], ['record_id'])
    """
    session = ChatSession(env_id, env_kwargs=env_kwargs, wrappers=wrappers)
    try:
        return [
            {"prompt": session.start(record_id=r), "answer": "", "info": {"record_id": r}}
            for r in session.record_ids
        ]
    finally:
        session.close()


def load_environment(
    env_id: str = "AmbiTab-Bird-v0",
    *,
    split: str | None = "train",
    wrappers: Sequence[WrapperSpec] = (),
    **env_kwargs: Any,
) -> Any:
    """A verifiers 0.1.x ``MultiTurnEnv`` over an AmbiTab corpus (needs verifiers and datasets).

    Args:
        env_id: a registered AmbiTab id.
        split: the records to serve.
        wrappers: wrappers below the chat layer, innermost first.
        **env_kwargs: further env options.
    """
    try:
        import verifiers as vf
        from datasets import Dataset
    except ImportError as error:
        raise ImportError(
            "load_environment needs verifiers 0.1.x and datasets: "
            'pip install "verifiers<0.2" datasets'
        ) from error
    if not hasattr(vf, "MultiTurnEnv") or not hasattr(vf, "stop"):
        raise ImportError(
            "this verifiers has no MultiTurnEnv/vf.stop (verifiers >= 0.2 moved to verifiers.v1);"
            " install verifiers<0.2 or drive AmbiTabProtocol from your own rollout loop"
        )
    options = {**env_kwargs, "split": split}

    class AmbiTabVerifiersEnv(AmbiTabProtocol, vf.MultiTurnEnv):
        @vf.stop
        async def episode_over(self, state: State, **kwargs: Any) -> bool:
            return await AmbiTabProtocol.episode_over(self, state, **kwargs)

    protocol = AmbiTabProtocol(env_id, env_kwargs=options, wrappers=wrappers)
    rubric = vf.Rubric(funcs=[protocol.question_f1], weights=[1.0])
    return AmbiTabVerifiersEnv(
        env_id,
        env_kwargs=options,
        wrappers=wrappers,
        dataset=Dataset.from_list(verifiers_dataset(env_id, wrappers=wrappers, **options)),
        rubric=rubric,
    )
