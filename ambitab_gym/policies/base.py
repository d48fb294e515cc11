"""Agent-side protocols: askers and solvers read only a :class:`PublicView`.

* :class:`Asker` - ``reset(seed)`` then ``act(view) -> str`` (a question or ``STOP``).
* :class:`Solver` - ``solve(view) -> str`` (SQL).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ambitab_gym.trajectory import PublicView

__all__ = ["Asker", "Solver"]


@runtime_checkable
class Asker(Protocol):
    """An asking policy pi_ask: the next question, or ``STOP``, given the visible history.

    >>> from ambitab_gym.policies.scripted import GenericAsker
    >>> isinstance(GenericAsker(), Asker)
    True
    """

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, view: PublicView) -> str: ...


@runtime_checkable
class Solver(Protocol):
    """A solution policy pi_sol: SQL given the visible history (after the stop).

    >>> class CountRows:
    ...     def solve(self, view):
    ...         return "SELECT count(*) FROM orders"
    >>> isinstance(CountRows(), Solver)
    True
    """

    def solve(self, view: PublicView) -> str: ...
