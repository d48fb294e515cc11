"""Figures and an HTML page from a results file (paper Figure 3 (a-c) and the Table 8 columns).

* :class:`ReportEntry` - one evaluate campaign: its corpus group, series label and summary.
* :func:`collect_entries` - the entries of a results store (evaluate campaigns only; campaigns of
  other kinds are listed as skipped).
* :func:`plot_figures` - the PNG (200 dpi) and PDF figures: success rate, precision, recall, and
  the three panels combined. Needs matplotlib (``pip install 'ambitab-gym[plot]'``).
* :func:`render_html` - a self-contained HTML page (figures embedded) with the table.
* :func:`write_report` - all of the above into one folder; returns :class:`ReportFiles`.

Figure conventions (paper Figure 3, C.2, C.3): one group per corpus (and split), one bar per
campaign setting. Success rate: the pale bar is SR without disambiguation, the solid bar SR with
the evaluated asker, the black line SR with full disambiguation; the hatched span is the signed
gap J_full - J_asker (back-hatched when the asker is above full). Precision and recall: the
hatched span is the shortfall from 100%. Error bars: sample SD over seeds.
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

from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import Stat, Summary, summarize

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
#: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442")
#: Config keys that tell campaigns apart in series labels, in label order.
_LABEL_KEYS = ("asker", "oracle", "solver", "llm", "budget_slack", "limit", "seeds")

_INSTALL_HINT = "plotting needs matplotlib: pip install 'ambitab-gym[plot]'"


class MissingPlotDependency(RuntimeError):
    """matplotlib is not installed."""


@dataclass(frozen=True)
class ReportEntry:
    """One evaluate campaign as the report shows it.

    Attributes:
        campaign_id: the campaign's id in the results file.
        group: the x-axis group (corpus display name, plus ``/split`` for a split).
        label: the series label (what tells this campaign apart from the others shown).
        summary: :func:`summarize` of the campaign's stored episodes.
        config: the campaign's stored configuration.
        corpus: the corpus name.

    Example:
        >>> rows = [{"condition": c, "seed": 0, "success": s, "precision": 1.0,
        ...          "recall": 1.0, "f1": 1.0, "error": None}
        ...         for c, s in (("none", 0.0), ("asker", 1.0), ("full", 1.0))]
        >>> entry = ReportEntry("c1", "Bird", "full", summarize(rows), {"seeds": [0]}, "bird")
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
                raise ValueError(
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
                summarize(rows[campaign["campaign_id"]]),
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


# -- figures --------------------------------------------------------------------------------------


def _import_matplotlib():
    """matplotlib, imported lazily. Figures are ``Figure`` objects saved by the Agg/PDF canvases,
    so pyplot's global state and the user's backend are left alone."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingPlotDependency(_INSTALL_HINT) from None
    return matplotlib, Figure


def _pale(colour: str, share: float = 0.38) -> tuple[float, float, float]:
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return tuple(share * c + (1 - share) for c in (r, g, b))


_STYLE = {
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.8,
    "hatch.linewidth": 0.6,
    "errorbar.capsize": 2,
    "pdf.fonttype": 42,
}
_ERR = {"fmt": "none", "ecolor": "#333333", "elinewidth": 0.8, "capthick": 0.8, "zorder": 4}
_PANELS = {"success": "Success rate", "precision": "Precision", "recall": "Recall"}
_GAP, _OVER = "/////", "\\\\\\\\\\"


class _Layout:
    """Bar positions: one group per corpus, one slot per series label."""

    def __init__(self, entries: Sequence[ReportEntry]) -> None:
        self.groups = list(dict.fromkeys(e.group for e in entries))
        self.labels = list(dict.fromkeys(e.label for e in entries))
        self.colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(self.labels)}
        self.slot = 0.8 / len(self.labels)

    def x(self, entry: ReportEntry) -> float:
        i, n = self.labels.index(entry.label), len(self.labels)
        return self.groups.index(entry.group) + (i - (n - 1) / 2) * self.slot


def _pct(stat: Stat) -> tuple[float, float] | None:
    return None if stat.mean is None else (100 * stat.mean, 100 * (stat.sd or 0.0))


def _err(ax, x: float, value: tuple[float, float]) -> None:
    if value[1] > 1e-9:  # an SD of 0 (one seed, or no variation) draws no bar
        ax.errorbar(x, value[0], value[1], **_ERR)


def _hatched(ax, x, bottom, height, width, colour, pattern=_GAP) -> None:
    ax.bar(
        x,
        height,
        width,
        bottom=bottom,
        facecolor="white",
        edgecolor=colour,
        hatch=pattern,
        linewidth=0,
        zorder=2,
    )


def _draw_success(ax, entries: Sequence[ReportEntry], layout: _Layout) -> bool:
    """Panel (a); returns whether some asker is above full (a negative gap)."""
    w, negative = layout.slot * 0.86, False
    for e in entries:
        x, colour = layout.x(e), layout.colours[e.label]
        none, ask, full = (_pct(e.summary.sr[c]) for c in ("none", "asker", "full"))
        if none:
            ax.bar(x, none[0], w, color=_pale(colour), linewidth=0, zorder=1)
            _err(ax, x - w * 0.37, none)
        if ask:
            ax.bar(x, ask[0], w * 0.5, color=colour, linewidth=0, zorder=2)
            _err(ax, x, ask)
        if full:
            ax.hlines(full[0], x - w / 2, x + w / 2, color="black", linewidth=1.4, zorder=3)
            _err(ax, x + w * 0.37, full)
        if not (ask and full):
            continue
        low, high = sorted((ask[0], full[0]))
        if high - low > 1e-9:
            over = full[0] < ask[0]
            negative |= over
            _hatched(
                ax,
                x,
                low,
                high - low,
                w * 0.5,
                "#444444" if over else colour,
                _OVER if over else _GAP,
            )
        if len(layout.labels) <= 3:  # the signed gap in points above the slot
            top = max(ask[0] + ask[1], full[0] + full[1], (none[0] + none[1]) if none else 0)
            ax.text(
                x,
                min(top, 100) + 1.5,
                f"{full[0] - ask[0]:+.1f}",
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="#333333",
            )
    return negative


def _draw_rate(ax, entries: Sequence[ReportEntry], layout: _Layout, metric: str) -> None:
    """Panel (b) or (c): the rate, hatched up to the 100% reference."""
    w = layout.slot * 0.6
    for e in entries:
        x, colour = layout.x(e), layout.colours[e.label]
        value = _pct(getattr(e.summary, metric))
        if value is None:
            ax.text(x, 2, "n/a", ha="center", va="bottom", fontsize=6.5, rotation=90)
            continue
        _hatched(ax, x, value[0], 100 - value[0], w, _pale(colour, 0.75))
        ax.bar(x, value[0], w, color=colour, linewidth=0, zorder=2)
        ax.bar(x, 100, w, fill=False, edgecolor=_pale(colour, 0.75), linewidth=0.5, zorder=2)
        _err(ax, x, value)


def _style_axes(ax, layout: _Layout, panel: str, title: str, rotate: bool) -> None:
    ax.set_xticks(range(len(layout.groups)))
    ax.set_xticklabels(
        layout.groups,
        rotation=30 if rotate else 0,
        ha="right" if rotate else "center",
        rotation_mode="anchor",
    )
    ax.tick_params(axis="x", length=0)
    ax.set_xlim(-0.55, len(layout.groups) - 0.45)
    ax.set_ylim(0, 109)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(f"{_PANELS[panel]} (%)")
    ax.set_title(title, loc="left", fontweight="bold")
    ax.yaxis.grid(True, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def _legends(fig, layout: _Layout, negative: bool, with_success: bool) -> None:
    """The conditions' key above the panels; the series' key (several settings) below."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    one = len(layout.labels) == 1
    grey = layout.colours[layout.labels[0]] if one else "#7f7f7f"
    hatch = {"facecolor": "white", "linewidth": 0}
    keys = [
        Patch(color=_pale(grey), label="no disambiguation"),
        Patch(color=grey, label="with asker"),
        Line2D([], [], color="black", linewidth=1.4, label="full disambiguation"),
        Patch(edgecolor=grey, hatch=_GAP, label="gap to full (pp)", **hatch),
    ]
    if negative:
        keys.append(Patch(edgecolor="#444444", hatch=_OVER, label="asker above full", **hatch))
    series = [Patch(color=layout.colours[label], label=label) for label in layout.labels]
    for where, handles in (
        ("upper", keys if with_success else []),
        ("lower", [] if one else series),
    ):
        if handles:
            fig.legend(
                handles=handles,
                loc=f"outside {where} center",
                frameon=False,
                ncol=min(len(handles), 5),
                handlelength=1.6,
                columnspacing=1.2,
            )


def plot_figures(
    entries: Sequence[ReportEntry], out_dir: str | Path, *, dpi: int = 200
) -> list[Path]:
    """Draw the figures into ``out_dir`` as PNG (``dpi``) and PDF; returns their paths.

    Files: ``figure3`` (the three panels), ``success``, ``precision`` and ``recall``.

    Raises:
        MissingPlotDependency: matplotlib is not installed.
        ValueError: there is nothing to plot.
    """
    if not entries:
        raise ValueError("no evaluate campaigns to plot")
    matplotlib, Figure = _import_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    layout = _Layout(entries)
    groups, series = len(layout.groups), len(layout.labels)
    wide = min(9.0, max(5.0, 1.0 + 0.7 * groups * series**0.5))
    plans = {  # name -> (figure size, panels)
        "figure3": ((max(wide, 6.5), 5.4), ("success", "precision", "recall")),
        "success": ((wide, 2.9), ("success",)),
        "precision": ((max(3.4, wide / 2), 2.6), ("precision",)),
        "recall": ((max(3.4, wide / 2), 2.6), ("recall",)),
    }
    paths: list[Path] = []
    with matplotlib.rc_context(_STYLE):
        for name, (size, panels) in plans.items():
            fig = Figure(figsize=size, layout="constrained")
            if len(panels) == 3:
                grid = fig.add_gridspec(2, 2, height_ratios=(1.15, 1))
                axes = [
                    fig.add_subplot(grid[0, :]),
                    fig.add_subplot(grid[1, 0]),
                    fig.add_subplot(grid[1, 1]),
                ]
            else:
                axes = [fig.add_subplot()]
            negative = False
            for letter, panel, ax in zip("abc", panels, axes, strict=False):
                if panel == "success":
                    negative = _draw_success(ax, entries, layout)
                else:
                    _draw_rate(ax, entries, layout, panel)
                title = f"({letter}) {_PANELS[panel]}" if len(panels) > 1 else _PANELS[panel]
                narrow = panel != "success" and groups * series > 4
                _style_axes(ax, layout, panel, title, rotate=narrow and groups > 3)
            _legends(fig, layout, negative, "success" in panels)
            for suffix in ("png", "pdf"):
                path = out / f"{name}.{suffix}"
                meta = {"CreationDate": None} if suffix == "pdf" else {"Software": None}
                fig.savefig(path, dpi=dpi, metadata=meta)
                paths.append(path)
    return paths


# -- HTML -----------------------------------------------------------------------------------------

_COLUMNS = (
    ("SR none", lambda s: s.sr["none"]),
    ("SR asker", lambda s: s.sr["asker"]),
    ("SR full", lambda s: s.sr["full"]),
    ("Precision", lambda s: s.precision),
    ("Recall", lambda s: s.recall),
    ("F1", lambda s: s.f1),
    ("Gain", lambda s: s.gain),
    ("Gap", lambda s: s.gap),
)

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.9rem;margin:1rem 0}
th,td{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th{border-bottom:2px solid #444}td.l,th.l{text-align:left}
tr.first td{border-top:1.5px solid #999}
figure{margin:1rem 0}img{max-width:100%;height:auto}figcaption{font-size:.9rem;color:#444;max-width:60rem}
.note{color:#555;font-size:.9rem}code{font-size:.85rem}
"""


def _cell(stat: Stat) -> str:
    if stat.mean is None:
        return '<td data-mean="">&ndash;</td>'
    sd = stat.sd or 0.0
    return f'<td data-mean="{stat.mean!r}" data-sd="{sd!r}">{100 * stat.mean:.1f} ± {100 * sd:.1f}</td>'


def render_html(
    entries: Sequence[ReportEntry],
    figures: Mapping[str, Path] | None = None,
    *,
    source: str = "",
    skipped: Sequence[str] = (),
) -> str:
    """The report page: figures (embedded as base64 PNG) and the table, mean ± SD over seeds.

    Args:
        entries: what :func:`collect_entries` returned.
        figures: figure name -> PNG path (``figure3`` is shown when present).
        source: the results file, for the heading.
        skipped: notes on campaigns left out.

    Returns:
        The HTML text. Each table cell carries ``data-mean`` and ``data-sd`` (rates in [0, 1]).
    """
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>ambitab-gym report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>ambitab-gym evaluation report</h1>",
        f'<p class="note">Results file: <code>{esc(source)}</code>; {len(entries)} campaign(s).</p>',
    ]
    png = (figures or {}).get("figure3")
    if png is not None:
        data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
        parts.append(
            f'<figure><img alt="Success rate, precision and recall per corpus" src="data:image/png;base64,{data}">'
            "<figcaption>(a) Success rate without disambiguation (pale bar), with the evaluated asker "
            "(solid bar) and with full disambiguation (black line); the hatched span is the signed gap "
            "J<sub>full</sub> &minus; J<sub>asker</sub> (its value in percentage points above the bar; "
            "back-hatched when the asker is above full). (b) Precision and (c) recall of the evaluated "
            "asker; hatching is the shortfall from 100%. Error bars: sample standard deviation over "
            "seeds.</figcaption></figure>"
        )
    heads = "".join(f"<th>{esc(name)} (%)</th>" for name, _ in _COLUMNS)
    parts += [
        "<h2>Success rate and asking quality</h2>",
        '<table id="summary"><thead><tr><th class="l">Corpus</th><th class="l">Setting</th>'
        f"<th>Seeds</th><th>Episodes</th>{heads}</tr></thead><tbody>",
    ]
    previous = None
    for e in entries:
        first = ' class="first"' if previous is not None and e.group != previous else ""
        previous = e.group
        cells = "".join(_cell(get(e.summary)) for _, get in _COLUMNS)
        parts.append(
            f'<tr{first} data-campaign="{esc(e.campaign_id)}"><td class="l">{esc(e.group)}</td>'
            f'<td class="l">{esc(e.label)}</td><td>{e.seeds}</td><td>{e.summary.episodes}</td>{cells}</tr>'
        )
    parts.append("</tbody></table>")
    parts.append(
        '<p class="note">Mean &plusmn; sample SD over seeds, in %. SR over all episodes; precision '
        "over episodes with at least one question; recall and F1 over episodes with at least one "
        "registered ambiguity (F1 is the mean of episode-level harmonic means). Gain = SR asker "
        "&minus; SR none and gap = SR full &minus; SR asker, both within each seed.</p>"
    )
    parts += [
        "<h2>Campaigns</h2>",
        '<table id="campaigns"><thead><tr><th class="l">Campaign</th><th class="l">Corpus</th>'
        '<th class="l">Asker</th><th class="l">Solver</th><th class="l">Oracle</th>'
        '<th class="l">Split</th><th>Errors</th></tr></thead><tbody>',
    ]
    for e in entries:
        c = e.config
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(e.summary.errors.items())) or "0"
        parts.append(
            f'<tr><td class="l"><code>{esc(e.campaign_id)}</code></td><td class="l">{esc(e.group)}</td>'
            f'<td class="l">{esc(str(c.get("asker", "")))}</td><td class="l">{esc(str(c.get("solver", "")))}</td>'
            f'<td class="l">{esc(str(c.get("oracle", "")))}</td><td class="l">{esc(str(c.get("split") or "all"))}</td>'
            f"<td>{esc(errors)}</td></tr>"
        )
    parts.append("</tbody></table>")
    if skipped:
        items = "".join(f"<li>{esc(s)}</li>" for s in skipped)
        parts.append(f'<p class="note">Not shown:</p><ul class="note">{items}</ul>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


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
        raise ValueError(
            f"nothing to report in {results}: no evaluate campaign with episodes ({notes})"
        )
    if figures:
        _import_matplotlib()  # fail before writing anything
    out.mkdir(parents=True, exist_ok=True)
    paths = plot_figures(entries, out, dpi=dpi) if figures else []
    pngs = {p.stem: p for p in paths if p.suffix == ".png"}
    page = out / "report.html"
    page.write_text(
        render_html(entries, pngs, source=str(results), skipped=skipped), encoding="utf-8"
    )
    summary = out / "report.json"
    summary.write_text(
        json.dumps(
            [
                {
                    "campaign_id": e.campaign_id,
                    "group": e.group,
                    "label": e.label,
                    "corpus": e.corpus,
                    **e.summary.to_json(),
                }
                for e in entries
            ],
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return ReportFiles(out, page, summary, tuple(paths), tuple(entries), tuple(skipped))
