"""The report's figures in the style of paper Figure 3 (a-c) and Figure 4, drawn with matplotlib.

* :func:`plot_figures` - success rate, precision and recall per corpus (and the three panels
  combined) as PNG and PDF.
* :func:`plot_leakage` - the four leakage diagnostics per corpus and oracle with their
  bootstrap intervals (paper Figure 4's interval plot) as PNG and PDF.
* :func:`import_matplotlib` - matplotlib, imported lazily; :class:`MissingPlotDependency` when
  it is not installed (``pip install 'ambitab-gym[plot]'``).

Conventions (paper Figure 3, C.2, C.3): one group per corpus (and split), one slot per campaign
setting. Success rate: in each slot a pale bar for SR without disambiguation and, beside it, a
solid bar for SR with the evaluated asker; a black line across the slot for SR with full
disambiguation, and the signed gap J_full - J_asker hatched between the asker bar and the line
(back-hatched when the asker is above full), its value in points above the slot. Precision and recall: the bar hatched up to the 100%
reference. Error bars: sample SD over seeds. Colours: the Okabe-Ito palette.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ambitab_gym.errors import MissingDependency
from ambitab_gym.evaluation.summary import Stat

if TYPE_CHECKING:
    from ambitab_gym.evaluation.report import LeakageEntry, ReportEntry

__all__ = [
    "PALETTE",
    "MissingPlotDependency",
    "draw_figures",
    "import_matplotlib",
    "plot_figures",
    "plot_leakage",
    "save_figure",
]

#: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442")
_INSTALL_HINT = "plotting needs matplotlib: pip install 'ambitab-gym[plot]'"


class MissingPlotDependency(MissingDependency, RuntimeError):
    """matplotlib is not installed (category ``missing_dependency``).

    >>> str(MissingPlotDependency(_INSTALL_HINT)).endswith("pip install 'ambitab-gym[plot]'")
    True
    """


def import_matplotlib():
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
    """Panel (a); returns whether some asker is above full (a negative gap).

    Each slot holds two bars side by side - pale (no disambiguation) left, solid (asker)
    right - under one black line (full disambiguation) that spans the slot."""
    w, negative = layout.slot * 0.86, False
    half = w / 2
    for e in entries:
        x, colour = layout.x(e), layout.colours[e.label]
        none, ask, full = (_pct(e.summary.sr[c]) for c in ("none", "asker", "full"))
        left, right = x - half / 2, x + half / 2
        if none:
            ax.bar(left, none[0], half * 0.94, color=_pale(colour), linewidth=0, zorder=1)
            _err(ax, left, none)
        if ask:
            ax.bar(right, ask[0], half * 0.94, color=colour, linewidth=0, zorder=2)
            _err(ax, right, ask)
        if full:
            ax.hlines(full[0], x - half, x + half, color="black", linewidth=1.4, zorder=3)
            _err(ax, x, full)
        if not (ask and full):
            continue
        low, high = sorted((ask[0], full[0]))
        if high - low > 1e-9:
            over = full[0] < ask[0]
            negative |= over
            _hatched(
                ax,
                right,
                low,
                high - low,
                half * 0.94,
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
    n = len(layout.groups)
    half = max(n, 2) / 2 + 0.05  # one group stays as narrow as two would be, centred
    ax.set_xlim((n - 1) / 2 - half, (n - 1) / 2 + half)
    ax.set_ylim(0, 109)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(f"{_PANELS[panel]} (%)")
    ax.set_title(title, loc="left", fontweight="bold")
    ax.yaxis.grid(True, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


#: Legend geometry in font sizes, passed to every legend so the fitting below and the drawn
#: legend agree: the handle, the pad after it, the space between columns, the pad inside.
_LEGEND = {"handlelength": 1.6, "handletextpad": 0.8, "columnspacing": 1.2, "borderpad": 0.4}
#: Share of the figure's width a legend may take (the rest is the layout's margin).
_LEGEND_SHARE = 0.96
#: Height (inches) each legend may take without the figure growing: about two rows.
_LEGEND_ROOM = 0.4


def _text_width(text: str, size: float) -> float:
    """Width in points of ``text`` (one line per ``\\n``) in the current font at ``size``."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure, font = TextToPath(), FontProperties(size=size)
    return max(
        (
            measure.get_text_width_height_descent(line, font, ismath=False)[0]
            for line in text.split("\n")
        ),
        default=0.0,
    )


def _wrap_label(text: str, width: float, size: float) -> str:
    """``text`` broken into lines of at most ``width`` points: after the commas of a
    ``key: value, key: value`` setting label, then at spaces, then anywhere."""
    import textwrap

    if _text_width(text, size) <= width:
        return text
    parts = text.split(", ")
    pieces = [p + ("," if i < len(parts) - 1 else "") for i, p in enumerate(parts)]
    words = []
    for piece in pieces:  # a piece too wide alone: at spaces, then by characters
        if _text_width(piece, size) <= width:
            words.append(piece)
            continue
        per_char = _text_width(piece, size) / max(len(piece), 1)
        words += textwrap.wrap(piece, max(1, int(width / per_char)), break_on_hyphens=False)
    lines: list[str] = []
    for word in words:
        joined = f"{lines[-1]} {word}" if lines else word
        if lines and _text_width(joined, size) <= width:
            lines[-1] = joined
        else:
            lines.append(word)
    return "\n".join(lines)


def _legend_size(labels: Sequence[str], ncol: int, size: float) -> tuple[float, float]:
    """Width and height in points of a legend of ``labels`` in ``ncol`` columns, filled column
    by column as matplotlib fills them (an estimate; the drawn legend is checked after)."""
    rows = -(-len(labels) // ncol)
    columns = [labels[i : i + rows] for i in range(0, len(labels), rows)]
    text = sum(max(_text_width(label, size) for label in c) for c in columns)
    per_column = (_LEGEND["handlelength"] + _LEGEND["handletextpad"]) * size
    pads = (len(columns) - 1) * _LEGEND["columnspacing"] + 2 * _LEGEND["borderpad"]
    lines = sum(
        max(columns[c][r].count("\n") + 1 for c in range(len(columns)) if r < len(columns[c]))
        for r in range(rows)
    )
    height = 1.25 * size * lines + (rows - 1) * 0.5 * size + 2 * _LEGEND["borderpad"] * size
    return text + len(columns) * per_column + pads * size, height


def _fit_legends(fig, specs: Sequence[tuple[Sequence, str, int]]) -> list:
    """Figure legends, one per ``(handles, where, most columns)``, placed ``outside {where}
    center``, that fit the figure's width, and the figure made tall enough for them.

    Labels are wrapped to the width (:func:`_wrap_label`) and get as many columns as fit (at
    most the spec's); the figure grows by what the legends need beyond :data:`_LEGEND_ROOM` each,
    so constrained layout keeps the panels their height. The drawn legends are then measured:
    one wider than the figure (the estimate was off) gets a column fewer, then narrower lines.
    However many and however long the labels, no legend reaches past the figure's edges."""
    import matplotlib

    size = matplotlib.font_manager.FontProperties(
        size=matplotlib.rcParams["legend.fontsize"]
    ).get_size_in_points()
    base = fig.get_figheight()
    room = fig.get_figwidth() * 72 * _LEGEND_SHARE
    text_room = (
        room
        - (_LEGEND["handlelength"] + _LEGEND["handletextpad"] + 2 * _LEGEND["borderpad"]) * size
    )
    shrink = [1.0] * len(specs)
    columns = [max(1, min(len(handles), most)) for handles, _, most in specs]
    legends: list = []
    for _ in range(12):  # a column fewer or narrower lines per try; the first try fits in practice
        for legend in legends:
            legend.remove()
        legends, needed = [], 0.0
        for i, (handles, where, _) in enumerate(specs):
            labels = [_wrap_label(h.get_label(), text_room * shrink[i], size) for h in handles]
            while columns[i] > 1 and _legend_size(labels, columns[i], size)[0] > room * shrink[i]:
                columns[i] -= 1
            needed += _legend_size(labels, columns[i], size)[1] / 72
            legends.append(
                fig.legend(
                    handles=list(handles),
                    labels=labels,
                    loc=f"outside {where} center",
                    frameon=False,
                    ncol=columns[i],
                    **_LEGEND,
                )
            )
        fig.set_figheight(base + max(0.0, needed - _LEGEND_ROOM * len(specs)))
        fig.draw_without_rendering()
        wide = [
            i
            for i, legend in enumerate(legends)
            if legend.get_window_extent().x0 < fig.bbox.x0
            or legend.get_window_extent().x1 > fig.bbox.x1
        ]
        if not wide:
            break
        for i in wide:
            if columns[i] > 1:
                columns[i] -= 1
            else:
                shrink[i] *= 0.85
    drawn = sum(legend.get_window_extent().height for legend in legends) / fig.dpi
    fig.set_figheight(base + max(0.0, drawn - _LEGEND_ROOM * len(specs)))
    return legends


def _legends(fig, layout: _Layout, negative: bool, with_success: bool) -> None:
    """The conditions' key above the panels; the series' key (several settings) below. Both are
    fitted to the figure's width and the figure grows to hold them (:func:`_fit_legends`)."""
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
    specs = [(keys, "upper", 5 if fig.get_figwidth() >= 6 else 2)] if with_success else []
    if not one:
        specs.append((series, "lower", len(series)))
    if specs:
        _fit_legends(fig, specs)


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
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name, fig in draw_figures(entries, dpi=dpi):
        paths += save_figure(fig, out / name, dpi=dpi)
    return paths


def draw_figures(entries: Sequence[ReportEntry], *, dpi: int = 200) -> Iterator[tuple[str, Any]]:
    """The figures :func:`plot_figures` saves, as ``(name, Figure)`` pairs, laid out at ``dpi``.

    Each figure is yielded inside the report's style (``matplotlib.rc_context``): draw or save it
    (:func:`save_figure`) before asking for the next. Legends are fitted to the figure's width and
    the figure grows to hold them, so the whole figure - ``fig.bbox``, what is saved - holds every
    legend entry.

    Raises:
        MissingPlotDependency: matplotlib is not installed.
    """
    matplotlib, Figure = import_matplotlib()
    layout = _Layout(entries)
    groups, series = len(layout.groups), len(layout.labels)
    wide = min(9.0, max(4.2, 1.6 + 0.7 * groups * series**0.5))
    plans = {  # name -> (figure size, panels)
        "figure3": ((max(wide, 4.6), 5.4), ("success", "precision", "recall")),
        "success": ((wide, 2.9), ("success",)),
        "precision": ((max(2.6, wide / 2), 2.6), ("precision",)),
        "recall": ((max(2.6, wide / 2), 2.6), ("recall",)),
    }
    with matplotlib.rc_context(_STYLE):
        for name, (size, panels) in plans.items():
            fig = Figure(figsize=size, layout="constrained", dpi=dpi)
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
            yield name, fig


def save_figure(
    fig, stem: Path, *, dpi: int = 200, suffixes: Sequence[str] = ("png", "pdf")
) -> list[Path]:
    """Save ``fig`` as ``stem.png`` (``dpi``) and ``stem.pdf``, the whole figure as laid out
    (no cropping: the saved image is ``fig.bbox``), without time stamps; returns the paths."""
    paths = []
    for suffix in suffixes:
        path = stem.with_name(f"{stem.name}.{suffix}")
        meta = {"CreationDate": None} if suffix == "pdf" else {"Software": None}
        fig.savefig(path, dpi=dpi, metadata=meta)
        paths.append(path)
    return paths


#: Axis titles of the leakage diagnostics (paper notation).
_LEAK_TITLES = {
    "d_j_resp": r"$\Delta J_{\mathrm{resp}}$",
    "d_rec_spec": r"$\Delta \mathrm{Rec}^{Q}_{\mathrm{spec}}$",
    "d_j_full": r"$\Delta J_{\mathrm{full}}$",
    "d_rec_none": r"$\Delta \mathrm{Rec}_{\mathrm{none}}$",
}


def plot_leakage(
    entries: Sequence[LeakageEntry], out_dir: str | Path, *, dpi: int = 200
) -> list[Path]:
    """Draw ``leakage.png`` (``dpi``) and ``leakage.pdf``: one panel per diagnostic, one group
    per dataset, one marker per oracle at the estimate with its 95% AVT-cluster bootstrap
    interval as the error bar, and a line at 0 (paper Figure 4's style). Points.

    Raises:
        MissingPlotDependency: matplotlib is not installed.
        ValueError: there is nothing to plot.
    """
    if not entries:
        raise ValueError("no leakage campaigns to plot")
    matplotlib, Figure = import_matplotlib()
    from matplotlib.lines import Line2D

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = list(dict.fromkeys(e.dataset for e in entries))
    oracles = list(dict.fromkeys(e.oracle for e in entries))
    colours = {o: PALETTE[i % len(PALETTE)] for i, o in enumerate(oracles)}
    markers = "osD^vP"
    slot = 0.7 / len(oracles)
    names = list(entries[0].cells())
    wide = min(9.0, max(4.6, 1.8 + 0.55 * len(groups) * len(oracles) ** 0.5))
    paths: list[Path] = []
    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(wide, 5.0), layout="constrained", dpi=dpi)
        axes = fig.subplots(2, 2, sharex=True).ravel()
        for letter, name, ax in zip("abcd", names, axes, strict=False):
            ax.axhline(0, color="#555555", linewidth=0.8, zorder=1)
            for e in entries:
                cell = e.cells()[name]
                i = oracles.index(e.oracle)
                x = groups.index(e.dataset) + (i - (len(oracles) - 1) / 2) * slot
                if cell["mean"] is None:
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6.5)
                    continue
                lo = cell["lo"] if cell["lo"] is not None else cell["mean"]
                hi = cell["hi"] if cell["hi"] is not None else cell["mean"]
                ax.errorbar(
                    x,
                    cell["mean"],
                    yerr=[[max(cell["mean"] - lo, 0.0)], [max(hi - cell["mean"], 0.0)]],
                    fmt=markers[i % len(markers)],
                    color=colours[e.oracle],
                    markersize=4.5,
                    elinewidth=1.0,
                    capsize=2.5,
                    zorder=3,
                )
            label = _LEAK_TITLES.get(name, name)
            ax.set_title(f"({letter}) {label}", loc="left", fontweight="bold")
            ax.set_ylabel("points")
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels(
                groups,
                rotation=30 if len(groups) > 3 else 0,
                ha="right" if len(groups) > 3 else "center",
                rotation_mode="anchor",
            )
            ax.tick_params(axis="x", length=0)
            n = len(groups)
            half = max(n, 2) / 2 + 0.05
            ax.set_xlim((n - 1) / 2 - half, (n - 1) / 2 + half)
            ax.yaxis.grid(True, color="#e0e0e0", linewidth=0.6)
            ax.set_axisbelow(True)
            low, high = ax.get_ylim()
            if high - low < 2:  # all near zero: keep a readable scale
                ax.set_ylim(min(low, -1), max(high, 1))
        handles = [
            Line2D(
                [],
                [],
                color=colours[o],
                marker=markers[i % len(markers)],
                linestyle="none",
                label=o,
            )
            for i, o in enumerate(oracles)
        ]
        handles.append(Line2D([], [], color="#333333", label="95% AVT-cluster bootstrap interval"))
        _fit_legends(fig, [(handles, "lower", 3)])
        paths += save_figure(fig, out / "leakage", dpi=dpi)
    return paths
