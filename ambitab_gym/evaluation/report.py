"""Figures and an HTML page from a results file (paper Figure 3 (a-c) and the Table 8 columns).

* :class:`ReportEntry` - one evaluate campaign: its corpus group, series label and summary.
* :func:`collect_entries` - the entries of a results store (evaluate campaigns only; campaigns of
  other kinds are listed as skipped).
* :func:`plot_figures` (from :mod:`~ambitab_gym.evaluation.report_figures`) - the PNG (200 dpi)
  and PDF figures. Needs matplotlib (``pip install 'ambitab-gym[plot]'``).
* :func:`render_html` - a self-contained HTML page (figures embedded) with the table.
* :func:`write_report` - all of the above into one folder; returns :class:`ReportFiles`.

The figures' conventions are in :mod:`ambitab_gym.evaluation.report_figures`.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.report_figures import (
    PALETTE,
    MissingPlotDependency,
    import_matplotlib,
    plot_figures,
)
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import Stat, Summary, summarize_campaign

__all__ = [
    "CORPUS_ORDER",
    "PALETTE",
    "MissingPlotDependency",
    "ReportEntry",
    "ReportFiles",
    "collect_entries",
    "plot_figures",
    "render_html",
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
class ReportFiles:
    """Where a report went: the HTML page, the figures (PNG and PDF) and the JSON summary."""

    out_dir: Path
    html: Path
    json: Path
    figures: tuple[Path, ...] = ()
    entries: tuple[ReportEntry, ...] = ()
    skipped: tuple[str, ...] = ()


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
    every = store.campaigns()
    if campaign_ids:
        chosen = []
        for wanted in campaign_ids:
            hits = [c for c in every if c["campaign_id"].startswith(wanted)]
            if len(hits) != 1:
                known = ", ".join(c["campaign_id"] for c in every) or "none"
                what = "no campaign" if not hits else f"{len(hits)} campaigns"
                raise ConfigurationError(
                    f"{what} in the results file match {wanted!r} (campaigns: {known})"
                )
            if hits[0] not in chosen:
                chosen.append(hits[0])
    else:
        chosen = every
    skipped, kept, rows = [], [], {}
    for campaign in chosen:
        if campaign["kind"] != "evaluate":
            skipped.append(f"{campaign['campaign_id']} (kind {campaign['kind']!r}: not shown here)")
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
        split = (campaign.get("config") or {}).get("split")
        group = _display_corpus(campaign) + (f"/{split}" if split else "")
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
_CSS = (
    'body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;'
    "max-width:72rem;padding:0 1rem;color:#222}h1{font-size:1.5rem}h2{font-size:1.15rem;"
    "margin-top:2rem}table{border-collapse:collapse;font-size:.9rem;margin:1rem 0}th,td{padding:"
    ".3rem .6rem;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}thead tr:last-"
    "child th{border-bottom:2px solid #444}th{text-align:center}.l{text-align:left}tr.first td"
    "{border-top:1.5px solid #999}img{max-width:100%;height:auto}figcaption,.note{font-size:.9rem;"
    "color:#555;max-width:60rem}code{font-size:.85rem}"
)
_CAPTION = (
    "(a) Success rate without disambiguation (pale bar), with the evaluated asker (solid bar) "
    "and with full disambiguation (black line); the hatched span is the signed gap "
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


def _tds(cells: Iterable[Any], left: int) -> str:
    """Table cells, the first ``left`` of them left-aligned."""
    tds = (
        f'<td class="l">{html.escape(str(c))}</td>'
        if i < left
        else f"<td>{html.escape(str(c))}</td>"
        for i, c in enumerate(cells)
    )
    return "".join(tds)


def render_html(
    entries: Sequence[ReportEntry],
    figures: Sequence[Path] = (),
    *,
    source: str = "",
    skipped: Sequence[str] = (),
) -> str:
    """The report page: the combined figure (embedded as base64 PNG) and the table.

    Args:
        entries: what :func:`collect_entries` returned.
        figures: the figure files (``figure3.png`` is embedded; all are linked relatively).
        source: the results file, for the heading.
        skipped: notes on campaigns left out.

    Returns:
        The HTML text. Each figure cell carries ``data-mean`` and ``data-sd`` (rates in [0, 1]).
    """
    esc = html.escape
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>ambitab-gym report</title><style>{_CSS}</style></head><body>",
        "<h1>ambitab-gym evaluation report</h1>",
        f'<p class="note">Results file <code>{esc(source)}</code>: {len(entries)} campaign(s).</p>',
    ]
    by_name = {p.name: p for p in figures}
    if "figure3.png" in by_name:
        data = base64.b64encode(by_name["figure3.png"].read_bytes()).decode("ascii")
        links = " ".join(f'<a href="{esc(name)}">{esc(name)}</a>' for name in sorted(by_name))
        parts.append(
            '<figure><img alt="Success rate, precision and recall per corpus" '
            f'src="data:image/png;base64,{data}"><figcaption>{_CAPTION}<br>Files: {links}'
            "</figcaption></figure>"
        )
    groups = list(dict.fromkeys(group for group, _, _ in _COLUMNS))
    spans = "".join(
        f"<th colspan={sum(g == group for g, _, _ in _COLUMNS)}>{esc(group)}</th>"
        for group in groups
    )
    fixed = "".join(
        f'<th rowspan=2 class="{c}">{n}</th>'
        for n, c in (("Corpus", "l"), ("Setting", "l"), ("Seeds", ""), ("Episodes", ""))
    )
    parts += [
        "<h2>Success rate and asking quality</h2>",
        f'<table id="summary"><thead><tr>{fixed}{spans}</tr><tr>',
        "".join(f"<th>{esc(name)}</th>" for _, name, _ in _COLUMNS) + "</tr></thead><tbody>",
    ]
    previous = None
    for e in entries:
        first = ' class="first"' if previous not in (None, e.group) else ""
        previous = e.group
        head = _tds((e.group, e.label, e.seeds, e.summary.episodes), 2)
        cells = "".join(_cell(get(e.summary)) for _, _, get in _COLUMNS)
        parts.append(f'<tr{first} data-campaign="{esc(e.campaign_id)}">{head}{cells}</tr>')
    parts += ["</tbody></table>", f'<p class="note">{_NOTE}</p>', "<h2>Campaigns</h2>"]
    heads = ("Campaign", "Corpus", "Asker", "Solver", "Oracle", "Split", "Errors")
    parts.append(
        '<table id="campaigns"><thead><tr>'
        + "".join(f'<th class="{"l" if i < 6 else ""}">{h}</th>' for i, h in enumerate(heads))
        + "</tr></thead><tbody>"
    )
    for e in entries:
        c = e.config
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(e.summary.errors.items())) or "0"
        keys = ("asker", "solver", "oracle")
        cells = (e.campaign_id, e.group, *(c.get(k, "") for k in keys), c.get("split") or "all")
        parts.append(f"<tr>{_tds((*cells, errors), 6)}</tr>")
    parts.append("</tbody></table>")
    if skipped:
        items = "".join(f"<li>{esc(s)}</li>" for s in skipped)
        parts.append(f'<p class="note">Not shown:</p><ul class="note">{items}</ul>')
    return "\n".join([*parts, "</body></html>"]) + "\n"


def write_report(
    results: str | Path,
    out_dir: str | Path | None = None,
    *,
    campaign_ids: Iterable[str] | None = None,
    figures: bool = True,
    dpi: int = 200,
) -> ReportFiles:
    """Write figures, ``report.html`` and ``report.json`` for a results file.

    Args:
        results: the DuckDB results file.
        out_dir: where to write (default: ``<results stem>-report`` next to the file).
        campaign_ids: campaigns to show (default: every evaluate campaign).
        figures: draw the figures (needs matplotlib); without, the page has the table only.
        dpi: PNG resolution.

    Returns:
        The paths written, the entries shown and the campaigns left out.

    Raises:
        FileNotFoundError: the results file does not exist.
        ValueError: no evaluate campaign with episodes to show, or an unknown campaign id.
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
    if not entries:
        notes = "; ".join(skipped) or "the file holds no campaigns"
        raise ConfigurationError(
            f"nothing to report in {results}: no evaluate campaign with episodes ({notes})"
        )
    if figures:
        import_matplotlib()  # fail before writing anything
    out.mkdir(parents=True, exist_ok=True)
    paths = plot_figures(entries, out, dpi=dpi) if figures else []
    page = out / "report.html"
    page.write_text(render_html(entries, paths, source=str(results), skipped=skipped), "utf-8")
    rows = [
        {"campaign_id": e.campaign_id, "group": e.group, "label": e.label, "corpus": e.corpus}
        | e.summary.to_json()
        for e in entries
    ]
    summary = out / "report.json"
    summary.write_text(json.dumps(rows, indent=2) + "\n", "utf-8")
    return ReportFiles(out, page, summary, tuple(paths), tuple(entries), tuple(skipped))
