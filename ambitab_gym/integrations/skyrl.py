"""SkyRL adapter: AmbiTab as a SkyRL-Gym ``BaseTextEnv``.

* :class:`AmbiTabTextEnv` - ``__init__(env_config, extras)``, ``init(prompt)`` and
  ``step(action) -> BaseTextEnvStepOutput`` as SkyRL-Gym's ``skyrl_gym.envs.base_text_env``
  defines them. It subclasses SkyRL's ``BaseTextEnv`` when ``skyrl-gym`` is installed, and a
  stand-in with the same interface otherwise.
* :func:`register_skyrl` - registers the class with ``skyrl_gym`` under an env-class name.
* :func:`skyrl_dataset` - one dataset row per record (``prompt``, ``env_class``,
  ``reward_spec``, ``extra_info.record_id``), ready for ``datasets.Dataset.from_list``.

``env_config`` keys: ``env_id`` (default ``AmbiTab-Bird-v0``), ``env_kwargs`` (passed to the
env: ``split``, ``mode``, ``reward``, ...), ``prompt`` (a system-message template),
``wrappers`` (wrappers below the chat layer, innermost first: callables or
``"module:callable"`` paths, see :func:`~ambitab_gym.integrations.common.apply_wrappers`). ``extras``
(the dataset row's other columns) choose the record: ``record_id`` or ``extra_info.record_id``;
without one, a record is drawn with ``extras["seed"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ambitab_gym.integrations.common import ChatSession, WrapperSpec
from ambitab_gym.wrappers.stack import agent_view

__all__ = ["ENV_CLASS", "AmbiTabTextEnv", "register_skyrl", "skyrl_dataset"]

#: The env-class name the dataset rows and the registration use.
ENV_CLASS = "ambitab"

try:  # the real base class when SkyRL-Gym is installed
    from skyrl_gym.envs.base_text_env import BaseTextEnv as _Base
    from skyrl_gym.envs.base_text_env import BaseTextEnvStepOutput as _StepOutput

    HAVE_SKYRL = True
except ImportError:  # a stand-in with the interface of skyrl_gym/envs/base_text_env.py
    HAVE_SKYRL = False

    class _Base:  # type: ignore[no-redef]
        def __init__(self) -> None:
            self.turns = 0
            self.max_turns = 1

        def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict]:
            return prompt, {}

        def close(self) -> None:
            pass

    def _StepOutput(**fields: Any) -> dict[str, Any]:  # type: ignore[no-redef]  # noqa: N802
        return dict(fields)


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    if mapping is None:
        return default
    if isinstance(mapping, Mapping) or hasattr(mapping, "get"):
        return mapping.get(key, default)
    return default


class AmbiTabTextEnv(_Base):
    """One AmbiTab episode as a SkyRL text env (chat messages in, assistant text out).

    Args:
        env_config: ``env_id``, ``env_kwargs``, ``prompt``, ``wrappers`` (a dict or an
            OmegaConf config).
        extras: the dataset row's extra columns; ``record_id`` (or ``extra_info.record_id``)
            picks the record, else ``seed`` draws one.

    Example:
        >>> env = AmbiTabTextEnv({"env_id": "AmbiTab-Bird-v0"}, {"record_id": "bird-0014"})
        >>> prompt, metadata = env.init([])
        >>> prompt[0]["role"]
        'system'
        >>> out = env.step('What do you mean by "recently"?')
        >>> out["done"], out["observations"][0]["role"]
        (False, 'user')
        >>> out = env.step("<STOP>")
        >>> out["done"], out["reward"]
        (True, 1.0)
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        env_kwargs = _get(env_config, "env_kwargs") or {}
        self.session = ChatSession(
            str(_get(env_config, "env_id", "AmbiTab-Bird-v0")),
            env_kwargs=dict(env_kwargs),
            prompt=_get(env_config, "prompt"),
            wrappers=list(_get(env_config, "wrappers") or ()),
        )
        self.record_id = extras.get("record_id") or _get(extras.get("extra_info"), "record_id")
        self.seed = extras.get("seed")
        self.turns = 0
        self.max_turns = 1

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode; returns the opening transcript (it replaces ``prompt``)."""
        messages = self.session.start(record_id=self.record_id, seed=self.seed)
        env = self.session.env
        # Every question or stop is a turn; the SQL of mode="agent" is one more.
        agent_sql = env.get_wrapper_attr("mode") == "agent"
        self.max_turns = agent_view(env).questions_left + 1 + agent_sql
        self.turns = 0
        return messages, {}

    def step(self, action: str) -> Any:
        """Send the model's reply; returns ``BaseTextEnvStepOutput`` (a typed dict)."""
        self.turns += 1
        added, reward, done, info = self.session.step(action)
        metadata = {key: info[key] for key in ("questions_asked", "stop_reason") if key in info}
        return _StepOutput(
            observations=added,
            reward=reward,
            done=done,
            metadata=metadata,
            postprocessed_action=None,
        )

    def close(self) -> None:
        """Release the env's verifier."""
        self.session.close()


def register_skyrl(env_class: str = ENV_CLASS) -> str:
    """Register :class:`AmbiTabTextEnv` with ``skyrl_gym`` (needs ``skyrl-gym``).

    Returns:
        the registered id (use it as the rows' ``env_class``).
    """
    try:
        import skyrl_gym
        from skyrl_gym.envs.registration import registry
    except ImportError as error:
        raise ImportError("register_skyrl needs SkyRL-Gym: pip install skyrl-gym") from error
    if env_class not in registry:
        skyrl_gym.register(id=env_class, entry_point=f"{__name__}:AmbiTabTextEnv")
    return env_class


def skyrl_dataset(
    env_id: str = "AmbiTab-Bird-v0",
    *,
    env_class: str = ENV_CLASS,
    data_source: str = "ambitab",
    wrappers: Sequence[WrapperSpec] = (),
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """One SkyRL dataset row per record of the env (``prompt`` = the opening transcript).

    Args:
        env_id: a registered AmbiTab id.
        env_class: the SkyRL env-class name (see :func:`register_skyrl`).
        data_source: the rows' ``data_source``.
        wrappers: wrappers below the chat layer (use the env config's ``wrappers``).
        **env_kwargs: env options (``split="train"``, ...).

    >>> rows = skyrl_dataset("AmbiTab-Bird-v0", split="dev")
    >>> sorted(rows[0]), rows[0]["prompt"][0]["role"]
    (['data_source', 'env_class', 'extra_info', 'prompt', 'reward_spec'], 'system')
    """
    session = ChatSession(env_id, env_kwargs=env_kwargs, wrappers=wrappers)
    rows = []
    try:
        for record_id in session.record_ids:
            rows.append(
                {
                    "data_source": data_source,
                    "prompt": session.start(record_id=record_id),
                    "env_class": env_class,
                    "reward_spec": {"method": "env", "ground_truth": None},
                    "extra_info": {"record_id": record_id},
                }
            )
    finally:
        session.close()
    return rows
