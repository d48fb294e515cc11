"""Wrapper stacks: what the agent sees through a stack, and which stack orders are valid.

An AmbiTab wrapper stack has two kinds of layers (docs/leakage.md, "Stack order"):

* *leakage wrappers* (:mod:`ambitab_gym.wrappers.leakage`) change what one party of the
  protocol gets: the agent's view (``SpecificationRandomization``), the oracle of the episode
  (``HybridOracle``) or the question text (``AdversarialProbe``);
* *agent-side wrappers* (:class:`AgentInterface` subclasses: ``ChatMessages``,
  ``QuestionMenu``) turn the agent's view into what a policy reads (chat messages, a menu).

Every agent-side reader takes the agent's view from the stack below it with Gymnasium's
``get_wrapper_attr("public_view")`` (:func:`agent_view`): the outermost layer that defines
``public_view`` wins, so a ``SpecificationRandomization`` below shows its x'. None of them reads
``env.unwrapped``, which is the privileged, un-randomized env.

* :class:`AgentInterface` - marker base class of the agent-side wrappers.
* :func:`layers` - the envs of a stack, outermost first.
* :func:`agent_view` - the agent's :class:`~ambitab_gym.trajectory.PublicView` through a stack.
* :func:`check_agent_interface` - construction-time check of an agent-side wrapper's stack.
* :func:`check_below_agent_interface` - construction-time check that a wrapper which changes
  the agent's view or actions is not stacked above an agent-side wrapper.
"""

from __future__ import annotations

import gymnasium as gym

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.trajectory import PublicView

__all__ = [
    "AgentInterface",
    "StackOrderError",
    "agent_view",
    "check_agent_interface",
    "check_below_agent_interface",
    "layers",
]


class StackOrderError(ConfigurationError):
    """A wrapper stack whose order would show the agent the wrong view (or cannot run).

    A :class:`~ambitab_gym.errors.ConfigurationError` (and so a ``ValueError``), category
    ``stack_order``.
    """

    category = "stack_order"


class AgentInterface:
    """Marker base of agent-side wrappers: they build what a policy reads from :func:`agent_view`.

    Subclasses call :func:`check_agent_interface` in ``__init__``.
    """


def layers(env: gym.Env) -> list[gym.Env]:
    """The envs of a wrapper stack, outermost first, the base env last.

    Args:
        env: a (possibly wrapped) env.

    Returns:
        ``[env, env.env, ..., env.unwrapped]``.

    >>> import gymnasium as gym
    >>> from gymnasium.wrappers import TimeLimit
    >>> [type(e).__name__ for e in layers(TimeLimit(gym.make("CartPole-v1").unwrapped, 5))]
    ['TimeLimit', 'CartPoleEnv']
    """
    out = [env]
    while isinstance(out[-1], gym.Wrapper):
        out.append(out[-1].env)
    return out


def agent_view(env: gym.Env) -> PublicView:
    """The agent's view as the stack presents it: ``env.get_wrapper_attr("public_view")``.

    Args:
        env: an AmbiTab env, possibly wrapped.

    Returns:
        the :class:`PublicView` of the outermost layer that defines one (a
        ``SpecificationRandomization`` shows its replacement spec).

    Raises:
        TypeError: when no layer of the stack has a ``public_view``.

    >>> import ambitab_gym
    >>> from ambitab_gym.wrappers import SpecificationRandomization
    >>> env = SpecificationRandomization(ambitab_gym.AmbiTabEnv("bird"), seed=0)
    >>> _ = env.reset(seed=0)
    >>> agent_view(env).spec == env.unwrapped.public_view.spec
    False
    """
    try:
        view = env.get_wrapper_attr("public_view")
    except AttributeError:
        raise TypeError(
            f"{type(env).__name__} has no public_view in its stack: wrap an AmbiTab env "
            "(gym.make('AmbiTab-...-v0') or an AmbiTabEnv)"
        ) from None
    if not isinstance(view, PublicView):
        raise TypeError(f"public_view of the stack is a {type(view).__name__}, not a PublicView")
    return view


def _is_ambitab(env: gym.Env) -> bool:
    # Structural check of the stack's bottom env (it must have the protocol's view); no state
    # of it is read here.
    base = env.unwrapped
    return hasattr(type(base), "public_view") and hasattr(base, "records")


def check_agent_interface(env: gym.Env, wrapper: str) -> None:
    """Check the stack under a new agent-side wrapper.

    Args:
        env: the env the agent-side wrapper ``wrapper`` (its class name) is about to wrap.

    Raises:
        TypeError: when there is no AmbiTab env at the bottom.
        StackOrderError: when an agent-side wrapper is already in the stack (one interface
            per stack: each turns the AmbiTab observation into its own format).

    >>> import ambitab_gym
    >>> from ambitab_gym.wrappers import ChatMessages
    >>> check_agent_interface(ChatMessages(ambitab_gym.AmbiTabEnv("bird")), "QuestionMenu")
    Traceback (most recent call last):
    ...
    ambitab_gym.wrappers.stack.StackOrderError: QuestionMenu cannot wrap ChatMessages: ...
    """
    if not _is_ambitab(env):
        raise TypeError(f"{wrapper} wraps an AmbiTab env (one with a public_view)")
    for layer in layers(env):
        if isinstance(layer, AgentInterface):
            raise StackOrderError(
                f"{wrapper} cannot wrap {type(layer).__name__}: a stack has one agent-side "
                "wrapper, at the top of the AmbiTab wrappers"
            )


def check_below_agent_interface(env: gym.Env, wrapper: str) -> None:
    """Check that ``wrapper`` (a class name) is not about to wrap an agent-side wrapper.

    A wrapper that changes the agent's view (``SpecificationRandomization``) must sit below
    every agent-side wrapper: those build the agent's text from the view of the stack below
    them, so a randomization above them would never reach that text.

    Raises:
        StackOrderError: naming the valid order.

    >>> import ambitab_gym
    >>> from ambitab_gym.wrappers import ChatMessages
    >>> check_below_agent_interface(ChatMessages(ambitab_gym.AmbiTabEnv("bird")), "X")
    Traceback (most recent call last):
    ...
    ambitab_gym.wrappers.stack.StackOrderError: X must be below ChatMessages: ...
    """
    for layer in layers(env):
        if isinstance(layer, AgentInterface):
            name = type(layer).__name__
            raise StackOrderError(
                f"{wrapper} must be below {name}: write {name}({wrapper}(env)), not "
                f"{wrapper}({name}(env)); {name} builds what the agent reads from the view "
                "of the stack below it"
            )
