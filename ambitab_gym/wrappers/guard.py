"""A response guard: oracle answers that show SQL are redacted before the agent sees them.

An oracle answer *reveals SQL* when it contains code-shaped SQL or a clause segment of the
reference query (:func:`ambitab_gym.oracles.sqltext.answer_reveals_sql`). The env flags every
such answer in the trajectory (``answer_reveals_sql``, privileged) whether or not a guard is on;
:class:`ResponseGuard` additionally rewrites it before the agent sees it
(:func:`ambitab_gym.oracles.sqltext.redact_sql`, and the whole answer when a redacted answer
still reveals SQL).

What changes and what does not (docs/leakage.md, "Response guard"):

* the agent's observation (``dialogue``), its :class:`~ambitab_gym.trajectory.PublicView`, and
  so every asker and solver, read the redacted text;
* the credits stay as the oracle gave them (the matcher credited the question, not the answer);
* the trajectory keeps the original answer (``answer``) for analysts, with the redacted one in
  ``shown_answer``; the oracle's own view of the earlier dialogue keeps the original too.

The guard hands its redaction to the env per episode (``options["answer_guard"]`` of ``reset``,
as :class:`~ambitab_gym.wrappers.HybridOracle` hands its oracle), so the env itself is never
changed and the guard can sit anywhere below the agent-side wrappers.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ambitab_gym.oracles.sqltext import answer_reveals_sql, redact_sql
from ambitab_gym.trajectory import PublicView, Trajectory
from ambitab_gym.wrappers.stack import check_below_agent_interface

__all__ = ["REDACTION", "ResponseGuard", "guard_answer"]

#: What a revealing answer becomes when removing its SQL leaves nothing safe to show.
REDACTION = "[answer withheld by the response guard: it contained SQL]"


def guard_answer(answer: str) -> str:
    """The answer as the agent is shown it: SQL removed, or the whole answer withheld when the
    remainder still reveals SQL.

    >>> guard_answer("Sure: SELECT name FROM staff ORDER BY pay DESC LIMIT 3")
    'Sure: [SQL removed by the response guard]'
    >>> guard_answer("Only the five biggest spenders.")
    'Only the five biggest spenders.'
    """
    redacted = redact_sql(answer)
    return REDACTION if answer_reveals_sql(redacted) else redacted


class ResponseGuard(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Redacts oracle answers that reveal SQL before the agent sees them.

    Args:
        env: an AmbiTab env (possibly wrapped), below any agent-side wrapper.
        redact: answer -> what the agent is shown (default :func:`guard_answer`); called only
            for answers the env flags as revealing SQL.

    Raises:
        StackOrderError: when stacked above an agent-side wrapper (``ChatMessages``,
            ``QuestionMenu``), whose view it could not change.

    Example:
        >>> import ambitab_gym
        >>> from ambitab_gym.oracles.leaky import make_leaky_oracle
        >>> base = ambitab_gym.AmbiTabEnv("bird")
        >>> base.oracle = make_leaky_oracle("leaky-sql-responder", base.corpus)
        >>> env = ResponseGuard(base)
        >>> obs, _ = env.reset(seed=0, options={"record_id": "bird-0001"})
        >>> obs, *_ = env.step("Which customers count as top?")
        >>> "SELECT" in obs["dialogue"], "guard" in obs["dialogue"]
        (False, True)
        >>> turn = env.trajectory.turns[0]          # privileged: the original stays
        >>> turn.answer_reveals_sql, "SELECT" in turn.answer, turn.shown_answer is not None
        (True, True, True)
    """

    def __init__(self, env: gym.Env, *, redact: Any = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, redact=redact)
        gym.Wrapper.__init__(self, env)
        check_below_agent_interface(env, type(self).__name__)
        self.redact = redact or guard_answer

    @property
    def public_view(self) -> PublicView:
        """What the agent may read now (the stack below already shows redacted answers)."""
        return self.env.get_wrapper_attr("public_view")

    @property
    def trajectory(self) -> Trajectory | None:
        """The full trajectory (privileged: original answers, flags, shown answers)."""
        return self.env.get_wrapper_attr("trajectory")

    @property
    def record(self) -> Any:
        """The hidden record of the current episode (privileged)."""
        return self.env.get_wrapper_attr("record")

    @property
    def corpus(self) -> Any:
        return self.env.get_wrapper_attr("corpus")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        options = dict(options or {})
        options.setdefault("answer_guard", self.redact)
        return self.env.reset(seed=seed, options=options)

    async def astep(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Async :meth:`step` (see :meth:`ambitab_gym.env.AmbiTabEnv.astep`)."""
        return await self.env.get_wrapper_attr("astep")(action)
