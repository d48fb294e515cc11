"""verl adapter: AmbiTab as a verl multi-turn ``BaseInteraction`` (the simulated user).

* :class:`AmbiTabInteraction` - ``start_interaction``, ``generate_response``,
  ``calculate_score`` and ``finalize_interaction`` (all ``async``) as verl's
  ``verl/interactions/base.py`` defines them. It subclasses verl's ``BaseInteraction`` when
  verl is installed, and a stand-in with the same interface otherwise.
* :func:`verl_dataset` - one row per record: ``prompt`` (the opening transcript) and
  ``extra_info.interaction_kwargs`` (``name`` and ``record_id``), as verl's multi-turn
  datasets carry them.

Interaction config (the ``config`` of the interaction YAML entry): ``env_id`` (default
``AmbiTab-Bird-v0``), ``env_kwargs`` (``split``, ``mode``, ``reward``, ...), ``prompt``,
``wrappers`` (below the chat layer, innermost first: ``"module:callable"`` paths or callables).
``generate_response`` reads the model's last assistant message, replies with the env's next
message(s), and pays the episode's reward on the turn that ends it (0 before), so the turn
scores sum to the raw env's reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from ambitab_gym.integrations.common import ChatSession, WrapperSpec

__all__ = ["INTERACTION_NAME", "AmbiTabInteraction", "verl_dataset"]

#: The interaction name the dataset rows and the YAML config use.
INTERACTION_NAME = "ambitab"

try:  # the real base class when verl is installed
    from verl.interactions.base import BaseInteraction as _Base

    HAVE_VERL = True
except ImportError:  # a stand-in with the interface of verl/interactions/base.py
    HAVE_VERL = False

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
