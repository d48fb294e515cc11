"""Askers that prompt a trained checkpoint the way its trainer did, for ``ambitab-gym evaluate``.

``--asker llm:STRATEGY`` prompts a model with the paper's asking strategies (docs/llm.md) and
reads JSON actions. A model trained through the adapters of docs/training.md saw other
messages: the ``ChatMessages`` transcript (verl, verifiers, SkyRL), or TRL's tool prompt with
the ``ask`` and ``stop`` tools. These askers send the served model those same messages, so the
evaluation asks the policy that was trained:

* :class:`ChatAsker` - the ``ChatMessages`` transcript
  (:func:`ambitab_gym.wrappers.chat.chat_messages`: system prompt, then each question as an assistant turn and each answer as a user turn); the
  reply goes to the env as written, which reads it as the adapters' ``ChatSession`` did in
  training (a question, ``<STOP>``, or the JSON form).
* :class:`ToolAsker` - TRL's ``GRPOTrainer(environment_factory=...)`` transcript: the system
  prompt :data:`ambitab_gym.integrations.trl.TOOL_PROMPT`, the tools ``ask(question)`` and
  ``stop()`` (:data:`TOOLS`, the schemas TRL rendered from the environment's methods), each
  question as an assistant tool call and each answer as the tool's result. The request carries
  ``tools`` with ``tool_choice: "none"``, so the server renders the tools into the prompt as
  in training and returns the model's tool call as text (vLLM >= 0.10; no
  ``--enable-auto-tool-choice`` needed); the first ``<tool_call>`` of the reply is the action,
  and a reply without one is a stop, as ``trl_reward`` counts it.

``ambitab-gym evaluate`` loads them by import path, with the client of ``--llm-url`` and
``--model`` (put this folder on the path)::

    PYTHONPATH=examples ambitab-gym evaluate AmbiTab-Bird-v0 --split dev \\
        --asker trained_asker:ToolAsker --llm-url http://127.0.0.1:8000/v1 --model asker-grpo

Both read only the :class:`~ambitab_gym.trajectory.PublicView` the campaign gives the asker.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from ambitab_gym.actions import STOP
from ambitab_gym.integrations.trl import TOOL_PROMPT
from ambitab_gym.llm.sampling import EpisodeKey, current_episode, episode_scope
from ambitab_gym.trajectory import PublicView
from ambitab_gym.wrappers.chat import chat_messages

__all__ = ["TOOLS", "ChatAsker", "ToolAsker", "tool_action"]

#: The tools of :class:`ambitab_gym.integrations.trl.AmbiTabToolEnvironment` as TRL renders them
#: (``transformers.utils.get_json_schema`` of its ``ask`` and ``stop`` methods; a test checks it).
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "ask",
            "description": "Ask the user one clarifying question about the request.",
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": "The clarifying question, in plain language.",
                    }
                },
                "required": ["question"],
            },
            "return": {"type": "string", "description": "The user's answer."},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "stop",
            "description": "Stop asking questions because nothing is left to clarify.",
            "parameters": {"type": "object", "properties": {}},
            "return": {"type": "string", "description": "A confirmation."},
        },
    },
]

_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def tool_action(text: str) -> str:
    """The env action of a reply: the first ``<tool_call>`` (``ask`` -> its question, ``stop``
    -> ``STOP``); a reply without a readable call is a stop, as in TRL training.

    >>> tool_action('<tool_call>\\n{"name": "ask", "arguments": {"question": "Which year?"}}\\n</tool_call>')
    'Which year?'
    >>> tool_action('<tool_call>\\n{"name": "stop", "arguments": {}}\\n</tool_call>'), tool_action("Done.")
    ('<STOP>', '<STOP>')
    """
    for match in _TOOL_CALL.finditer(text or ""):
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        arguments = call.get("arguments") or {}
        if isinstance(arguments, str):  # some templates write the arguments as a JSON string
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        if call.get("name") == "ask" and isinstance(arguments, dict):
            question = str(arguments.get("question") or "").strip()
            if question:
                return question
        if call.get("name") == "stop":
            return STOP
    return STOP


class _ServedAsker:
    """What both askers share: the client, the episode seed, blocking and async ``act``.

    ``prompt``: the system-message template of training (``{task}``, ``{budget}``, ``{stop}``),
    if it was not the adapter's default; set it on a subclass to load that by import path.
    """

    tag = "asker:trained"
    prompt: str | None = None

    def __init__(self, llm_client: Any = None, *, prompt: str | None = None) -> None:
        if llm_client is None:
            raise ValueError(
                f"{type(self).__name__} asks a served model: pass --llm-url and --model"
            )
        self.client = llm_client
        if prompt is not None:
            self.prompt = prompt
        self.sampling = llm_client.sampling["asker"]
        self.episode_seed: int | None = None

    def reset(self, *, seed: int | None = None) -> None:
        if seed is not None:
            self.episode_seed = int(seed)

    def messages(self, view: PublicView) -> list[dict[str, Any]]:
        raise NotImplementedError

    def request(self) -> dict[str, Any]:
        return {}

    def action(self, text: str) -> str:
        return text

    async def aact(self, view: PublicView) -> str:
        if view.phase != "ask" or view.questions_left <= 0:
            return STOP
        scope: Any = contextlib.nullcontext()
        if current_episode() is None and self.episode_seed is not None:
            scope = episode_scope(EpisodeKey(seed=self.episode_seed))
        with scope:
            result = await self.client.achat(
                self.messages(view),
                tag=self.tag,
                role="asker",
                turn=len(view.dialogue),
                sampling=self.sampling,
                **self.request(),
            )
        return self.action(result.text)

    def act(self, view: PublicView) -> str:
        return self.client.run_sync(self.aact(view))

    def _system(self, view: PublicView, template: str | None) -> str | None:
        if template is None:
            return None
        budget = view.questions_left + len(view.dialogue)  # as ChatMessages states it
        return template.format(task=view.render_task(), budget=budget, stop=STOP)


class ChatAsker(_ServedAsker):
    """The ``ChatMessages`` transcript (verl, verifiers and SkyRL training); the reply is the
    action as written."""

    tag = "asker:chat"

    def messages(self, view: PublicView) -> list[dict[str, Any]]:
        return chat_messages(view, prompt=self._system(view, self.prompt))


class ToolAsker(_ServedAsker):
    """TRL's tool-calling transcript (``GRPOTrainer(environment_factory=...)`` training)."""

    tag = "asker:tools"

    def messages(self, view: PublicView) -> list[dict[str, Any]]:
        system = self._system(view, self.prompt or TOOL_PROMPT)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for i, turn in enumerate(view.dialogue):
            call_id = f"call_{i}"
            arguments = json.dumps({"question": turn.question}, ensure_ascii=False)
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "ask", "arguments": arguments},
                        }
                    ],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": "ask", "content": turn.answer}
            )
        return messages

    def request(self) -> dict[str, Any]:
        return {"tools": TOOLS, "tool_choice": "none"}

    def action(self, text: str) -> str:
        return tool_action(text)
