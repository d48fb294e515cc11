"""verifiers adapter: AmbiTab as a verifiers environment (verifiers >= 0.4, ``verifiers.v1``).

verifiers 0.4 composes an environment from a *taskset* (config in, typed tasks out) and an
``Env`` whose ``async run(task, agents)`` is the episode's control flow: it opens an
``agents.<role>.interaction(task)``, takes the model's replies with ``await interaction.turn()``
and answers them as the run's user, and records rewards on ``interaction.trace`` (the pattern of
verifiers' own TextArena taskset, "the game engine playing the user"). Here the AmbiTab env is
the user: each reply is the asker's action, the env's messages are the next user turn, and the
episode's reward is recorded as ``question_f1`` (or the env's ``reward=`` choice) once asking ends.

* :class:`AmbiTabTaskset`, :class:`AmbiTabTasksetConfig`, :class:`AmbiTabTask`,
  :class:`AmbiTabData` - one task per record: ``prompt`` is the opening transcript (the
  system message with the task), ``info`` holds ``record_id``.
* :class:`AmbiTabVerifiersEnv`, :class:`AmbiTabEnvConfig` - the ``vf.Env`` (agent role
  ``asker``).
* :func:`load_environment` - the env for an AmbiTab id and split. verifiers resolves taskset ids
  to top-level modules: the plugin id :data:`TASKSET_ID` is ``examples/ambitab_verifiers.py``,
  which re-exports these classes.
* :func:`play_episode` - the episode loop on any object with an ``async turn()`` returning
  ``Segment``-like replies (``last_reply``, ``terminated``); ``AmbiTabVerifiersEnv.run`` uses it.
* :class:`AmbiTabProtocol` and :func:`verifiers_dataset` - the step-by-step protocol of
  verifiers 0.1.x's ``MultiTurnEnv`` (``setup_state``/``env_response``/stop condition/rubric
  function), with no dependency on verifiers, for rollout loops of that shape.

The verifiers classes are built on first use (importing ``verifiers.v1`` takes seconds), so
this module imports without verifiers installed.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from ambitab_gym.integrations.common import ChatSession, WrapperSpec

__all__ = [
    "TASKSET_ID",
    "AmbiTabData",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabEnvConfig",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabProtocol",
    "AmbiTabTask",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabTaskset",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabTasksetConfig",  # noqa: F822 - built on first use (module __getattr__)
    "AmbiTabVerifiersEnv",  # noqa: F822 - built on first use (module __getattr__)
    "load_environment",
    "play_episode",
    "verifiers_dataset",
]

State = dict[str, Any]
Messages = list[dict[str, Any]]

#: The verifiers plugin id of the AmbiTab taskset and env: verifiers imports a taskset id as a
#: top-level module, so the id names ``examples/ambitab_verifiers.py`` (a module that re-exports
#: :class:`AmbiTabTaskset` and :class:`AmbiTabVerifiersEnv`; put its folder on the path for
#: ``vf-eval``). In Python, :func:`load_environment` needs no path: where no such module can be
#: imported, this module stands in for it (see :func:`_register_plugin`).
TASKSET_ID = "ambitab_verifiers"

_LAZY = (
    "AmbiTabData",
    "AmbiTabEnvConfig",
    "AmbiTabTask",
    "AmbiTabTaskset",
    "AmbiTabTasksetConfig",
    "AmbiTabVerifiersEnv",
)


async def play_episode(session: ChatSession, interaction: Any) -> float:
    """Play one started AmbiTab episode through a verifiers-style ``interaction``.

    The task's prompt speaks first, so the first turn is a bare ``turn()``; every reply
    (``segment.last_reply``) is the asker's action and the env's new messages are the next
    user turn, until the episode ends or the interaction terminates (an unanswered episode
    then ends as a stop, as when a model stops replying).

    Returns:
        the episode's reward (the raw env's, summed over steps).

    >>> import asyncio
    >>> from types import SimpleNamespace
    >>> class Scripted:
    ...     def __init__(self, replies):
    ...         self.replies = iter(replies)
    ...     async def turn(self, message=None):
    ...         return SimpleNamespace(last_reply=next(self.replies), terminated=False)
    >>> session = ChatSession("AmbiTab-Bird-v0")
    >>> _ = session.start(record_id="bird-0014")
    >>> asyncio.run(play_episode(session, Scripted(['What is "recently"?', "<STOP>"])))
    1.0
    """
    from ambitab_gym.actions import STOP

    segment = await interaction.turn()
    while not session.done:
        if segment.terminated:
            session.step(STOP)
            break
        added, _, done, _ = session.step(segment.last_reply)
        if done:
            break
        segment = await interaction.turn("\n\n".join(m["content"] for m in added))
    return session.reward


def _register_plugin() -> None:
    """Make the plugin id :data:`TASKSET_ID` importable in this process.

    verifiers resolves a taskset id with ``importlib.import_module(TASKSET_ID)``. When nothing
    of that name is on the path (``examples/`` is not, outside ``PYTHONPATH=examples``), this
    module is entered under that name: its ``__all__`` exports exactly one ``Taskset`` and one
    ``Env`` subclass, as verifiers asks of a plugin module. A module of that name on the path
    (the ``examples/`` copy) is left to verifiers.
    """
    if TASKSET_ID not in sys.modules and importlib.util.find_spec(TASKSET_ID) is None:
        sys.modules[TASKSET_ID] = sys.modules[__name__]


@functools.cache
def _verifiers_classes() -> dict[str, type]:
    _register_plugin()
    try:
        import verifiers.v1 as vf
    except ImportError as error:
        raise ImportError(
            "the verifiers environment needs verifiers >= 0.4: pip install 'ambitab-gym[verifiers]'"
        ) from error

    class AmbiTabTasksetConfig(vf.TasksetConfig):
        """Which AmbiTab records the taskset serves, and how their env is built."""

        id: str = TASKSET_ID
        env_id: str = "AmbiTab-Bird-v0"
        split: str | None = "train"
        env_kwargs: dict[str, Any] = {}
        prompt: str | None = None
        wrappers: list[str] = []

        def session(self) -> ChatSession:
            """A chat session over this config's env."""
            return ChatSession(
                self.env_id,
                env_kwargs={**self.env_kwargs, "split": self.split},
                prompt=self.prompt,
                wrappers=list(self.wrappers),
            )

    class AmbiTabData(vf.TaskData):
        info: dict[str, Any] = {}
        """``record_id``: the record the env replays."""

    class AmbiTabTask(vf.Task[AmbiTabData, vf.State, vf.TaskConfig]):
        pass

    class AmbiTabTaskset(vf.Taskset[AmbiTabTask, AmbiTabTasksetConfig]):
        """One task per record; the prompt is the opening transcript of the agent's view."""

        def load(self):
            session = self.config.session()
            try:
                for record_id in session.record_ids:
                    opening = session.start(record_id=record_id)
                    yield AmbiTabTask(
                        AmbiTabData(
                            id=record_id,
                            name=record_id,
                            prompt=opening,
                            info={"record_id": record_id},
                        ),
                        self.config.task,
                    )
            finally:
                session.close()

    class AmbiTabEnvConfig(vf.EnvConfig):
        asker: vf.AgentConfig = vf.AgentConfig()
        reward_name: str = "question_f1"
        """The name the env's reward is recorded under on the asker's trace."""

    class AmbiTabVerifiersEnv(vf.Env[AmbiTabEnvConfig]):
        """The AmbiTab env as the user of the asker's interaction (host-side, in scope)."""

        async def run(self, task, agents):
            config = self.taskset.config
            session = config.session()
            try:
                session.start(record_id=task.data.info["record_id"])
                async with agents.asker.interaction(task) as interaction:
                    reward = await play_episode(session, interaction)
                trace = interaction.trace
                trace.record_reward(self.config.reward_name, reward, 1.0)
                trace.info["ambitab"] = {
                    key: session.info[key]
                    for key in ("questions_asked", "stop_reason")
                    if key in session.info
                }
            finally:
                session.close()

    classes = {
        "AmbiTabData": AmbiTabData,
        "AmbiTabEnvConfig": AmbiTabEnvConfig,
        "AmbiTabTask": AmbiTabTask,
        "AmbiTabTaskset": AmbiTabTaskset,
        "AmbiTabTasksetConfig": AmbiTabTasksetConfig,
        "AmbiTabVerifiersEnv": AmbiTabVerifiersEnv,
    }
    for name, cls in classes.items():
        cls.__module__ = __name__
        cls.__qualname__ = name
    return classes


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _verifiers_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_environment(
    env_id: str = "AmbiTab-Bird-v0",
    *,
    split: str | None = "train",
    prompt: str | None = None,
    wrappers: Sequence[str] = (),
    **env_kwargs: Any,
) -> Any:
    """An :class:`AmbiTabVerifiersEnv` over an AmbiTab corpus (needs verifiers >= 0.4).

    Args:
        env_id: a registered AmbiTab id.
        split: the records to serve.
        prompt: a system-message template (see :class:`~ambitab_gym.wrappers.ChatMessages`).
        wrappers: ``"module:callable"`` wrappers below the chat layer, innermost first.
        **env_kwargs: further env options (``mode``, ``reward``, ...).
    """
    classes = _verifiers_classes()
    _register_plugin()  # again: a caller may have dropped it from sys.modules since
    taskset = classes["AmbiTabTasksetConfig"](
        env_id=env_id, split=split, prompt=prompt, wrappers=list(wrappers), env_kwargs=env_kwargs
    )
    return classes["AmbiTabVerifiersEnv"](classes["AmbiTabEnvConfig"](taskset=taskset))


class AmbiTabProtocol:
    """verifiers 0.1.x ``MultiTurnEnv`` protocol methods over AmbiTab episodes (one env per state).

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
