"""``ambitab-gym report``: figures and the HTML page against independently computed figures.

The expected numbers are computed here from the stored episode rows (read with plain DuckDB
SQL) by a separate implementation of paper C.3 (populations, per-seed macro means, sample SD over
seeds), and once by hand.
"""

from __future__ import annotations

import base64
import json
import re
import statistics
import struct
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest

from ambitab_gym.cli import main
from ambitab_gym.diagnostics import LeakageConfig, run_leakage, stored_leakage_report
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.evaluation.report import MissingPlotDependency, ReportEntry, write_report
from ambitab_gym.evaluation.summary import summarize_campaign

COLUMNS = ("SR none", "SR asker", "SR full", "Precision", "Recall", "F1", "Gain", "Gap")

WORD_ASKER = textwrap.dedent(
    '''
    """A test asker: asks about request words picked with its seed, stops at random."""
    import re

    import numpy as np

    from ambitab_gym.actions import STOP


    class WordAsker:
        privileged = False

        def reset(self, *, seed=None, record=None):
            self.rng = np.random.default_rng(seed)

        def act(self, view):
            if view.questions_left <= 0 or self.rng.random() < 0.3:
                return STOP
            words = re.findall(r"[A-Za-z_]{4,}", view.spec.request)
            if not words:
                return STOP
            word = words[int(self.rng.integers(len(words)))]
            return f"Could you clarify what exactly you mean by {word}?"
    '''
)


# -- independent expectations -------------------------------------------------------------------


def stored_rows(path: Path, campaign_id: str) -> list[dict]:
    """Episode rows straight from the DuckDB file."""
    with duckdb.connect(str(path), read_only=True) as db:
        cursor = db.execute(
            "SELECT condition, seed, success, precision, recall, f1 FROM episodes "
            "WHERE campaign_id = ?",
            [campaign_id],
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def expected_figures(rows: list[dict]) -> dict[str, tuple[float, float] | None]:
    """Mean and sample SD over seeds of the Table 8 columns (rates in [0, 1])."""
    seeds = sorted({r["seed"] for r in rows})

    def per_seed(condition: str, key: str, seed: int) -> float | None:
        values = [
            r[key]
            for r in rows
            if r["condition"] == condition and r["seed"] == seed and r[key] is not None
        ]
        return sum(values) / len(values) if values else None

    columns = {
        "SR none": [per_seed("none", "success", s) for s in seeds],
        "SR asker": [per_seed("asker", "success", s) for s in seeds],
        "SR full": [per_seed("full", "success", s) for s in seeds],
        "Precision": [per_seed("asker", "precision", s) for s in seeds],
        "Recall": [per_seed("asker", "recall", s) for s in seeds],
        "F1": [per_seed("asker", "f1", s) for s in seeds],
    }
    columns["Gain"] = [a - n for a, n in zip(columns["SR asker"], columns["SR none"], strict=True)]
    columns["Gap"] = [f - a for f, a in zip(columns["SR full"], columns["SR asker"], strict=True)]
    out = {}
    for name, values in columns.items():
        kept = [v for v in values if v is not None]
        if not kept:
            out[name] = None
        else:
            sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
            out[name] = (sum(kept) / len(kept), sd)
    return out


class TableParser(HTMLParser):
    """Rows of ``<table id="summary">``: campaign id -> list of (text, data-mean, data-sd)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[str, str | None, str | None]]] = {}
        self.images: list[str] = []
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id")
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "tr" and self._table == "summary" and "data-campaign" in attrs:
            self._row = self.rows.setdefault(attrs["data-campaign"], [])
        elif tag == "td" and self._row is not None:
            self._cell = [attrs.get("data-mean"), attrs.get("data-sd"), ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            mean, sd, text = self._cell
            self._row.append((text.strip(), mean, sd))
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._table = None


def parse_page(path: Path) -> TableParser:
    parser = TableParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def assert_row_matches(cells, expected) -> None:
    """The 8 figure cells (after corpus, setting, seeds, episodes) equal the expectation."""
    figures = cells[4:]
    assert len(figures) == len(COLUMNS)
    for name, (text, mean, sd) in zip(COLUMNS, figures, strict=True):
        want = expected[name]
        if want is None:
            assert mean == "" and text == "–", name
            continue
        assert float(mean) == pytest.approx(want[0], abs=1e-12), name
        assert float(sd) == pytest.approx(want[1], abs=1e-12), name
        assert text == f"{100 * want[0]:.1f} ± {100 * want[1]:.1f}", name


def png_size(path: Path) -> tuple[int, int, float | None]:
    """Width, height and dots per inch (from pHYs) of a PNG; fails on anything else."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    dpi = None
    at = data.find(b"pHYs")
    if at > 0:
        x_per_metre, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
        dpi = x_per_metre * 0.0254 if unit == 1 else None
    assert data.endswith(b"IEND\xaeB`\x82"), f"{path} is truncated"
    return width, height, dpi


# -- fixtures -----------------------------------------------------------------------------------


def episode(campaign, condition, seed, record, success, precision, recall, f1):
    return {
        "campaign_id": campaign,
        "condition": condition,
        "seed": seed,
        "record_id": record,
        "avt_id": record,
        "m": 1,
        "success": success,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "error": None,
    }


@pytest.fixture
def hand_file(tmp_path) -> Path:
    """Two seeds x three records of one campaign, numbers chosen to work out by hand, plus a
    leakage campaign and an evaluate campaign without episodes."""
    path = tmp_path / "hand.duckdb"
    with ResultsStore(path) as store:
        config = {"asker": "pkg:MyAsker", "oracle": "deterministic", "solver": "interpretation"}
        store.add_campaign("hand", config, kind="evaluate", corpus="taco", env_id="AmbiTab-TACO-v0")
        store.add_campaign("leaky", {"x": 1}, kind="leakage", corpus="bird", env_id="")
        store.add_campaign("empty", config, kind="evaluate", corpus="bird", env_id="")
        table = {
            # seed 0: SR none 1/3, asker 2/3, full 3/3; precision over n >= 1 (r3 asked nothing)
            (0, "none"): [(0, None, 0, 0), (1, None, 0, 0), (0, None, 0, 0)],
            (0, "asker"): [(1, 1.0, 1, 1), (1, 0.5, 1, 2 / 3), (0, None, 0, 0)],
            (0, "full"): [(1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)],
            # seed 1: SR none 1/3, asker 1/3, full 2/3
            (1, "none"): [(0, None, 0, 0), (1, None, 0, 0), (0, None, 0, 0)],
            (1, "asker"): [(0, 0.0, 0, 0), (1, 1.0, 0.5, 2 / 3), (0, 0.5, 0.5, 0.5)],
            (1, "full"): [(1, 1, 1, 1), (0, 1, 1, 1), (1, 1, 1, 1)],
        }
        for (seed, condition), rows in table.items():
            for i, (success, precision, recall, f1) in enumerate(rows):
                store.add_episode(
                    episode("hand", condition, seed, f"r{i}", success, precision, recall, f1)
                )
    return path


def test_hand_worked_table(hand_file, tmp_path):
    files = write_report(hand_file, tmp_path / "out", figures=False)
    rows = parse_page(files.html).rows
    assert list(rows) == ["hand"]
    cells = rows["hand"]
    assert [c[0] for c in cells[:4]] == ["TACO", "MyAsker", "2", "18"]
    by_name = dict(zip(COLUMNS, (c[0] for c in cells[4:]), strict=True))
    # SR asker per seed 2/3 and 1/3: mean 1/2, SD sqrt(((1/6)^2 * 2) / 1) = 0.2357
    assert by_name["SR asker"] == "50.0 ± 23.6"
    # precision per seed: (1 + 0.5) / 2 = 0.75 and (0 + 1 + 0.5) / 3 = 0.5
    assert by_name["Precision"] == "62.5 ± 17.7"
    # SR full 1 and 2/3; gap per seed 1/3 and 1/3
    assert by_name["SR full"] == "83.3 ± 23.6"
    assert by_name["Gap"] == "33.3 ± 0.0"
    # gain per seed 1/3 and 0
    assert by_name["Gain"] == "16.7 ± 23.6"
    assert_row_matches(cells, expected_figures(stored_rows(hand_file, "hand")))
    page = files.html.read_text(encoding="utf-8")
    assert "leaky (kind &#x27;leakage&#x27;: pass leakage=stored_leakage_report)" in page
    assert "empty (bird: no episodes stored)" in page
    summary = json.loads(files.json.read_text())
    assert summary[0]["campaign_id"] == "hand" and summary[0]["sr_asker"] == pytest.approx(0.5)


@pytest.fixture(scope="module")
def campaign_file(tmp_path_factory) -> tuple[Path, list[str]]:
    """A real results file: two corpora with a seeded word asker, one with the generic asker."""
    root = tmp_path_factory.mktemp("campaigns")
    (root / "wordasker_for_report.py").write_text(WORD_ASKER)
    sys.path.insert(0, str(root))
    try:
        path = root / "results.duckdb"
        ids = []
        with ResultsStore(path) as store:
            for corpus, asker in (
                ("AmbiTab-TACO-v0", "wordasker_for_report:WordAsker"),
                ("AmbiTab-Bird-v0", "wordasker_for_report:WordAsker"),
                ("AmbiTab-Bird-v0", "generic"),
            ):
                config = CampaignConfig(corpus=corpus, asker=asker, seeds=(0, 1, 2), limit=12)
                ids.append(run_campaign(config, store, progress=False).campaign_id)
            store.add_campaign("leak", {"probe": "x"}, kind="leakage", corpus="bird")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("wordasker_for_report", None)
    return path, ids


def test_report_command_matches_stored_episodes(campaign_file, tmp_path, capsys):
    path, ids = campaign_file
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out / "report.html") in printed and str(out / "figure3.png") in printed
    assert "not shown: leak (bird: no episodes stored)" in printed

    page = parse_page(out / "report.html")
    assert set(page.rows) == set(ids)
    for campaign_id in ids:
        rows = stored_rows(path, campaign_id)
        assert len(rows) == 3 * 3 * 12
        assert_row_matches(page.rows[campaign_id], expected_figures(rows))
    # corpus order of the paper: Bird before TACO; the two Bird settings are told apart
    order = [page.rows[i][0][0] for i in page.rows]
    assert order == ["Bird", "Bird", "TACO"]
    assert {page.rows[i][1][0] for i in ids[1:]} == {"WordAsker", "generic"}

    # the page is self-contained: the embedded image is figure3.png byte for byte
    assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")
    embedded = base64.b64decode(page.images[0].split(",", 1)[1])
    assert embedded == (out / "figure3.png").read_bytes()

    for name in ("figure3", "success", "precision", "recall"):
        width, height, dpi = png_size(out / f"{name}.png")
        assert dpi == pytest.approx(200, abs=1)
        assert 400 <= width <= 2000 and 400 <= height <= 1400, (name, width, height)
        assert (out / f"{name}.pdf").read_bytes().startswith(b"%PDF")
    width, height, _ = png_size(out / "figure3.png")
    assert 0.8 < width / height < 2.0
    width, height, _ = png_size(out / "success.png")
    assert width / height > 1.3  # a wide panel


def test_campaign_selection(campaign_file, tmp_path, capsys):
    path, ids = campaign_file
    out = tmp_path / "one"
    assert (
        main(["report", str(path), "--out", str(out), "--campaign", ids[0][:8], "--no-figures"])
        == 0
    )
    rows = parse_page(out / "report.html").rows
    assert list(rows) == [ids[0]]
    assert_row_matches(rows[ids[0]], expected_figures(stored_rows(path, ids[0])))

    assert main(["report", str(path), "--out", str(out), "--campaign", "nosuchid"]) == 2
    assert "no campaign in the results file matches 'nosuchid'" in capsys.readouterr().err
    assert main(["report", str(path), "--campaign", "leak", "--out", str(out)]) == 2
    assert "nothing to report" in capsys.readouterr().err


def test_missing_results_file(tmp_path, capsys):
    missing = tmp_path / "none.duckdb"
    assert main(["report", str(missing)]) == 2
    assert "run `ambitab-gym evaluate" in capsys.readouterr().err
    assert not missing.exists()


def test_negative_gap_is_kept_signed(tmp_path):
    path = tmp_path / "neg.duckdb"
    with ResultsStore(path) as store:
        store.add_campaign("neg", {"asker": "x"}, kind="evaluate", corpus="ambiqt")
        for seed in (0, 1):
            for condition, success in (("none", 0.0), ("asker", 1.0), ("full", 0.0)):
                store.add_episode(episode("neg", condition, seed, "r0", success, 1.0, 1.0, 1.0))
    files = write_report(path, tmp_path / "out")
    cells = parse_page(files.html).rows["neg"]
    assert dict(zip(COLUMNS, (c[0] for c in cells[4:]), strict=True))["Gap"] == "-100.0 ± 0.0"
    assert png_size(files.out_dir / "success.png")[0] > 0


def test_without_matplotlib(hand_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(MissingPlotDependency, match=re.escape("pip install 'ambitab-gym[plot]'")):
        write_report(hand_file, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert main(["report", str(hand_file), "--out", str(tmp_path / "out")]) == 2
    assert "ambitab-gym[plot]" in capsys.readouterr().err
    assert main(["report", str(hand_file), "--out", str(tmp_path / "t"), "--no-figures"]) == 0
    assert (tmp_path / "t" / "report.html").is_file()
    assert not list((tmp_path / "t").glob("*.png"))


# -- leakage campaigns: Table 14 and the interval figure -------------------------------------


@pytest.fixture(scope="module")
def leakage_file(tmp_path_factory) -> tuple[Path, str]:
    """A real leakage campaign: the SQL-leaking responder on TACO, two seeds."""
    path = tmp_path_factory.mktemp("leakage") / "results.duckdb"
    config = LeakageConfig(
        "AmbiTab-TACO-v0",
        asker="generic",
        oracle="leaky-sql-responder",
        solver="dialogue-sql-blind",
        seeds=(0, 1),
        limit=10,
    )
    run_leakage(config, path, resamples=200)
    with ResultsStore(path) as store:  # the stored id folds in the corpus identity
        return path, store.campaign(config.campaign_id)["campaign_id"]


def leakage_rows(html: Path) -> dict[str, list[dict]]:
    """``<table id="leakage">``: campaign -> cells (text and data attributes)."""
    text = html.read_text("utf-8")
    body = text.split('<table id="leakage">', 1)[1].split("</table>", 1)[0]
    out = {}
    for campaign, row in re.findall(r'<tr data-campaign="([^"]+)">(.*?)</tr>', body, re.S):
        cells = []
        for attrs, inner in re.findall(r"<td([^>]*)>(.*?)</td>", row, re.S):
            data = dict(re.findall(r'data-(\w+)="([^"]*)"', attrs))
            cells.append({"text": re.sub(r"<[^>]+>", " ", inner).strip(), **data})
        out[campaign] = cells
    return out


def test_leakage_table_and_figure(leakage_file, tmp_path, capsys):
    path, campaign_id = leakage_file
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "leaky-sql-responder  TACO" in printed and str(out / "leakage.png") in printed

    with ResultsStore(path) as store:
        report = stored_leakage_report(store, campaign_id)
    cells = leakage_rows(out / "report.html")[campaign_id]
    assert [c["text"] for c in cells[:4]] == [
        "leaky-sql-responder",
        "TACO",
        "2",
        str(report.episodes),
    ]
    for cell, (name, diagnostic) in zip(cells[4:8], report.diagnostics.items(), strict=True):
        interval = diagnostic.interval
        assert float(cell["mean"]) == pytest.approx(100 * interval.mean, abs=1e-9), name
        assert float(cell["lo"]) == pytest.approx(100 * interval.lo, abs=1e-9), name
        assert float(cell["hi"]) == pytest.approx(100 * interval.hi, abs=1e-9), name
        assert int(cell["units"]) == interval.units > 0, name
        assert cell["text"].startswith(f"{100 * interval.mean:.2f} ± {100 * diagnostic.sd:.2f}")
        assert cell["text"].endswith(f"· {interval.units} cluster{'s' * (interval.units != 1)}")
    assert cells[8]["text"] == "ok"

    # dJ_resp by hand from the stored rows: SR(asker:actual) - SR(asker:hybrid), seeds pooled
    with duckdb.connect(str(path), read_only=True) as db:
        actual, hybrid = (
            db.execute(
                "SELECT avg(success) FROM episodes WHERE campaign_id = ? AND condition = ?",
                [campaign_id, condition],
            ).fetchone()[0]
            for condition in ("asker:actual", "asker:hybrid")
        )
    assert float(cells[4]["mean"]) == pytest.approx(100 * (actual - hybrid), abs=1e-9)
    assert actual - hybrid > 0  # the SQL leak is caught

    page = parse_page(out / "report.html")
    assert len(page.images) == 1  # no evaluate campaign: the leakage figure only
    assert base64.b64decode(page.images[0].split(",", 1)[1]) == (out / "leakage.png").read_bytes()
    width, height, dpi = png_size(out / "leakage.png")
    assert dpi == pytest.approx(200, abs=1) and 0.8 < width / height < 2.5
    assert (out / "leakage.pdf").read_bytes().startswith(b"%PDF")
    summary = json.loads((out / "report.json").read_text())
    assert summary[0]["kind"] == "leakage"
    assert summary[0]["diagnostics"]["d_j_resp"]["mean"] == report.to_json()["d_j_resp"]["mean"]


def test_leakage_left_out_without_a_leakage_function(leakage_file, tmp_path):
    path, campaign_id = leakage_file
    with pytest.raises(ValueError, match="nothing to report"):
        write_report(path, tmp_path / "x", figures=False)
    files = write_report(path, tmp_path / "y", figures=False, leakage=stored_leakage_report)
    assert [e.campaign_id for e in files.leakage] == [campaign_id]
    with ResultsStore(path) as store:
        assert files.episodes == len(store.episodes(campaign_id)) > 0


def _entry(group: str, label: str, none: float, asker: float, full: float) -> ReportEntry:
    rows = [
        {
            "condition": c,
            "seed": s,
            "success": v,
            "precision": 1.0,
            "recall": 1.0,
            "f1": 1.0,
            "error": None,
        }
        for s in (0, 1)
        for c, v in (("none", none), ("asker", asker), ("full", full))
    ]
    rows[1] = {**rows[1], "success": max(0.0, asker - 0.2)}  # a seed SD for the error bar
    return ReportEntry(group, group, label, summarize_campaign(rows), {}, group.lower())


@pytest.mark.parametrize("groups", [1, 6])
def test_success_panel_bars_side_by_side(groups):
    """Each slot's pale bar (no disambiguation) and solid bar (asker) sit side by side - the
    pale bar is never split around the asker bar - for one corpus and for six, with SD bars."""
    from matplotlib.figure import Figure

    from ambitab_gym.evaluation.report_figures import _draw_success, _Layout

    names = ["Bird", "EW-Bird", "BIRD-Interact", "Ambrosia", "AmbiQT", "TACO"][:groups]
    entries = [_entry(g, label, 0.4, 0.6, 0.9) for g in names for label in ("generic", "llm")]
    ax = Figure().add_subplot()
    _draw_success(ax, entries, _Layout(entries))
    bars = [p for p in ax.patches if p.get_facecolor()[3] > 0 and p.get_hatch() is None]
    assert len(bars) == 2 * len(entries)
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in bars)
    for (_, right), (left, _) in zip(spans, spans[1:], strict=False):
        assert right <= left + 1e-9  # no bar overlaps another
    from matplotlib.container import ErrorbarContainer

    errorbars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(errorbars) == len(entries)  # the asker's SD over the two seeds, per slot


def test_one_bootstrap_cluster_is_singular(tmp_path, capsys):
    """One AVT resampled: the interval's note says "1 cluster", not "1 clusters"."""
    path = tmp_path / "one.duckdb"
    leakage = ["leakage", "AmbiTab-TACO-v0", "--asker", "generic", "--limit", "1"]
    leakage += ["--resamples", "20", "--results", str(path), "--no-progress"]
    assert main(leakage) == 0
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out), "--no-figures", "--no-browser"]) == 0
    capsys.readouterr()
    cells = [c for row in leakage_rows(out / "report.html").values() for c in row[4:8]]
    assert cells and all(c["units"] == "1" for c in cells)
    assert all(c["text"].endswith("· 1 cluster") for c in cells if c["lo"] != "None")
    assert "1 clusters" not in (out / "report.html").read_text("utf-8")


def test_an_export_file_is_named_as_such(hand_file, tmp_path, capsys):
    export = tmp_path / "hand.jsonl"
    assert main(["export", str(hand_file), "--out", str(export)]) == 0
    before = export.read_bytes()
    capsys.readouterr()
    assert main(["report", str(export), "--out", str(tmp_path / "rep")]) == 2
    assert capsys.readouterr().err == (
        f"ambitab-gym report: {export} is a JSON Lines export (`ambitab-gym export` writes one), "
        "not a results file: give the DuckDB results file it was exported from (the --results "
        "file of `ambitab-gym evaluate`, by default <data home>/results/ambitab-results.duckdb)\n"
    )
    assert export.read_bytes() == before and not (tmp_path / "rep").exists()


# -- many settings: the legend and the tables at 1400 px (issue 31) ------------------------------

#: Campaign configurations that differ in every setting a label names (asker, oracle, solver,
#: llm, budget slack, limit, seeds): the report's labels then carry seven ``key: value`` pairs.
SEVERAL_SETTINGS = (
    {"asker": "generic", "oracle": "deterministic", "solver": "interpretation", "llm": None},
    {
        "asker": "mypkg.askers:WordAsker",
        "oracle": "llm",
        "solver": "llm",
        "llm": {"model": "qwen3-14b-instruct-awq"},
    },
    {"asker": "random-menu", "oracle": "leaky-sql-responder", "solver": "dialogue-sql-blind"},
    {"asker": "generic", "oracle": "leaky-sql-responder", "solver": "interpretation"},
)


def several_settings_file(path: Path) -> Path:
    """A results file of evaluate campaigns on three corpora whose configurations differ in
    several settings at once (hand-made episodes: cheap, no env runs)."""
    corpora = (("bird", "AmbiTab-Bird-v0"), ("bird_interact", "AmbiTab-BIRD-Interact-v0"))
    corpora += (("taco", "AmbiTab-TACO-v0"),)
    with ResultsStore(path) as store:
        for c, (corpus, env_id) in enumerate(corpora):
            for i, settings in enumerate(SEVERAL_SETTINGS):
                cid = f"{corpus}-{i}-{'5e7a1c' * 4}"
                seeds = list(range(1 + i % 3))
                config = {**settings, "budget_slack": i, "limit": 12 + 28 * (i % 2), "seeds": seeds}
                store.add_campaign(cid, config, kind="evaluate", corpus=corpus, env_id=env_id)
                for seed in seeds:
                    for condition, success in (("none", 0), ("asker", (i + c) % 2), ("full", 1)):
                        for record in ("r0", "r1"):
                            row = episode(cid, condition, seed, record, success, 0.5, 1.0, 2 / 3)
                            store.add_episode(row)
    return path


def wide_page(results: Path, out: Path) -> Path:
    """The report page of :func:`several_settings_file` plus leakage rows (paper Table 14) and
    audit rows with long oracle names and wide numbers: the widest tables a report writes."""
    from types import SimpleNamespace as NS

    from ambitab_gym.evaluation.report import LeakageEntry, collect_entries, render_html

    with ResultsStore(results) as store:
        entries, _ = collect_entries(store)
    names = {"d_j_resp": "dJ_resp", "d_rec_spec": "dRec_spec^Q", "d_j_full": "dJ_full"}
    names["d_rec_none"] = "dRec_none"

    def diagnostic(label: str) -> NS:
        interval = NS(mean=-0.123456, lo=-0.1234, hi=0.2345, units=1234)
        return NS(spec=NS(label=label), interval=interval, sd=0.0567, per_seed={0: 0, 1: 0})

    oracles = ("llm (qwen3-14b-instruct-awq) matcher + reference responder", "deterministic")
    report = NS(diagnostics={k: diagnostic(v) for k, v in names.items()}, episodes=123456)
    report.reference_ok = True
    leakage = [
        LeakageEntry(f"leak{i}", o, "BIRD-Interact/dev", report) for i, o in enumerate(oracles)
    ]
    audit = [
        {"oracle": o, "corpus": "BIRD-Interact", "items": 1420, "audited": 1420, "share": 1.0}
        | {m: 473 for m in ("faithful", "reveals_more", "wrong")}
        | {f"{m}_share": 1 / 3 for m in ("faithful", "reveals_more", "wrong")}
        for o in oracles
    ]
    page = out / "report.html"
    page.write_text(render_html(entries, leakage=leakage, audit=audit, source=str(results)))
    return page


#: Setting labels past anything a results file yields: seven settings, a value with no space
#: to break at, many campaigns on one corpus (the narrowest figure).
EXTREME_LABELS = [
    "asker: generic, oracle: llm (qwen3-14b), solver: interpretation, llm: qwen3-14b, "
    "budget_slack: 2, limit: 40, seeds: 3 seeds",
    "asker: " + "VeryLongAskerClassNameWithoutAnySpaceToBreakAt" * 2,
    *(f"asker: a{i}, oracle: leaky-sql-responder, solver: dialogue-sql-blind" for i in range(6)),
]


def assert_legends_inside(fig, labels: list[str]) -> None:
    """Every legend entry of ``fig`` lies inside the figure (what is saved) and off the panels,
    and the series legend holds every label, only wrapped."""
    fig.draw_without_rendering()
    whole = fig.bbox
    assert fig.legends
    for legend in fig.legends:
        for text in legend.get_texts():
            box = text.get_window_extent()
            inside = (box.x0 >= whole.x0 - 0.5, box.x1 <= whole.x1 + 0.5)
            inside += (box.y0 >= whole.y0 - 0.5, box.y1 <= whole.y1 + 0.5)
            assert all(inside), (text.get_text(), box, whole)
        for ax in fig.axes:
            assert not legend.get_window_extent().overlaps(ax.get_tightbbox()), ax.get_title()

    def bare(text: str) -> str:  # wrapping adds line breaks only
        return re.sub(r"\s", "", text)

    shown = [[bare(t.get_text()) for t in legend.get_texts()] for legend in fig.legends]
    assert [bare(label) for label in labels] in shown


def test_settings_legend_is_never_clipped(tmp_path):
    """Campaigns that differ in several settings: in figure3 (saved as the report saves it) and
    in the narrowest panel every legend text lies inside the saved image (issue 31)."""
    from ambitab_gym.evaluation.report import collect_entries
    from ambitab_gym.evaluation.report_figures import draw_figures, save_figure

    with ResultsStore(several_settings_file(tmp_path / "r.duckdb")) as store:
        entries, _ = collect_entries(store)
    labels = list(dict.fromkeys(e.label for e in entries))
    assert len(labels) == 4 and all(label.count(": ") == 7 for label in labels), labels
    figures = dict(draw_figures(entries, dpi=100))
    png = save_figure(figures["figure3"], tmp_path / "figure3", dpi=100, suffixes=["png"])[0]
    width, height, _ = png_size(png)  # the saved image is the whole figure, as laid out
    assert abs(width - figures["figure3"].bbox.width) < 1
    assert abs(height - figures["figure3"].bbox.height) < 1
    for name in ("figure3", "precision"):  # the widest and the narrowest
        assert_legends_inside(figures[name], labels)


def test_extreme_settings_legend_is_never_clipped():
    """Eight settings with long labels, one unbreakable, on one corpus: still inside."""
    from ambitab_gym.evaluation.report_figures import draw_figures

    entries = [_entry("Bird", label, 0.4, 0.6, 0.9) for label in EXTREME_LABELS]
    figures = dict(draw_figures(entries, dpi=72))
    for name in ("figure3", "precision"):  # the widest and the narrowest
        assert_legends_inside(figures[name], EXTREME_LABELS)


def test_tables_wrap_names_and_scroll_inside_the_page(tmp_path):
    """The HTML that keeps Table 8 and Table 14 within 1400 px (checked in Chromium by
    tests/test_report_browser.py): every table in a box that scrolls sideways, numbers on one
    line, setting labels free to break only between their ``key: value`` pairs, leakage cells
    between estimate, interval and cluster count."""
    from ambitab_gym.evaluation.report import _CSS

    page = wide_page(several_settings_file(tmp_path / "r.duckdb"), tmp_path)
    text = page.read_text("utf-8")
    rules = dict(re.findall(r"([^{}]+)\{([^{}]*)\}", _CSS))
    assert "max-width:88rem" in rules["body"] and "overflow-x:auto" in rules[".tw"]
    assert "white-space:nowrap" in rules["th,td"] and "white-space:normal" in rules["td.w,td.lk"]
    assert "white-space:nowrap" in rules[".kv,.nw"]
    for table in ("summary", "campaigns", "leakage", "audit"):
        assert f'<div class="tw"><table id="{table}">' in text, table
        body = text.split(f'<table id="{table}">', 1)[1]
        assert body.split("</table>", 1)[1].startswith("</div>"), table
    summary = text.split('<table id="summary">', 1)[1].split("</table>", 1)[0]
    settings = re.findall(r'<td class="l w">(.*?)</td>', summary)
    corpora = re.findall(r'<tr[^>]*><td class="l">([^<]*)</td>', summary)
    assert len(settings) == len(corpora) == 12 and "BIRD-Interact" in corpora
    for cell in settings:
        pairs = re.findall(r'<span class="kv">([^<]*)</span>', cell)
        assert len(pairs) == 7 and cell == " ".join(f'<span class="kv">{p}</span>' for p in pairs)
    leakage = text.split('<table id="leakage">', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r'<td class="lk" [^>]*>(.*?)</td>', leakage)
    assert len(cells) == 8
    for cell in cells:
        assert re.findall(r'<span class="nw">([^<]*)</span>', cell) == [
            "-12.35 ± 5.67",
            "[-12.34, 23.45]",
            "· 1234 clusters",
        ]
