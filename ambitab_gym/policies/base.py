"""Agent-side protocols: askers and solvers read only a :class:`PublicView`.

* :class:`Asker` - ``reset(seed)`` then ``act(view) -> str`` (a question or ``STOP``).
* :class:`Solver` - ``solve(view) -> str`` (SQL).
* :func:`reads_answers` - what a solver declares about reading the answers (its
  ``reads_answers`` class attribute), which the response-leakage checks need.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

from ambitab_gym.trajectory import PublicView

__all__ = ["Asker", "Solver", "reads_answers"]


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

    A solver may declare ``reads_answers`` (a class attribute; see :func:`reads_answers`).
    """

    def solve(self, view: PublicView) -> str: ...


def reads_answers(solver: Any) -> bool | None:
    """Whether a solver reads what the oracle's answers say, as the solver declares it.

    A solver class declares ``reads_answers = True`` when its SQL can depend on what an answer
    says beyond the task's stored answer texts - SQL or free text in the answers (the
    ``dialogue-sql`` probes, an LLM) - and ``reads_answers = False`` when it only recognises the
    stored resolutions and frozen responses (``interpretation``). The response-leakage checks
    dJ_resp and dJ_full need a solver that reads answers: for one that does not, extra words in
    an answer cannot change a verdict, so those checks cannot show a response leak.

    Args:
        solver: a solver, its class, or a factory function whose return annotation names the
            class (``make_llm_solver(...) -> LLMSolver``).

    Returns:
        The declaration, or None when the solver declares nothing.

    >>> class Reader:
    ...     reads_answers = True
    >>> def make_reader() -> Reader:
    ...     return Reader()
    >>> reads_answers(Reader), reads_answers(Reader()), reads_answers(make_reader)
    (True, True, True)
    >>> reads_answers(object()) is None
    True
    """
    declared = getattr(solver, "reads_answers", None)
    if isinstance(declared, bool):
        return declared
    if inspect.isfunction(solver):
        try:
            annotation = inspect.signature(solver).return_annotation
        except (TypeError, ValueError):
            return None
        if isinstance(annotation, str):  # postponed annotations: a name in the module
            annotation = solver.__globals__.get(annotation)
        declared = getattr(annotation, "reads_answers", None)
        if isinstance(declared, bool):
            return declared
    return None
