"""Figures and an HTML page from a results file (paper Figure 3 (a-c), Table 8, Table 14 and
Figure 4), with an episode browser and the oracle-response audit's shares.

* :func:`select_campaigns` - the campaigns named by id or unique id prefix (default: all).
* :class:`ReportEntry` - one evaluate campaign: its corpus group, series label and summary.
* :func:`collect_entries` - the entries of a results store (evaluate campaigns; campaigns of
  other kinds are listed as skipped).
* :class:`LeakageEntry` and :func:`collect_leakage` - the leakage campaigns, each with its
  diagnostics (computed by a function the caller passes: the diagnostics layer sits above this
  one, see docs/design.md).
* :func:`plot_figures` and :func:`plot_leakage` (from
  :mod:`~ambitab_gym.evaluation.report_figures`) - the PNG (200 dpi) and PDF figures. Need
  matplotlib (``pip install 'ambitab-gym[plot]'``).
* :func:`render_html` - a self-contained HTML page (figures embedded) with the tables, the audit
  shares and the episode browser (:mod:`~ambitab_gym.evaluation.browser`).
* :func:`write_report` - all of the above into one folder; returns :class:`ReportFiles`.

The figures' conventions are in :mod:`ambitab_gym.evaluation.report_figures`.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.audit import AUDIT_LABELS, audit_items, audit_shares
from ambitab_gym.evaluation.browser import (
    campaign_label,
    campaign_records,
    episode_data,
    render_browser,
)
from ambitab_gym.evaluation.report_figures import (
    PALETTE,
    MissingPlotDependency,
    import_matplotlib,
    plot_figures,
    plot_leakage,
)
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import ROLES, Stat, Summary, summarize_campaign

__all__ = [
    "CORPUS_ORDER",
    "PALETTE",
    "LeakageEntry",
    "MissingPlotDependency",
    "ReportEntry",
    "ReportFiles",
    "collect_entries",
    "collect_leakage",
    "plot_figures",
    "plot_leakage",
    "render_html",
    "select_campaigns",
    "write_report",
]

#: The paper's corpus order; other corpora follow in order of appearance.
CORPUS_ORDER = ("bird", "ew_bird", "bird_interact", "ambrosia", "ambiqt", "taco")
#: Config keys that tell campaigns apart in series labels, in label order.
_LABEL_KEYS = ("asker", "oracle", "solver", "llm", "budget_slack", "limit", "seeds")


@dataclass(frozen=True)
class ReportEntry:
    """One evaluate campaign as the report shows it.

    Attributes:
        campaign_id: the campaign's id in the results file.
        group: the x-axis group (corpus display name, plus ``/split`` for a split).
        label: the series label (what tells this campaign apart from the others shown).
        summary: :func:`summarize_campaign` of the campaign's stored episodes.
        config: the campaign's stored configuration.
        corpus: the corpus name.

    Example:
        >>> rows = [{"condition": c, "seed": 0, "success": s, "precision": 1.0,
        ...          "recall": 1.0, "f1": 1.0, "error": None}
        ...         for c, s in (("none", 0.0), ("asker", 1.0), ("full", 1.0))]
        >>> entry = ReportEntry("c1", "Bird", "full", summarize_campaign(rows), {"seeds": [0]}, "bird")
        >>> entry.summary.gain.mean, entry.seeds
        (1.0, 1)
    """

    campaign_id: str
    group: str
    label: str
    summary: Summary
    config: dict = field(default_factory=dict)
    corpus: str = ""

    @property
    def seeds(self) -> int:
        """Number of seeds with stored episodes."""
        return max((len(s.per_seed) for s in self.summary.sr.values()), default=0)


@dataclass(frozen=True)
class LeakageEntry:
    """One leakage campaign as the report shows it (a row of paper Table 14).

    Attributes:
        campaign_id: the campaign's id.
        oracle: the oracle under study, as labelled (``llm (qwen3-14b)``, ``leaky-sql-responder``).
        dataset: the corpus display name (plus ``/split``).
        report: its diagnostics: a :class:`~ambitab_gym.diagnostics.LeakageReport` (read by
            attribute: ``diagnostics[name].interval``, ``.sd``, ``.per_seed``, ``.spec.label``).
        config: the campaign's stored configuration; corpus: the corpus name.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> interval = NS(mean=0.05, lo=0.01, hi=0.09, units=12)
        >>> d = NS(spec=NS(label="dJ_resp"), interval=interval, sd=0.01, per_seed={0: 0.05})
        >>> entry = LeakageEntry("c", "llm", "Bird", NS(diagnostics={"d_j_resp": d}, episodes=8))
        >>> entry.cells()["d_j_resp"]["lo"], entry.seeds
        (1.0, 1)
    """

    campaign_id: str
    oracle: str
    dataset: str
    report: Any
    config: dict = field(default_factory=dict)
    corpus: str = ""

    @property
    def seeds(self) -> int:
        """Number of seeds with episodes."""
        return max((len(d.per_seed) for d in self.report.diagnostics.values()), default=0)

    def cells(self) -> dict[str, dict[str, Any]]:
        """``{name: {"label", "mean", "sd", "lo", "hi", "units"}}`` in percentage points."""

        def points(value: float | None) -> float | None:
            return None if value is None else round(100.0 * value, 10) + 0.0

        return {
            name: {
                "label": d.spec.label,
                "mean": points(d.interval.mean),
                "sd": points(d.sd),
                "lo": points(d.interval.lo),
                "hi": points(d.interval.hi),
                "units": d.interval.units,
            }
            for name, d in self.report.diagnostics.items()
        }


@dataclass(frozen=True)
class ReportFiles:
    """Where a report went: the HTML page, the figures (PNG and PDF) and the JSON summary, with
    what was shown: evaluate entries, leakage entries, audit shares and the browser's episode
    count.

    >>> files = ReportFiles(Path("out"), Path("out/report.html"), Path("out/report.json"))
    >>> files.html.name, files.leakage, files.episodes
    ('report.html', (), 0)
    """

    out_dir: Path
    html: Path
    json: Path
    figures: tuple[Path, ...] = ()
    entries: tuple[ReportEntry, ...] = ()
    skipped: tuple[str, ...] = ()
    leakage: tuple[LeakageEntry, ...] = ()
    audit: tuple[dict, ...] = ()
    episodes: int = 0


def _display_corpus(campaign: Mapping[str, Any]) -> str:
    env_id = campaign.get("env_id") or ""
    if env_id.startswith("AmbiTab-") and env_id.endswith("-v0"):
        return env_id[len("AmbiTab-") : -len("-v0")]
    return str(campaign.get("corpus") or campaign.get("config", {}).get("corpus", "?"))


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("model") or json.dumps(value, sort_keys=True))
    if isinstance(value, list):
        return (
            f"{len(value)} seeds"
            if value and all(isinstance(v, int) for v in value)
            else str(value)
        )
    text = str(value)
    return text.rsplit(":", 1)[1] if ":" in text and not text.startswith("llm:") else text


def _labels(campaigns: Sequence[Mapping[str, Any]]) -> list[str]:
    configs = [c.get("config") or {} for c in campaigns]
    varying = [
        k for k in _LABEL_KEYS if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1
    ]
    labels = []
    for config in configs:
        if not varying:
            labels.append(_short(config.get("asker", "asker")))
        elif varying == ["asker"]:
            labels.append(_short(config.get("asker")))
        else:
            labels.append(", ".join(f"{k}: {_short(config.get(k))}" for k in varying))
    return labels


def select_campaigns(store: ResultsStore, campaign_ids: Iterable[str] | None = None) -> list[dict]:
    """The campaigns named by id or unique id prefix, in the order given (default: every
    campaign, oldest first).

    Raises:
        ValueError: an id matches no campaign, or several.
    """
    every = store.campaigns()
    if campaign_ids:
        chosen = []
        for wanted in campaign_ids:
            hits = [c for c in every if c["campaign_id"].startswith(wanted)]
            if len(hits) != 1:
                known = ", ".join(c["campaign_id"] for c in every) or "none"
                what = "no campaign" if not hits else f"{len(hits)} campaigns"
                verb = "matches" if not hits else "match"
                raise ConfigurationError(
                    f"{what} in the results file {verb} {wanted!r} (campaigns: {known})"
                )
            if hits[0] not in chosen:
                chosen.append(hits[0])
    else:
        chosen = every
    return chosen


def dataset_name(campaign: Mapping[str, Any]) -> str:
    """A campaign's corpus as the report labels it: the display name, plus ``/split``.

    >>> dataset_name({"env_id": "AmbiTab-Bird-v0", "config": {"split": "dev"}})
    'Bird/dev'
    """
    split = (campaign.get("config") or {}).get("split")
    return _display_corpus(campaign) + (f"/{split}" if split else "")


def collect_entries(
    store: ResultsStore, campaign_ids: Iterable[str] | None = None
) -> tuple[list[ReportEntry], list[str]]:
    """The report's entries, in corpus order, and notes on the campaigns left out.

    Args:
        store: an open results store.
        campaign_ids: campaigns to show (ids or unique id prefixes); default every evaluate
            campaign.

    Returns:
        ``(entries, skipped)``; ``skipped`` says which campaigns were left out and why.

    Raises:
        ValueError: an id matches no campaign, or several.
    """
    chosen = select_campaigns(store, campaign_ids)
    skipped, kept, rows = [], [], {}
    for campaign in chosen:
        if campaign["kind"] != "evaluate":
            if campaign["kind"] != "leakage":  # leakage campaigns: collect_leakage
                skipped.append(
                    f"{campaign['campaign_id']} (kind {campaign['kind']!r}: not shown here)"
                )
            continue
        episodes = store.episodes(campaign["campaign_id"])
        if not episodes:
            skipped.append(f"{campaign['campaign_id']} ({campaign['corpus']}: no episodes stored)")
            continue
        kept.append(campaign)
        rows[campaign["campaign_id"]] = episodes
    order = {name: i for i, name in enumerate(CORPUS_ORDER)}
    entries = []
    for campaign, label in zip(kept, _labels(kept), strict=True):
        group = dataset_name(campaign)
        entries.append(
            ReportEntry(
                campaign["campaign_id"],
                group,
                label,
                summarize_campaign(rows[campaign["campaign_id"]]),
                dict(campaign.get("config") or {}),
                campaign["corpus"],
            )
        )
    counts = Counter((e.group, e.label) for e in entries)
    entries = [  # the same setting twice on one corpus: tell them apart by id
        replace(e, label=f"{e.label} [{e.campaign_id[:6]}]")
        if counts[(e.group, e.label)] > 1
        else e
        for e in entries
    ]
    first = {}
    for i, entry in enumerate(entries):
        first.setdefault(entry.group, (order.get(entry.corpus, len(order)), i))
    entries.sort(key=lambda e: first[e.group])
    return entries, skipped


#: ``(store, campaign_id) -> LeakageReport``: e.g.
#: :func:`ambitab_gym.diagnostics.stored_leakage_report` (what ``ambitab-gym report`` passes).
LeakageFunction = Callable[[ResultsStore, str], Any]


def collect_leakage(
    store: ResultsStore,
    campaigns: Sequence[Mapping[str, Any]],
    compute: LeakageFunction,
) -> tuple[list[LeakageEntry], list[str]]:
    """The leakage campaigns among ``campaigns`` with episodes, in corpus order, each with its
    diagnostics from ``compute``; and notes on those left out (no episodes, or ``compute``
    failed)."""
    order = {name: i for i, name in enumerate(CORPUS_ORDER)}
    entries, skipped = [], []
    for campaign in campaigns:
        if campaign["kind"] != "leakage":
            continue
        cid = campaign["campaign_id"]
        if not store.done_keys(cid):
            skipped.append(f"{cid} ({campaign['corpus']}: no episodes stored)")
            continue
        try:
            report = compute(store, cid)
        except (ValueError, KeyError) as error:
            skipped.append(f"{cid} (leakage diagnostics failed: {error})")
            continue
        entries.append(
            LeakageEntry(
                cid,
                campaign_label(campaign, "oracle") or "deterministic",
                dataset_name(campaign),
                report,
                dict(campaign.get("config") or {}),
                campaign["corpus"],
            )
        )
    entries.sort(key=lambda e: order.get(e.corpus, len(order)))
    return entries, skipped


# -- HTML -----------------------------------------------------------------------------------------

#: (heading group, column, getter) of the table, in paper Table 8 order plus F1, gain and gap.
_COLUMNS = (
    ("Success rate (%)", "No dis.", lambda s: s.sr["none"]),
    ("Success rate (%)", "Asker", lambda s: s.sr["asker"]),
    ("Success rate (%)", "Full dis.", lambda s: s.sr["full"]),
    ("Asking (%)", "Precision", lambda s: s.precision),
    ("Asking (%)", "Recall", lambda s: s.recall),
    ("Asking (%)", "F1", lambda s: s.f1),
    ("Difference (pp)", "Gain", lambda s: s.gain),
    ("Difference (pp)", "Gap", lambda s: s.gap),
)
#: The page's style. Tables fit a 1400 px window however many settings differ: the page is
#: 88rem wide (prose stays at 60rem), numbers, ids and corpora never wrap, names (``.w``) and
#: headings do - a setting label between its ``key: value`` pairs (``.kv``), a leakage cell between
#: its estimate, interval and cluster count (``.nw``) - and each table sits in a ``.tw`` box
#: that scrolls sideways, so a wider table never widens the page.
_CSS = (
    'body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;'
    "max-width:88rem;padding:0 1rem;color:#222}h1{font-size:1.5rem}h2{font-size:1.15rem;"
    "margin-top:2rem}.tw{max-width:100%;overflow-x:auto}table{border-collapse:collapse;font-size:"
    ".9rem;margin:1rem 0}th,td{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:"
    "right;white-space:nowrap}th{white-space:normal}td.w,td.lk{white-space:normal;overflow-wrap:"
    "break-word}.kv,.nw{white-space:nowrap}thead tr:last-child th{border-bottom:2px solid #444}"
    "th{text-align:center}.l{text-align:left}tr.first td{border-top:1.5px solid #999}img{max-width:"
    "min(100%,72rem);height:auto}figcaption,.note{font-size:.9rem;color:#555;max-width:60rem}"
    "code{font-size:.85rem}"
)
_CAPTION = (
    "(a) Success rate without disambiguation (pale bar, left), with the evaluated asker (solid "
    "bar, right) and with full disambiguation (black line across both); the hatched span is the signed gap "
    "J<sub>full</sub> &minus; J<sub>asker</sub>, its value in percentage points above the bar "
    "(back-hatched when the asker is above full). (b) Precision and (c) recall of the evaluated "
    "asker; hatching is the shortfall from 100%. Error bars: sample SD over seeds."
)
_NOTE = (
    "Mean &plusmn; sample SD over seeds. SR over all episodes; precision over episodes with at "
    "least one question; recall and F1 over episodes with at least one registered ambiguity (F1 "
    "is the mean of episode-level harmonic means). Gain = SR asker &minus; SR none and gap = SR "
    "full &minus; SR asker, both within each seed before averaging."
)


def _cell(stat: Stat) -> str:
    if stat.mean is None:
        return '<td data-mean="">&ndash;</td>'
    sd = stat.sd or 0.0
    text = f"{100 * stat.mean:.1f} ± {100 * sd:.1f}"
    return f'<td data-mean="{stat.mean!r}" data-sd="{sd!r}">{text}</td>'


def _tds(cells: Iterable[Any], left: int, wrap: Iterable[int] = ()) -> str:
    """Table cells, the first ``left`` of them left-aligned; those at the indices ``wrap`` free
    to wrap (names and settings; numbers, ids and corpora stay on one line)."""
    wrap = set(wrap)
    tds = (
        f'<td class="{"l w" if i in wrap else "l"}">{html.escape(str(c))}</td>'
        if i < left
        else f"<td>{html.escape(str(c))}</td>"
        for i, c in enumerate(cells)
    )
    return "".join(tds)


def _setting(label: str) -> str:
    """A setting label as a cell's HTML: each ``key: value`` pair kept on one line, the line
    free to break between pairs (the text is the label's).

    >>> _setting("oracle: llm, solver: a<b")
    '<span class="kv">oracle: llm,</span> <span class="kv">solver: a&lt;b</span>'
    """
    pairs = label.split(", ")
    return " ".join(
        f'<span class="kv">{html.escape(pair)}{"," if i < len(pairs) - 1 else ""}</span>'
        for i, pair in enumerate(pairs)
    )


def _scroll(table: str) -> str:
    """``table``'s opening tag inside the box that scrolls sideways (closed by ``</div>``)."""
    return f'<div class="tw">{table}'


def _leakage_cell(cell: Mapping[str, Any]) -> str:
    if cell["mean"] is None:
        return '<td data-mean="">&ndash;</td>'
    attrs = " ".join(f'data-{key}="{cell[key]!r}"' for key in ("mean", "sd", "lo", "hi", "units"))
    text = f'<span class="nw">{cell["mean"]:.2f} ± {cell["sd"] or 0.0:.2f}</span>'
    if cell["lo"] is not None and cell["hi"] is not None:
        clusters = "1 cluster" if cell["units"] == 1 else f"{cell['units']} clusters"
        text += (
            f'<br><span class="ci"><span class="nw">[{cell["lo"]:.2f}, {cell["hi"]:.2f}]</span> '
            f'<span class="nw">· {clusters}</span></span>'
        )
    return f'<td class="lk" {attrs}>{text}</td>'


def _figure(path: Path, alt: str, caption: str, links: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{caption}<br>Files: {links}</figcaption></figure>"
    )


_LEAKAGE_CAPTION = (
    "Leakage diagnostics in percentage points, like paper Figure 4: the point is the estimate "
    "pooled over seeds, the bar its paired 95% AVT-cluster bootstrap interval; the line marks 0. "
    "Under the reference oracle dJ_resp, dJ_full and dRec_none are 0 by definition, and "
    "dRec_spec^Q is the reference recall of the specification-randomized asker."
)
_LEAKAGE_NOTE = (
    "Percentage points: mean &plusmn; sample SD over seeds (paper Table 14), then the 95% "
    "percentile bootstrap interval of the estimate pooled over seeds and the number of AVT "
    "clusters resampled (for dRec_spec^Q, AVTs linked by a shared replacement form one cluster; "
    "few clusters make a narrow interval that says little). Check: Definition 7 on the "
    "reference runs (full<sup>adv</sup> recall and precision 100, none<sup>adv</sup> recall 0)."
)
_AUDIT_NOTE = (
    "Distinct oracle answers credited for an ambiguity in the campaigns shown, and how many of "
    "them a person has marked with <code>ambitab-gym audit</code>; the mark shares are over the "
    "audited answers."
)


def _leakage_section(leakage: Sequence[LeakageEntry], by_name: Mapping[str, Path]) -> list[str]:
    esc = html.escape
    parts = ["<h2>Leakage diagnostics</h2>"]
    if "leakage.png" in by_name:
        links = " ".join(
            f'<a href="{esc(n)}">{esc(n)}</a>' for n in sorted(by_name) if n.startswith("leakage")
        )
        parts.append(
            _figure(
                by_name["leakage.png"], "Leakage diagnostics per corpus", _LEAKAGE_CAPTION, links
            )
        )
    labels = [cell["label"] for cell in leakage[0].cells().values()]
    heads = "".join(f"<th>{esc(label)}</th>" for label in labels)
    parts.append(
        _scroll('<table id="leakage">')
        + '<thead><tr><th class="l">Oracle</th><th class="l">Dataset</th>'
        f"<th>Seeds</th><th>Episodes</th>{heads}<th>Check</th></tr></thead><tbody>"
    )
    for e in leakage:
        ok = getattr(e.report, "reference_ok", None)
        check = "not run" if ok is None else ("ok" if ok else "FAILED")
        cells = "".join(_leakage_cell(c) for c in e.cells().values())
        head = _tds((e.oracle, e.dataset, e.seeds, e.report.episodes), 2, wrap=(0,))
        parts.append(f'<tr data-campaign="{esc(e.campaign_id)}">{head}{cells}<td>{check}</td></tr>')
    parts += ["</tbody></table></div>", f'<p class="note">{_LEAKAGE_NOTE}</p>']
    return parts


def _audit_section(audit: Sequence[Mapping[str, Any]]) -> list[str]:
    def share(value: float | None) -> str:
        return "&ndash;" if value is None else f"{100 * value:.1f}%"

    heads = ("Oracle", "Corpus", "Answers", "Audited", *AUDIT_LABELS.values())
    parts = [
        "<h2>Oracle-response audit</h2>",
        _scroll('<table id="audit">')
        + "<thead><tr>"
        + "".join(f'<th class="{"l" if i < 2 else ""}">{h}</th>' for i, h in enumerate(heads))
        + "</tr></thead><tbody>",
    ]
    for row in audit:
        head = _tds((row["oracle"], row["corpus"], row["items"]), 2, wrap=(0,))
        audited = f'<td data-share="{row["share"]!r}">{row["audited"]} ({share(row["share"])})</td>'
        marks = "".join(
            f'<td data-mark="{m}" data-count="{row[m]}">{row[m]} ({share(row[m + "_share"])})</td>'
            for m in AUDIT_LABELS
        )
        parts.append(f"<tr>{head}{audited}{marks}</tr>")
    parts += ["</tbody></table></div>", f'<p class="note">{_AUDIT_NOTE}</p>']
    return parts


def render_html(
    entries: Sequence[ReportEntry],
    figures: Sequence[Path] = (),
    *,
    source: str = "",
    skipped: Sequence[str] = (),
    leakage: Sequence[LeakageEntry] = (),
    audit: Sequence[Mapping[str, Any]] = (),
    browser: str = "",
) -> str:
    """The report page: the combined figure (embedded as base64 PNG) and the table; the leakage
    figure and table; the audit shares; the episode browser.

    Args:
        entries: what :func:`collect_entries` returned.
        figures: the figure files (``figure3.png`` and ``leakage.png`` are embedded; all are
            linked relatively).
        source: the results file, for the heading.
        skipped: notes on campaigns left out.
        leakage: what :func:`collect_leakage` returned.
        audit: :func:`~ambitab_gym.evaluation.audit.audit_shares` rows.
        browser: the browser's HTML section (:func:`~ambitab_gym.evaluation.browser.render_browser`).

    Returns:
        The HTML text. Each figure cell carries ``data-mean`` and ``data-sd`` (rates in [0, 1]);
        each leakage cell ``data-mean``, ``data-sd``, ``data-lo``, ``data-hi`` (points) and
        ``data-units`` (clusters).
    """
    esc = html.escape
    count = len(entries) + len(leakage)
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>ambitab-gym report</title><style>{_CSS}</style></head><body>",
        "<h1>ambitab-gym evaluation report</h1>",
        f'<p class="note">Results file <code>{esc(source)}</code>: {count} campaign(s).</p>',
    ]
    by_name = {p.name: p for p in figures}
    if "figure3.png" in by_name:
        links = " ".join(
            f'<a href="{esc(n)}">{esc(n)}</a>' for n in sorted(by_name) if not n.startswith("leak")
        )
        parts.append(
            _figure(
                by_name["figure3.png"],
                "Success rate, precision and recall per corpus",
                _CAPTION,
                links,
            )
        )
    if entries:
        parts += _summary_tables(entries)
    if leakage:
        parts += _leakage_section(leakage, by_name)
    if audit:
        parts += _audit_section(audit)
    if browser:
        parts.append(browser)
    if skipped:
        items = "".join(f"<li>{esc(s)}</li>" for s in skipped)
        parts.append(f'<p class="note">Not shown:</p><ul class="note">{items}</ul>')
    return "\n".join([*parts, "</body></html>"]) + "\n"


def _summary_tables(entries: Sequence[ReportEntry]) -> list[str]:
    esc = html.escape
    groups = list(dict.fromkeys(group for group, _, _ in _COLUMNS))
    spans = "".join(
        f"<th colspan={sum(g == group for g, _, _ in _COLUMNS)}>{esc(group)}</th>"
        for group in groups
    )
    fixed = "".join(
        f'<th rowspan=2 class="{c}">{n}</th>'
        for n, c in (("Corpus", "l"), ("Setting", "l"), ("Seeds", ""), ("Episodes", ""))
    )
    parts = [
        "<h2>Success rate and asking quality</h2>",
        _scroll('<table id="summary">') + f"<thead><tr>{fixed}{spans}</tr><tr>",
        "".join(f"<th>{esc(name)}</th>" for _, name, _ in _COLUMNS) + "</tr></thead><tbody>",
    ]
    previous = None
    for e in entries:
        first = ' class="first"' if previous not in (None, e.group) else ""
        previous = e.group
        setting = f'<td class="l w">{_setting(e.label)}</td>'
        head = _tds((e.group,), 1) + setting + _tds((e.seeds, e.summary.episodes), 0)
        cells = "".join(_cell(get(e.summary)) for _, _, get in _COLUMNS)
        parts.append(f'<tr{first} data-campaign="{esc(e.campaign_id)}">{head}{cells}</tr>')
    parts += ["</tbody></table></div>", f'<p class="note">{_NOTE}</p>', "<h2>Campaigns</h2>"]
    heads = (
        "Campaign",
        "Corpus",
        "Asker",
        "Solver",
        "Oracle",
        "Split",
        "Errors",
        "Unreadable m/r/a/s",
        "Reveals SQL",
    )
    parts.append(
        _scroll('<table id="campaigns">')
        + "<thead><tr>"
        + "".join(f'<th class="{"l" if i < 6 else ""}">{h}</th>' for i, h in enumerate(heads))
        + "</tr></thead><tbody>"
    )
    for e in entries:
        c = e.config
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(e.summary.errors.items())) or "0"
        keys = ("asker", "solver", "oracle")
        cells = (e.campaign_id, e.group, *(c.get(k, "") for k in keys), c.get("split") or "all")
        # unreadable replies per role (matcher/responder/asker/solver) and episodes whose oracle
        # answers reveal SQL (summary.unreadable_counts, summary.revealing_turns)
        unreadable = "/".join(str(e.summary.unreadable.get(r, 0)) for r in ROLES)
        reveals = e.summary.reveals_sql_episodes
        parts.append(f"<tr>{_tds((*cells, errors, unreadable, reveals), 6, wrap=(2, 3, 4))}</tr>")
    parts.append("</tbody></table></div>")
    return parts


def write_report(
    results: str | Path,
    out_dir: str | Path | None = None,
    *,
    campaign_ids: Iterable[str] | None = None,
    figures: bool = True,
    dpi: int = 200,
    leakage: LeakageFunction | None = None,
    browser: bool = True,
) -> ReportFiles:
    """Write figures, ``report.html`` and ``report.json`` for a results file.

    Args:
        results: the DuckDB results file.
        out_dir: where to write (default: ``<results stem>-report`` next to the file).
        campaign_ids: campaigns to show (default: every campaign with episodes).
        figures: draw the figures (needs matplotlib); without, the page has the tables only.
        dpi: PNG resolution.
        leakage: how to compute a leakage campaign's diagnostics,
            ``(store, campaign_id) -> LeakageReport`` - pass
            :func:`ambitab_gym.diagnostics.stored_leakage_report` (``ambitab-gym report`` does).
            None leaves leakage campaigns out (listed as not shown).
        browser: add the episode browser (every stored episode of the campaigns shown).

    Returns:
        The paths written, the entries shown and the campaigns left out.

    Raises:
        FileNotFoundError: the results file does not exist.
        ValueError: no campaign with episodes to show, or an unknown campaign id.
        MissingPlotDependency: ``figures`` is true and matplotlib is missing.
    """
    results = Path(results)
    if not results.is_file():
        raise FileNotFoundError(
            f"no results file at {results}: run `ambitab-gym evaluate ... --results {results}` first"
        )
    out = Path(out_dir) if out_dir is not None else results.with_name(results.stem + "-report")
    with ResultsStore(results) as store:
        entries, skipped = collect_entries(store, campaign_ids)
        chosen = select_campaigns(store, campaign_ids)
        leaks: list[LeakageEntry] = []
        if leakage is not None:
            leaks, notes = collect_leakage(store, chosen, leakage)
            skipped += notes
        else:
            skipped += [
                f"{c['campaign_id']} (kind 'leakage': pass leakage=stored_leakage_report)"
                for c in chosen
                if c["kind"] == "leakage"
            ]
        shown_ids = {e.campaign_id for e in entries} | {e.campaign_id for e in leaks}
        shown = [c for c in chosen if c["campaign_id"] in shown_ids]
        if not shown:
            notes = "; ".join(skipped) or "the file holds no campaigns"
            raise ConfigurationError(
                f"nothing to report in {results}: no evaluate or leakage campaign with episodes "
                f"({notes})"
            )
        episodes = {c["campaign_id"]: store.episodes(c["campaign_id"]) for c in shown}
        marks = store.audit_marks()
    if figures:
        import_matplotlib()  # fail before writing anything
    records, notes = campaign_records(shown)
    skipped += notes
    names = {c["campaign_id"]: dataset_name(c) for c in shown}
    items = audit_items(shown, episodes, records, corpus_names=names)
    audit = audit_shares(items, marks)
    section = ""
    count = sum(len(rows) for rows in episodes.values())
    if browser:
        section = render_browser(episode_data(shown, episodes, records, corpus_names=names))
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if figures and entries:
        paths += plot_figures(entries, out, dpi=dpi)
    if figures and leaks:
        paths += plot_leakage(leaks, out, dpi=dpi)
    page = out / "report.html"
    page.write_text(
        render_html(
            entries,
            paths,
            source=str(results),
            skipped=skipped,
            leakage=leaks,
            audit=audit,
            browser=section,
        ),
        "utf-8",
    )
    rows = [
        {"campaign_id": e.campaign_id, "group": e.group, "label": e.label, "corpus": e.corpus}
        | e.summary.to_json()
        for e in entries
    ]
    rows += [
        {
            "campaign_id": e.campaign_id,
            "kind": "leakage",
            "oracle": e.oracle,
            "group": e.dataset,
            "corpus": e.corpus,
            "diagnostics": e.cells(),
            "reference_ok": getattr(e.report, "reference_ok", None),
        }
        for e in leaks
    ]
    summary = out / "report.json"
    summary.write_text(json.dumps(rows, indent=2) + "\n", "utf-8")
    return ReportFiles(
        out,
        page,
        summary,
        tuple(paths),
        tuple(entries),
        tuple(skipped),
        tuple(leaks),
        tuple(audit),
        count if browser else 0,
    )
