"""TRL adapter: AmbiTab for ``GRPOTrainer(environment_factory=...)`` (TRL >= 1.16).

TRL's environment contract (``GRPOTrainer``'s ``environment_factory`` argument): a class whose
``__init__`` takes no argument; ``reset(**kwargs)`` receives the dataset row's columns and
returns an observation string or ``None``; every other public method is a tool whose docstring
documents its ``Args:``, offered to the model through the chat template's tool-calling format;
reward functions receive the instances as ``environments``. ``tests/test_trainers_real.py``
runs a few GRPO steps of the installed TRL on CPU with a tiny local model whose tool calls reach
these methods, and checks every logged reward against the raw env.

* :class:`AmbiTabToolEnvironment` - the environment class: tools ``ask(question)`` and
  ``stop()``; ``reward`` holds the episode's reward once it is over.
* :func:`trl_environment_factory` - a subclass bound to an env id and env options (TRL calls
  the class without arguments).
* :func:`trl_dataset` - one row per record: ``prompt`` (system message with tool
  instructions and the task) and ``record_id`` (passed to ``reset``).
* :func:`trl_reward` - the reward function: ends each episode that is still open (a reply
  without a tool call is a stop) and returns the rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ambitab_gym.actions import STOP
from ambitab_gym.integrations.common import ChatSession, WrapperSpec

__all__ = [
    "TOOL_PROMPT",
    "AmbiTabToolEnvironment",
    "trl_dataset",
    "trl_environment_factory",
    "trl_reward",
]

#: The system message for tool-calling askers (``{task}``, ``{budget}``, ``{stop}`` filled in).
TOOL_PROMPT = """\
You are a data analyst. A user wants an answer from the database described below, but the \
request may leave things open that change which query is right. Use the `ask` tool to put one \
clarifying question to the user at a time; you may ask at most {budget}. Ask only about things \
that would change the query. When you have nothing left to ask, call the `stop` tool (or reply \
without calling a tool).

{task}"""


class AmbiTabToolEnvironment:
    """One AmbiTab episode per rollout, driven through tool calls.

    Example:
        >>> env = AmbiTabToolEnvironment()
        >>> env.reset(record_id="bird-0014") is None
        True
        >>> env.ask('What do you mean by "recently"?') != ""
        True
        >>> env.stop(), env.done, env.reward
        ('Stopped asking.', True, 1.0)
    """

    env_id: str = "AmbiTab-Bird-v0"
    env_kwargs: dict[str, Any] = {}  # replaced per subclass, never mutated
    wrappers: tuple[WrapperSpec, ...] = ()  # below the chat layer, innermost first

    def __init__(self) -> None:
        self._session = ChatSession(
            self.env_id, env_kwargs=dict(self.env_kwargs), wrappers=self.wrappers
        )
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs: Any) -> str | None:
        """Start the episode of the row's ``record_id`` (or of a record drawn with ``seed``).

        The task is already in the row's prompt, so nothing is added to it.
        """
        self._session.start(record_id=kwargs.get("record_id"), seed=kwargs.get("seed"))
        self.reward = 0.0
        self.done = False
        return None

    def _send(self, text: str) -> str:
        added, _, done, _ = self._session.step(text)
        self.done = done
        self.reward = self._session.reward
        return "\n\n".join(m["content"] for m in added)

    def ask(self, question: str) -> str:
        """Ask the user one clarifying question about the request.

        Args:
            question: The clarifying question, in plain language.

        Returns:
            The user's answer.
        """
        if self.done:
            raise ValueError("Asking is over: no more questions can be asked.")
        answer = self._send(question)
        if self.done and not answer:
            return "(The question budget is spent: no more questions can be asked.)"
        return answer

    def stop(self) -> str:
        """Stop asking questions because nothing is left to clarify.

        Returns:
            A confirmation.
        """
        if not self.done:
            self._send(STOP)
        return "Stopped asking."

    def _finish(self) -> float:
        """End an open episode as a stop and return its reward."""
        if not self.done:
            self._send(STOP)
        return self.reward


def trl_environment_factory(
    env_id: str = "AmbiTab-Bird-v0", *, wrappers: Sequence[WrapperSpec] = (), **env_kwargs: Any
) -> type[AmbiTabToolEnvironment]:
    """An :class:`AmbiTabToolEnvironment` subclass for ``env_id`` and ``env_kwargs``.

    Args:
        env_id: a registered AmbiTab id.
        wrappers: wrappers below the chat layer, innermost first (pass the same to
            :func:`trl_dataset`: the task the model reads is in the dataset's prompt).
        **env_kwargs: env options (``split="train"``, ``reward="question_f1"``, ...).

    >>> Env = trl_environment_factory("AmbiTab-Bird-v0", split="dev")
    >>> Env().reset(record_id="bird-0049") is None
    True
    """
    return type(
        "AmbiTabToolEnvironment",
        (AmbiTabToolEnvironment,),
        {
            "env_id": env_id,
            "env_kwargs": dict(env_kwargs),
            "wrappers": tuple(wrappers),
            "__module__": __name__,
        },
    )


def trl_dataset(
    env_id: str = "AmbiTab-Bird-v0", *, wrappers: Sequence[WrapperSpec] = (), **env_kwargs: Any
) -> list[dict[str, Any]]:
    """One TRL row per record: ``prompt`` (conversational) and ``record_id``.

    Use ``datasets.Dataset.from_list(rows)`` as the trainer's ``train_dataset``. The prompt is
    the opening transcript of the agent's view of the wrapper stack (``wrappers`` below the
    chat layer, innermost first), so the rows and :func:`trl_environment_factory` must be given
    the same wrappers.

    >>> row = trl_dataset("AmbiTab-Bird-v0", split="dev")[0]
    >>> sorted(row), row["prompt"][0]["role"]
    (['prompt', 'record_id'], 'system')
    """
    session = ChatSession(env_id, env_kwargs=env_kwargs, prompt=TOOL_PROMPT, wrappers=wrappers)
    try:
        return [
            {"prompt": session.start(record_id=record_id), "record_id": record_id}
            for record_id in session.record_ids
        ]
    finally:
        session.close()


def trl_reward(environments: list[AmbiTabToolEnvironment], **kwargs: Any) -> list[float]:
    """Reward function for ``GRPOTrainer``: the episodes' rewards (open ones end as a stop).

    Args:
        environments: the trainer's environment instances, one per completion.
        **kwargs: the trainer's other reward arguments (ignored).
    """
    return [environment._finish() for environment in environments]
