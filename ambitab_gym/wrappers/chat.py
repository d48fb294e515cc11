"""Chat-message observations for LLM askers and LLM trainers.

* :class:`ChatSpace` - a space of chat transcripts: lists of ``{"role", "content"}`` dicts.
* :func:`system_prompt` and :func:`chat_messages` - the transcript of a public view: a system
  message with the instructions and the task, then the dialogue as assistant (question) and user
  (answer) turns, and - in the SQL phase - a user message asking for the query.
* :class:`ChatMessages` - a Gymnasium wrapper whose observations are such transcripts; ``step``
  takes the assistant's text as the model wrote it (a question, ``STOP``, or the JSON form, with
  or without ``<think>`` blocks and Markdown fences), read by the env with the one reply reader
  :func:`ambitab_gym.actions.read_reply` (``info["reply_read"]`` says how).

The transcript is a function of the :class:`~ambitab_gym.trajectory.PublicView` only, taken
from the wrapper stack (:func:`~ambitab_gym.wrappers.stack.agent_view`), never from
``env.unwrapped``: under a ``SpecificationRandomization`` the system message holds x'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Space

from ambitab_gym.actions import STOP
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.spaces import UnicodeText
from ambitab_gym.trajectory import PublicView
from ambitab_gym.wrappers.stack import AgentInterface, agent_view, check_agent_interface

__all__ = [
    "ROLES",
    "SQL_REQUEST",
    "ChatMessages",
    "ChatSpace",
    "chat_messages",
    "new_messages",
    "system_prompt",
]

#: Roles a transcript may hold.
ROLES = ("system", "user", "assistant")

_INSTRUCTIONS = """\
You are a data analyst. A user wants an answer from the database described below, but the \
request may leave things open that change which query is right. Before any SQL is written, you \
may ask the user clarifying questions.

Rules:
- Reply with one clarifying question per message, or with {stop} when you have nothing left \
to ask.
- Ask only about things that would change the query; do not repeat a question.
- You may ask at most {budget} question{plural}.
- A JSON reply also works: {{"type": "clarification", "output": "<question>"}} to ask, \
{{"type": "done", "output": ""}} to stop.

{task}"""

#: The user message that opens the SQL phase (``mode="agent"``).
SQL_REQUEST = (
    "Thanks, that is all from me. Now write one SQLite-compatible SQL query that answers my "
    "request. Reply with the SQL only."
)


def system_prompt(view: PublicView, *, budget: int | None = None) -> str:
    """The system message: instructions, the question budget and the task.

    Args:
        view: the agent's view (its spec is rendered).
        budget: the question budget to state (default: ``view.questions_left`` plus the
            questions already asked).

    >>> from ambitab_gym.records import PublicSpec
    >>> view = PublicView(PublicSpec(request="Top sellers?", database="shop"), questions_left=3)
    >>> print(system_prompt(view).splitlines()[-3])
    Request: Top sellers?
    """
    if budget is None:
        budget = view.questions_left + len(view.dialogue)
    return _INSTRUCTIONS.format(
        stop=STOP, budget=budget, plural="" if budget == 1 else "s", task=view.render_task()
    )


def chat_messages(
    view: PublicView, *, prompt: str | None = None, sql_request: str = SQL_REQUEST
) -> list[dict[str, str]]:
    """The transcript of a view: system prompt, then question/answer turns.

    Args:
        view: the agent's view.
        prompt: the system message (default :func:`system_prompt` of the view).
        sql_request: the user message appended in the SQL phase.

    Returns:
        a list of ``{"role", "content"}`` dicts.

    >>> from ambitab_gym.records import PublicSpec
    >>> from ambitab_gym.trajectory import DialogueTurn
    >>> view = PublicView(PublicSpec(request="Top sellers?", database="shop"),
    ...                   (DialogueTurn("Top how many?", "Five."),), questions_left=2)
    >>> [(m["role"], m["content"]) for m in chat_messages(view)[1:]]
    [('assistant', 'Top how many?'), ('user', 'Five.')]
    """
    messages = [
        {"role": "system", "content": prompt if prompt is not None else system_prompt(view)}
    ]
    for turn in view.dialogue:
        messages.append({"role": "assistant", "content": turn.question})
        messages.append({"role": "user", "content": turn.answer})
    if view.phase == "sql":
        messages.append({"role": "user", "content": sql_request})
    return messages


def new_messages(
    before: Sequence[dict[str, str]], after: Sequence[dict[str, str]]
) -> list[dict[str, str]]:
    """What the environment added between two transcripts (the assistant's own turn left out).

    LLM trainers append the model's reply themselves and want only the environment's messages
    that follow it: the answer to a question, or the SQL request after a stop.

    >>> before = [{"role": "system", "content": "s"}]
    >>> after = before + [{"role": "assistant", "content": "q"}, {"role": "user", "content": "a"}]
    >>> new_messages(before, after)
    [{'role': 'user', 'content': 'a'}]
    """
    return [dict(m) for m in after[len(before) :] if m["role"] != "assistant"]


class ChatSpace(Space[list]):
    """Chat transcripts: lists of at most ``max_messages`` ``{"role", "content"}`` dicts.

    Args:
        max_messages: the longest transcript.
        max_length: the longest message content.
        seed: seeds ``sample()``.

    Example:
        >>> space = ChatSpace(max_messages=4, seed=0)
        >>> space.contains([{"role": "system", "content": "Hi"}])
        True
        >>> space.contains([{"role": "robot", "content": "Hi"}]), space.contains("Hi")
        (False, False)
        >>> space.contains(space.sample())
        True
    """

    def __init__(
        self,
        max_messages: int = 64,
        *,
        max_length: int = 1_000_000,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if max_messages < 1:
            raise ConfigurationError("max_messages must be at least 1")
        self.max_messages = int(max_messages)
        self.max_length = int(max_length)
        self._text = UnicodeText(max_length=max_length, max_sample_length=32)
        super().__init__(dtype=object, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> list[int]:
        seeds = super().seed(seed)
        self._text.seed(int(self.np_random.integers(2**31)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        """A random transcript: a system message, then alternating assistant/user messages."""
        if mask is not None or probability is not None:
            raise NotImplementedError("ChatSpace.sample does not take a mask or probability")
        length = int(self.np_random.integers(1, self.max_messages + 1))
        roles = ["system"] + ["assistant" if i % 2 == 0 else "user" for i in range(length - 1)]
        return [{"role": role, "content": self._text.sample()} for role in roles]

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        for message in x:
            if not isinstance(message, dict) or set(message) != {"role", "content"}:
                return False
            if message["role"] not in ROLES:
                return False
            content = message["content"]
            if not isinstance(content, str) or len(content) > self.max_length:
                return False
        return True

    def to_jsonable(self, sample_n: Sequence[list]) -> list[list]:
        return [list(sample) for sample in sample_n]

    def from_jsonable(self, sample_n: Sequence[list]) -> list[list]:
        return [list(sample) for sample in sample_n]

    def __repr__(self) -> str:
        return f"ChatSpace(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ChatSpace)
            and self.max_messages == other.max_messages
            and self.max_length == other.max_length
        )


class ChatMessages(AgentInterface, gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Observations as chat messages; actions as the assistant's text.

    The observation is :func:`chat_messages` of the agent's view as the stack below presents it
    (system prompt with the instructions and the task, then the dialogue as assistant/user
    turns): with a ``SpecificationRandomization`` below, the task is x'. ``step`` takes the
    assistant's reply unchanged: a question, ``STOP``, the JSON form, or - in the SQL phase of
    ``mode="agent"`` - the SQL; the env reads it with :func:`ambitab_gym.actions.read_reply`
    (reasoning blocks dropped, fences unwrapped, prose ending in ``<STOP>`` is a stop), and the
    transcript shows the question as read.

    Args:
        env: an AmbiTab env (possibly wrapped by leakage or Gymnasium wrappers, not by another
            agent-side wrapper).
        prompt: a fixed system message to use instead of :func:`system_prompt`; ``{task}``,
            ``{budget}`` and ``{stop}`` in it are filled in.
        sql_request: the user message that opens the SQL phase.

    Raises:
        StackOrderError: when ``env`` already holds an agent-side wrapper.

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> from ambitab_gym.wrappers import SpecificationRandomization
        >>> env = ChatMessages(gym.make("AmbiTab-Bird-v0"))
        >>> messages, info = env.reset(seed=0)
        >>> messages[0]["role"], len(messages)
        ('system', 1)
        >>> messages, reward, terminated, truncated, info = env.step("What do you mean by top?")
        >>> [m["role"] for m in messages]
        ['system', 'assistant', 'user']
        >>> messages, *_, info = env.step("<think>Ask about the year.</think>Which year?")
        >>> messages[-2]["content"], info["reply_read"]
        ('Which year?', 'question')
        >>> *_, terminated, truncated, info = env.step("That is all I need. <STOP>")
        >>> terminated, info["reply_read"]
        (True, 'stop')
        >>> randomized = ChatMessages(SpecificationRandomization(gym.make("AmbiTab-Bird-v0")))
        >>> messages, info = randomized.reset(seed=0)
        >>> randomized.unwrapped.public_view.render_task() in messages[0]["content"]
        False
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        prompt: str | None = None,
        sql_request: str = SQL_REQUEST,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, prompt=prompt, sql_request=sql_request)
        gym.ObservationWrapper.__init__(self, env)
        check_agent_interface(env, "ChatMessages")
        self.prompt = prompt
        self.sql_request = sql_request
        budget = env.get_wrapper_attr("max_questions")
        max_questions = max(budget(r) for r in env.get_wrapper_attr("records"))
        self.observation_space = ChatSpace(max_messages=2 * max_questions + 2)
        self._system: str | None = None

    def _system_message(self, view: PublicView) -> str:
        if self.prompt is None:
            return system_prompt(view)
        budget = view.questions_left + len(view.dialogue)
        return self.prompt.format(task=view.render_task(), budget=budget, stop=STOP)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, str]], dict[str, Any]]:
        self._system = None
        return super().reset(seed=seed, options=options)

    def observation(self, observation: Any) -> list[dict[str, str]]:
        view = agent_view(self.env)
        if self._system is None:  # fixed for the episode: the budget stated at the start
            self._system = self._system_message(view)
        return chat_messages(view, prompt=self._system, sql_request=self.sql_request)
