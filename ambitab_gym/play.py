"""Play an AmbiTab task in a terminal: a person is the asker, and the SQL writer without a solver.

* :class:`PlaySession` - the interactive loop over any pair of text streams (a terminal, a pipe,
  or ``io.StringIO`` in tests).
* :class:`PlayOutcome` - how a session ended.
* :func:`make_play_env` - the env a session runs: ``solver`` mode with a solver, ``agent`` mode
  (the person types SQL) without.

What the person sees is what an agent sees (docs/design.md section 3, Trust boundary): the
public task, the budget, the oracle's answers, the SQL dialect of the engine that runs the query
(when the person writes it), and at the end the verdict's reason (``match``, ``mismatch``,
``syntax``, ...), with the verifier's message when the submitted query itself failed (a syntax,
runtime, rejection, timeout or size error: a message about that SQL only, as a database console
would give it; never for a solver whose SQL is hidden, never the detail of a mismatch).
Never the ambiguities, resolutions, credits, reference SQL or record id while the episode runs.
The SQL of the interpretation solver is not shown either: that solver picks one of the task's
reference queries, so its SQL would reveal them.

With ``reveal=True`` (``ambitab-gym play --reveal``), and only once the verdict is given, the
session shows what evaluation scores: the task's registered ambiguities, which of them each
question was credited with, and the episode's precision and recall (paper Definition 2). It is
read from the finished trajectory and the record, never from the env's observation or info.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from ambitab_gym import defaults
from ambitab_gym.actions import STOP, parse_action
from ambitab_gym.env import ALL_SPLITS, AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.metrics import score_episode
from ambitab_gym.vocabulary import QUERY_ERROR_CATEGORIES

__all__ = ["COMMANDS", "DETAIL_REASONS", "PlayOutcome", "PlaySession", "make_play_env"]

#: The session's commands (anything else typed while asking is a question).
COMMANDS = {
    "/help": "show this help",
    "/stop": f"stop asking (typing {STOP} or 'stop' does the same)",
    "/task": "show the task again",
    "/dialogue": "show the questions and answers so far",
    "/quit": "leave without finishing the episode",
}

_REASONS = {
    "match": "the result matches the hidden intent",
    "mismatch": "the result differs from the hidden intent's",
    "no_sql": "no SQL was given",
    "timeout": "the query ran too long",
    "rejected": "the statement was refused (one read-only query only)",
    "syntax": "the SQL did not parse",
    "runtime": "the query failed while running",
    "too_many_rows": "the query returned too many rows",
    "too_large": "the result was too large",
    "engine": "the database engine failed",
    "reference_error": "the task's own check failed (a corpus problem)",
}

#: Verdict reasons whose detail is shown: the submitted query itself failed, and the verifier's
#: message is about that SQL (the query-error categories but ``engine``, whose message may be
#: about the engine or the task's reference run). A mismatch's detail is never shown.
DETAIL_REASONS: tuple[str, ...] = tuple(c for c in QUERY_ERROR_CATEGORIES if c != "engine")


@dataclass(frozen=True)
class PlayOutcome:
    """How a session ended.

    Attributes:
        finished: the episode reached a verdict (False after ``/quit`` or end of input).
        success: the verdict, when finished.
        verdict_reason: the verdict's reason, when finished.
        questions: questions asked.
        stop_reason: why asking ended (``asker``, ``budget``, ``skipped``), if it did.
    """

    finished: bool
    success: bool | None = None
    verdict_reason: str | None = None
    questions: int = 0
    stop_reason: str | None = None


def make_play_env(
    env_id: str,
    *,
    solver: str = defaults.SOLVER,
    split: str | None = None,
    llm_client: Any = None,
    oracle: str = defaults.ORACLE,
    oracle_options: Mapping[str, Any] | None = None,
) -> AmbiTabEnv:
    """The env of a play session.

    Args:
        env_id: env id, corpus name or corpus folder.
        solver: ``interpretation``, ``llm``, ``module:callable``, or ``none`` (the person writes
            the SQL).
        split: play records of this split only (default: every record, not the env's
            ``train`` default: playing trains nothing).
        llm_client: the LLM client, for ``solver="llm"`` and ``oracle="llm"``.
        oracle: the oracle that answers (a registry name such as ``deterministic`` or ``llm``,
            or ``module:callable``).
        oracle_options: options of the oracle's factory (the LLM oracle's access policy, ...).

    Returns:
        An :class:`AmbiTabEnv` with ``render_mode="ansi"`` that skips asking on m = 0 records
        (as evaluation does).
    """
    from ambitab_gym import registry
    from ambitab_gym.corpora import load_corpus

    corpus = load_corpus(env_id)
    common: dict[str, Any] = {
        "split": split or ALL_SPLITS,
        "zero_ambiguity": defaults.CAMPAIGN_ZERO_AMBIGUITY,
        "render_mode": "ansi",
    }
    if oracle != defaults.ORACLE:
        common["oracle"] = registry.create(
            "oracle", oracle, corpus=corpus, llm_client=llm_client, **dict(oracle_options or {})
        )
    if solver == "none":
        return AmbiTabEnv(corpus, mode="agent", **common)
    policy = registry.create("solver", solver, corpus=corpus, llm_client=llm_client)
    return AmbiTabEnv(corpus, solver=policy, mode="solver", **common)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class PlaySession:
    """One episode with a person at the keyboard.

    Args:
        env: the env (``agent`` or ``solver`` mode); see :func:`make_play_env`.
        input: where the person's lines come from (default ``sys.stdin``; a terminal gets line
            editing through :func:`input`).
        output: where the session writes (default ``sys.stdout``).
        seed: the reset seed (draws the record unless ``record_id`` is given).
        record_id: play this record.
        echo: repeat each line read after its prompt (default: when the input is not a
            terminal, so piped and scripted sessions read like transcripts).
        reveal: after the verdict, show the task's ambiguities, what each question was
            credited with, and the episode's precision and recall (default False).

    Example:
        >>> import io
        >>> env = make_play_env("bird", solver="none")
        >>> typed = io.StringIO("Which year?\\n/stop\\nSELECT 1;\\n")
        >>> shown = io.StringIO()
        >>> outcome = PlaySession(env, input=typed, output=shown, seed=0).run()
        >>> outcome.finished, outcome.questions, outcome.verdict_reason
        (True, 1, 'mismatch')
        >>> "A1: " in shown.getvalue() and "Verdict: failure" in shown.getvalue()
        True
    """

    def __init__(
        self,
        env: AmbiTabEnv,
        *,
        input: TextIO | None = None,
        output: TextIO | None = None,
        seed: int | None = None,
        record_id: str | None = None,
        echo: bool | None = None,
        reveal: bool = False,
    ) -> None:
        if env.mode not in ("agent", "solver"):
            raise ConfigurationError(
                "play needs an env in 'agent' or 'solver' mode (see make_play_env)"
            )
        self.env = env
        self._terminal = input is None and sys.stdin.isatty()
        if self._terminal:
            with contextlib.suppress(ImportError):  # line editing and history for input()
                import readline  # noqa: F401
        self.input = input if input is not None else sys.stdin
        self.output = output if output is not None else sys.stdout
        self.seed = seed
        self.record_id = record_id
        #: repeat each line read after its prompt, so a piped session reads like a transcript
        self.echo = echo if echo is not None else not self._terminal and not _isatty(self.input)
        #: after the verdict only: the credits per question and the episode's precision/recall
        self.reveal = reveal
        self._sql_shown = False

    # -- terminal ----------------------------------------------------------------------------

    def _say(self, text: str = "") -> None:
        self.output.write(text + "\n")
        self.output.flush()

    def _read(self, prompt: str) -> str | None:
        """The next line without its newline, or None at the end of input."""
        if self._terminal:
            try:
                return input(prompt)
            except EOFError:
                self._say()
                return None
        self.output.write(prompt)
        self.output.flush()
        line = self.input.readline()
        if not line:
            self._say()
            return None
        line = line.rstrip("\r\n")
        if self.echo:
            self._say(line)
        return line

    def _help(self) -> None:
        self._say("Commands:")
        for name, text in COMMANDS.items():
            self._say(f"  {name:<10} {text}")
        if self.env.mode == "agent":
            self._say("After asking, type the SQL; end it with ';' or an empty line.")
            if self.env.record is not None:
                self._say(self._dialect_line())
        else:
            self._say(f"After asking, the {self._solver_name()} solver writes the SQL.")

    def _solver_name(self) -> str:
        solver = self.env.solver
        return str(getattr(solver, "name", None) or type(solver).__name__)

    def _dialect_line(self) -> str:
        """The SQL dialect of the engine that runs this record's query."""
        from ambitab_gym.policies.llm_prompts import DIALECT_NAMES

        env = self.env
        assert env.record is not None
        kind = env.corpus.engine_kind(env.record.verification.engine)
        name = DIALECT_NAMES.get(kind, kind)
        line = f"SQL dialect: {name} (the verifier runs your query on {name}"
        written = env.corpus.manifest.dialect
        if written != kind:
            line += f"; the corpus's queries are written for {DIALECT_NAMES.get(written, written)}"
        return line + ")."

    def _dialogue(self) -> None:
        text = self.env.public_view.render_dialogue()
        self._say(text or "(no questions yet)")

    # -- the episode -------------------------------------------------------------------------

    def run(self) -> PlayOutcome:
        """Play one episode; returns how it ended."""
        options = {"record_id": self.record_id} if self.record_id else None
        obs, info = self.env.reset(seed=self.seed, options=options)
        self._sql_shown = False  # whether the person saw the submitted SQL (theirs, a solver's)
        corpus = self.env.corpus
        where = f", seed {self.seed}" if self.seed is not None and not self.record_id else ""
        self._say(f"== ambitab-gym play: {corpus.name} ({corpus.origin}{where}) ==")
        self._say()
        self._say(obs["task"])
        self._say()
        left = int(obs["questions_left"])
        if left == 0:
            self._say("This task allows no clarifying questions.")
            self._announce_solver()
            info = self._after_stop(self._step(STOP)[1])
        else:
            self._say(
                f"You may ask up to {left} clarifying question(s). "
                "Type /stop when you are done asking, /help for commands."
            )
            quit_now, info = self._ask()
            if quit_now:
                return self._outcome(finished=False)
        if info["phase"] == "sql" and not self._write_sql():
            return self._outcome(finished=False)
        return self._outcome(finished=True)

    def _step(self, action: str) -> tuple[dict, dict]:
        obs, _, _, _, info = self.env.step(action)
        return obs, info

    def _ask(self) -> tuple[bool, dict]:
        """The asking phase; returns ``(quit, info)``."""
        while True:
            asked = len(self.env.public_view.dialogue)
            line = self._read(f"Q{asked + 1}> ")
            if line is None:
                return True, {}
            text = line.strip()
            if not text:
                continue
            command = text.lower()
            if command in ("/quit", "/exit"):
                return True, {}
            if command == "/help":
                self._help()
                continue
            if command == "/task":
                self._say(self.env.public_view.render_task())
                continue
            if command == "/dialogue":
                self._dialogue()
                continue
            if command.startswith("/") and command != "/stop":
                self._say(f"Unknown command {text!r}; /help lists the commands.")
                continue
            if command == "/stop" or parse_action(text).kind == "stop":
                self._say("You stopped asking.")
                self._announce_solver()
                _, info = self._step(STOP)
                return False, self._after_stop(info)
            _, info = self._step(text)
            dialogue = self.env.public_view.dialogue
            if len(dialogue) > asked:
                self._say(f"A{len(dialogue)}: {dialogue[-1].answer}")
            if info["phase"] != "ask":
                self._say("The question budget is spent.")
                return False, self._after_stop(info)
            self._say(f"({info['questions_left']} question(s) left)")

    def _announce_solver(self) -> None:
        if self.env.mode == "solver":
            self._say(f"The {self._solver_name()} solver is writing the SQL ...")

    def _after_stop(self, info: dict) -> dict:
        if info["phase"] == "done" and self.env.mode == "solver":
            self._show_solver_sql()
        return info

    def _show_solver_sql(self) -> None:
        from ambitab_gym.policies.interpretation import InterpretationSolver

        solver, trajectory = self.env.solver, self.env.trajectory
        assert trajectory is not None
        if trajectory.error:  # an error category (e.g. a server fault), never task data
            self._say(f"The solver failed ({trajectory.error}).")
        elif isinstance(solver, InterpretationSolver) or getattr(solver, "privileged", False):
            self._say("(this solver's SQL is one of the task's reference queries: not shown)")
        else:
            sql = trajectory.sql
            self._say(f"Solver's SQL:\n{sql}" if sql else "The solver gave no SQL.")
            self._sql_shown = bool(sql)

    def _write_sql(self) -> bool:
        """The SQL phase of agent mode; returns False when the person quits."""
        self._say("Asking is over. Type your SQL; end it with ';' or an empty line.")
        self._say(self._dialect_line())
        lines: list[str] = []
        while True:
            line = self._read("SQL> " if not lines else "...> ")
            if line is None and not lines:
                return False
            if line is not None and not lines:
                command = line.strip().lower()
                if command in ("/quit", "/exit"):
                    return False
                if command in ("/help", "/task", "/dialogue"):
                    {"/help": self._help, "/dialogue": self._dialogue}.get(
                        command, lambda: self._say(self.env.public_view.render_task())
                    )()
                    continue
                if not command:
                    continue
            if line is None or not line.strip():
                break
            lines.append(line)
            if line.rstrip().endswith(";"):
                break
        self._step("\n".join(lines).strip())
        self._sql_shown = True  # the person's own SQL
        return True

    def _outcome(self, *, finished: bool) -> PlayOutcome:
        trajectory = self.env.trajectory
        assert trajectory is not None
        verdict = trajectory.verdict
        if finished and verdict is not None:
            explained = _REASONS.get(verdict.reason, verdict.reason)
            result = "success" if verdict.success else "failure"
            self._say(f"Verdict: {result} ({verdict.reason}: {explained}).")
            if verdict.reason in DETAIL_REASONS and verdict.detail and self._sql_shown:
                self._say(f"Verifier: {verdict.detail}")
        elif not finished:
            self._say("Left without a verdict.")
        self._say(f"Questions asked: {trajectory.n_questions}.")
        if finished and verdict is not None and self.reveal:
            self._reveal()
        return PlayOutcome(
            finished=finished and verdict is not None,
            success=None if verdict is None else bool(verdict.success),
            verdict_reason=None if verdict is None else verdict.reason,
            questions=trajectory.n_questions,
            stop_reason=trajectory.stop_reason,
        )

    def _reveal(self) -> None:
        """After the verdict: the ambiguities, each question's credits, precision and recall.

        Read from the finished trajectory and the record (privileged, evaluation-side data);
        the scores are :func:`ambitab_gym.metrics.score_episode`'s.
        """
        record, trajectory = self.env.record, self.env.trajectory
        assert record is not None and trajectory is not None
        names = {a.id: f'"{a.term}" [{a.id}]' for a in record.ambiguities}
        counted = {a.id for a in record.counted_ambiguities}
        self._say()
        self._say("-- Reveal (after the verdict; an agent never sees this) --")
        if record.ambiguities:
            self._say(f"Registered ambiguities ({len(counted)} counted):")
            for a in record.ambiguities:
                note = a.kind if a.counted else f"{a.kind}, not counted"
                self._say(f"  {names[a.id]} ({note})")
        else:
            self._say("This task has no registered ambiguity.")
        credited: set[str] = set()
        productive = 0
        for number, turn in enumerate(trajectory.turns, start=1):
            self._say(f"Q{number}: {turn.question}")
            fresh = (turn.credits & counted) - credited
            if not turn.credits:
                self._say("    credited: nothing")
            else:
                parts = []
                for amb_id in sorted(turn.credits):
                    if amb_id not in counted:
                        parts.append(f"{names.get(amb_id, amb_id)} (not counted)")
                    elif amb_id in credited:
                        parts.append(f"{names[amb_id]} (already credited)")
                    else:
                        parts.append(f"{names[amb_id]} (new)")
                self._say("    credited: " + ", ".join(parts))
            productive += bool(fresh)
            credited |= turn.credits & counted
        score = score_episode(trajectory, record)
        n = trajectory.n_questions
        if score.precision is None:
            self._say("Precision: - (no question was asked)")
        else:
            self._say(
                f"Precision: {productive} of {n} question(s) credited an ambiguity not credited "
                f"before = {100 * score.precision:.1f}%"
            )
        if score.recall is None:
            self._say("Recall: - (the task has no counted ambiguity)")
        else:
            self._say(
                f"Recall: {len(credited)} of {len(counted)} counted ambiguit"
                f"{'y' if len(counted) == 1 else 'ies'} credited = {100 * score.recall:.1f}%"
            )
        missed = [names[a] for a in sorted(counted - credited)]
        if missed:
            self._say("Never credited: " + ", ".join(missed))
