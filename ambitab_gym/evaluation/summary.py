"""From stored episodes to the numbers of paper Table 8 (Definition 2-3, C.3).

* :func:`episode_metrics` - p, r, F1 and success of one finished trajectory (the row form of
  :func:`ambitab_gym.metrics.score_episode`).
* :func:`summarize_campaign` - per seed: SR per condition, macro precision / recall / F1 of the
  asker (:func:`ambitab_gym.metrics.macro_means`), asking gain and signed gap; then mean and
  sample SD over seeds; fallback stops counted.
* :func:`format_table` - the summary as an aligned text table (with the LLM tokens stored).
* :func:`token_totals` - prompt and completion tokens of episode rows, in total and per role.
* :func:`error_rate_message` - the failure message of a campaign with too many errored episodes.
* :func:`seeds_note` - the note for N > 1 seeds over components a seed cannot vary.
* :func:`unreadable_counts`, :func:`revealing_turns` - per episode row: unreadable replies per
  role (matcher, responder, asker, solver) and answers flagged ``answer_reveals_sql``.

Populations (C.3): precision over episodes with n >= 1, recall and F1 over episodes with
|Amb| >= 1 that did not end in a fallback stop, SR over all episodes. Gains and gaps are
computed within each seed before averaging.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ambitab_gym.metrics import macro_means, score_episode
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import Trajectory
from ambitab_gym.vocabulary import EVALUATION_CONDITIONS

__all__ = [
    "ROLES",
    "Stat",
    "Summary",
    "episode_metrics",
    "error_rate_message",
    "format_table",
    "revealing_turns",
    "reveals_sql_warning",
    "seeds_note",
    "summarize_campaign",
    "token_totals",
    "unreadable_counts",
]

#: The roles whose unreadable replies are counted.
ROLES = ("matcher", "responder", "asker", "solver")

CONDITIONS = EVALUATION_CONDITIONS

#: The verdict-reason key of episodes stored without a verdict: asking ended in an error before
#: verification, an ask-only run, or a results file written before failure reasons were stored.
UNRECORDED = "unrecorded"


def _turns(row: Mapping) -> list[Mapping]:
    dialogue = row.get("dialogue") or []
    if isinstance(dialogue, str):
        try:
            dialogue = json.loads(dialogue)
        except json.JSONDecodeError:
            return []
    return [t for t in dialogue if isinstance(t, Mapping)]


def unreadable_counts(row: Mapping) -> dict[str, int]:
    """Unreadable replies of one episode row, per role: matcher routes recorded unparsed (an
    unreadable reply or an invalid route), responder replies that were not the requested JSON,
    an asker reply read as a fallback stop, a solver reply with no SQL (``no_sql``).

    >>> unreadable_counts({"stop_reason": "fallback", "verdict_reason": "no_sql",
    ...     "dialogue": [{"route": {"parsed": False, "responder_parsed": False}}]})
    {'matcher': 1, 'responder': 1, 'asker': 1, 'solver': 1}
    """
    routes = [t.get("route") or {} for t in _turns(row)]
    return {
        "matcher": sum(1 for r in routes if r and not r.get("parsed", True)),
        "responder": sum(1 for r in routes if r and r.get("responder_parsed") is False),
        "asker": int(row.get("stop_reason") == "fallback"),
        "solver": int(row.get("verdict_reason") == "no_sql"),
    }


def revealing_turns(row: Mapping) -> int:
    """Answers of one episode row flagged ``answer_reveals_sql`` (privileged).

    >>> revealing_turns({"dialogue": [{"answer_reveals_sql": True}, {}]})
    1
    """
    return sum(1 for t in _turns(row) if t.get("answer_reveals_sql"))


def reveals_sql_warning(episodes: int, answers: int, *, guarded: bool = False) -> str | None:
    """The stderr warning for oracle answers that reveal SQL (None when there are none).

    >>> print(reveals_sql_warning(0, 0))
    None
    >>> reveals_sql_warning(3, 5).split(": ")[1]
    '5 oracle answer(s) in 3 episode(s) reveal SQL'
    """
    if not answers:
        return None
    head = f"warning: {answers} oracle answer(s) in {episodes} episode(s) reveal SQL"
    if guarded:
        return (
            f"{head}: the response guard redacted them before the agent saw them (originals "
            "and 'answer_reveals_sql' flags are in the results)"
        )
    return (
        f"{head}: code or a fragment of the reference query that the agent saw, so success "
        "may measure leakage rather than asking. Keep the responder off the SQL "
        "(--oracle-policy scoped or --no-responder-reads-sql), or redact such answers with "
        "--response-guard (wrappers.ResponseGuard); see docs/leakage.md, 'Response guard'."
    )


def episode_metrics(trajectory: Trajectory, record: TaskRecord) -> dict[str, float | None]:
    """``precision`` (None when n = 0), ``recall`` and ``f1`` (None when |Amb| = 0 or after a
    fallback stop), ``success`` (0 when nothing was verified: the episode failed)."""
    score = score_episode(trajectory, record)
    return {
        "precision": score.precision,
        "recall": score.recall,
        "f1": score.f1,
        "success": 0.0 if score.success is None else score.success,
    }


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over seeds (SD is 0 for one seed).

    >>> Stat.of([0.5, 0.7, None]).mean, round(Stat.of([0.5, 0.7]).sd, 4)
    (0.6, 0.1414)
    """

    mean: float | None
    sd: float | None
    per_seed: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat:
        kept = tuple(v for v in values if v is not None)
        if not kept:
            return cls(None, None, ())
        sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
        return cls(statistics.fmean(kept), sd, kept)


@dataclass(frozen=True)
class Summary:
    """Campaign figures: each a :class:`Stat` over seeds (see :func:`summarize_campaign`).

    >>> s = summarize_campaign([{"condition": "none", "seed": 0, "success": 1.0, "precision": None,
    ...                 "recall": None, "f1": None, "error": None}])
    >>> s.to_json()["sr_none"], s.episodes
    (1.0, 1)
    """

    sr: dict[str, Stat]
    precision: Stat
    recall: Stat
    f1: Stat
    gain: Stat
    gap: Stat
    episodes: int
    errors: dict[str, int] = field(default_factory=dict)
    #: episodes (every condition) whose asking ended in a fallback stop: out of recall and F1
    fallback_stops: int = 0
    #: condition -> verdict reason -> episodes (``unrecorded``: no verdict was stored)
    verdict_reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    #: role -> unreadable replies over every episode (see :func:`unreadable_counts`)
    unreadable: dict[str, int] = field(default_factory=dict)
    #: episodes with at least one oracle answer that reveals SQL, and such answers
    reveals_sql_episodes: int = 0
    reveals_sql_answers: int = 0
    #: LLM tokens of the stored episodes (as the servers reported them), in total and per role
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the campaign's id and what it ran on (set by :func:`~ambitab_gym.evaluation.run_campaign`:
    #: :meth:`~ambitab_gym.evaluation.identity.CampaignIdentity.to_dict`)
    campaign_id: str = ""
    corpus: dict[str, str] = field(default_factory=dict)

    @property
    def error_count(self) -> int:
        """Episodes that ended in an error."""
        return sum(self.errors.values())

    @property
    def error_rate(self) -> float:
        """The share of episodes that ended in an error (0 without episodes)."""
        return self.error_count / self.episodes if self.episodes else 0.0

    def to_json(self) -> dict:
        """The ``--json`` object: rates in [0, 1] (means over seeds), SDs and counts."""

        def mean(stat: Stat) -> float | None:
            return stat.mean

        out = {
            "sr_none": mean(self.sr.get("none", Stat(None, None))),
            "sr_asker": mean(self.sr.get("asker", Stat(None, None))),
            "sr_full": mean(self.sr.get("full", Stat(None, None))),
            "precision": mean(self.precision),
            "recall": mean(self.recall),
            "f1": mean(self.f1),
            "asking_gain": mean(self.gain),
            "gap": mean(self.gap),
            "episodes": self.episodes,
            "errors": dict(self.errors),
            "fallback_stops": self.fallback_stops,
            "verdict_reasons": {c: dict(r) for c, r in self.verdict_reasons.items()},
            "unreadable": {role: self.unreadable.get(role, 0) for role in ROLES},
            "reveals_sql_episodes": self.reveals_sql_episodes,
            "reveals_sql_answers": self.reveals_sql_answers,
            "error_rate": self.error_rate,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens_by_role": {r: dict(c) for r, c in self.tokens_by_role.items()},
        }
        if self.campaign_id:
            out["campaign_id"] = self.campaign_id
        if self.corpus:
            out["corpus"] = dict(self.corpus)
        out["sd"] = {
            "sr_none": self.sr.get("none", Stat(None, None)).sd,
            "sr_asker": self.sr.get("asker", Stat(None, None)).sd,
            "sr_full": self.sr.get("full", Stat(None, None)).sd,
            "precision": self.precision.sd,
            "recall": self.recall.sd,
            "f1": self.f1.sd,
        }
        return out


def token_totals(rows: Iterable[Mapping]) -> tuple[int, int, dict[str, dict[str, int]]]:
    """Prompt tokens, completion tokens and ``{role: {"calls", "prompt_tokens",
    "completion_tokens"}}`` summed over episode rows (rows without counts add nothing).

    >>> token_totals([{"prompt_tokens": 5, "completion_tokens": 2, "llm_usage":
    ...     {"asker": {"calls": 1, "prompt_tokens": 5, "completion_tokens": 2}}},
    ...     {"prompt_tokens": None}])
    (5, 2, {'asker': {'calls': 1, 'prompt_tokens': 5, 'completion_tokens': 2}})
    """
    prompt = completion = 0
    by_role: dict[str, dict[str, int]] = {}
    for row in rows:
        prompt += int(row.get("prompt_tokens") or 0)
        completion += int(row.get("completion_tokens") or 0)
        usage = row.get("llm_usage") or {}
        if isinstance(usage, str):
            try:
                usage = json.loads(usage)
            except json.JSONDecodeError:
                usage = {}
        for role, counts in usage.items() if isinstance(usage, Mapping) else ():
            into = by_role.setdefault(
                role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
            )
            for key in into:
                into[key] += int((counts or {}).get(key) or 0)
    return prompt, completion, {role: by_role[role] for role in sorted(by_role)}


def error_rate_message(errors: Mapping[str, int], episodes: int, threshold: float) -> str | None:
    """The failure summary when errored episodes exceed ``threshold`` (a share), else None.

    >>> print(error_rate_message({"connection": 1}, 20, 0.1))
    None
    >>> print(error_rate_message({"connection": 5, "timeout": 1}, 12, 0.1))
    6 of 12 episodes (50.0%) ended in an error, more than the 10.0% allowed (--max-error-rate): connection 5, timeout 1. The figures above are not a measurement of the asker. Fix the cause (is the LLM server up and serving the model?), then rerun the same command with --retry-errors: the errored episodes run again and their rows are replaced.
    """
    count = sum(errors.values())
    if not episodes or count / episodes <= threshold:
        return None
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(errors.items()))
    return (
        f"{count} of {episodes} episodes ({100 * count / episodes:.1f}%) ended in an error, more "
        f"than the {100 * threshold:.1f}% allowed (--max-error-rate): {kinds}. The figures above "
        "are not a measurement of the asker. Fix the cause (is the LLM server up and serving "
        "the model?), then rerun the same command with --retry-errors: the errored episodes run "
        "again and their rows are replaced."
    )


def seeds_note(seeds: int, *, can_vary: bool) -> str | None:
    """The note for ``seeds`` > 1 when no component can use the seed (else None).

    >>> print(seeds_note(3, can_vary=True))
    None
    >>> seeds_note(3, can_vary=False).split(":")[0]
    'note'
    """
    if seeds <= 1 or can_vary:
        return None
    return (
        f"note: the {seeds} seeds ran identical episodes: every component is deterministic "
        "(no LLM and no import-path part that could use the seed), so each ± is 0 by "
        "construction, not a measured spread. One seed gives the same numbers."
    )


def _macro(rows: list[Mapping], key: str) -> float | None:
    return macro_means(rows)[key] if rows else None


def summarize_campaign(rows: Iterable[Mapping]) -> Summary:
    """Aggregate episode rows (dicts with condition, seed, success, precision, recall, f1, error,
    stop_reason); each figure is :func:`~ambitab_gym.metrics.macro_means` within a seed.

    Example:
        >>> rows = [
        ...     {"condition": "none", "seed": 0, "success": 0.0, "precision": None,
        ...      "recall": 0.0, "f1": 0.0, "error": None},
        ...     {"condition": "asker", "seed": 0, "success": 1.0, "precision": 0.5,
        ...      "recall": 1.0, "f1": 2 / 3, "error": None},
        ...     {"condition": "full", "seed": 0, "success": 1.0, "precision": 1.0,
        ...      "recall": 1.0, "f1": 1.0, "error": None}]
        >>> s = summarize_campaign(rows)
        >>> s.sr["asker"].mean, s.precision.mean, s.gain.mean, s.gap.mean
        (1.0, 0.5, 1.0, 0.0)
    """
    rows = list(rows)
    seeds = sorted({r["seed"] for r in rows})
    by = {(c, s): [] for c in CONDITIONS for s in seeds}
    errors: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for row in rows:
        by.setdefault((row["condition"], row["seed"]), []).append(row)
        if row.get("error"):
            errors[row["error"]] = errors.get(row["error"], 0) + 1
        counts = reasons.setdefault(row["condition"], {})
        reason = row.get("verdict_reason") or UNRECORDED
        counts[reason] = counts.get(reason, 0) + 1
    sr = {}
    for condition in CONDITIONS:
        sr[condition] = Stat.of(
            _macro(by[(condition, s)], "success") if by[(condition, s)] else None for s in seeds
        )
    gains, gaps = [], []
    for seed in seeds:
        j_none = _macro(by[("none", seed)], "success") if by[("none", seed)] else None
        j_ask = _macro(by[("asker", seed)], "success") if by[("asker", seed)] else None
        j_full = _macro(by[("full", seed)], "success") if by[("full", seed)] else None
        gains.append(None if j_ask is None or j_none is None else j_ask - j_none)
        gaps.append(None if j_ask is None or j_full is None else j_full - j_ask)
    asker_rows = {s: by[("asker", s)] for s in seeds}
    unreadable = dict.fromkeys(ROLES, 0)
    revealing = [revealing_turns(r) for r in rows]
    for row in rows:
        for role, count in unreadable_counts(row).items():
            unreadable[role] += count
    prompt_tokens, completion_tokens, tokens_by_role = token_totals(rows)
    return Summary(
        sr=sr,
        precision=Stat.of(_macro(asker_rows[s], "precision") for s in seeds),
        recall=Stat.of(_macro(asker_rows[s], "recall") for s in seeds),
        f1=Stat.of(_macro(asker_rows[s], "f1") for s in seeds),
        gain=Stat.of(gains),
        gap=Stat.of(gaps),
        episodes=len(rows),
        errors=errors,
        fallback_stops=sum(1 for r in rows if r.get("stop_reason") == "fallback"),
        verdict_reasons={c: dict(sorted(r.items())) for c, r in sorted(reasons.items())},
        unreadable=unreadable,
        reveals_sql_episodes=sum(1 for n in revealing if n),
        reveals_sql_answers=sum(revealing),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens_by_role=tokens_by_role,
    )


def _cell(stat: Stat) -> str:
    if stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sd or 0.0):.1f}"


def format_table(summaries: Mapping[str, Summary]) -> str:
    """An aligned table with the columns of paper Table 8 (percent, mean ± SD over seeds), the
    unreadable replies per role (matcher/responder/asker/solver), the episodes with an oracle
    answer that reveals SQL, the number of fallback-stop episodes (left out of recall and
    F1), and the LLM tokens of the stored episodes (prompt+completion, every role)."""
    header = [
        "Corpus",
        "SR none",
        "SR asker",
        "SR full",
        "Precision",
        "Recall",
        "F1",
        "Gain",
        "Gap",
        "Tokens in+out",
        "Unreadable m/r/a/s",
        "Reveals SQL",
        "Fallback",
    ]
    lines = [header]
    for name, s in summaries.items():
        lines.append(
            [
                name,
                _cell(s.sr["none"]),
                _cell(s.sr["asker"]),
                _cell(s.sr["full"]),
                _cell(s.precision),
                _cell(s.recall),
                _cell(s.f1),
                _cell(s.gain),
                _cell(s.gap),
                f"{s.prompt_tokens}+{s.completion_tokens}",
                "/".join(str(s.unreadable.get(role, 0)) for role in ROLES),
                str(s.reveals_sql_episodes),
                str(s.fallback_stops),
            ]
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = []
    for i, row in enumerate(lines):
        out.append(
            "  ".join(
                cell.rjust(w) if j else cell.ljust(w)
                for j, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
