"""The report's episode browser and the audit page in a real browser (headless Chromium).

A small real campaign runs into a temporary results file, plus one hostile episode (agent text
with ``<script>`` and an ``onerror`` image) and an LLM-style routed turn. The report opens from
disk (``file://``, no server) in Debian's Chromium driven by Playwright; the tests filter, open
episodes and compare what the page shows with the results store and the corpus record. They
skip only when no Chromium binary exists (``apt-get install chromium``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from ambitab_gym.cli import main
from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation import CampaignConfig, ResultsStore, run_campaign
from ambitab_gym.evaluation.report import write_report

CHROMIUM = os.environ.get("AMBITAB_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)),
    reason=f"no Chromium binary at {CHROMIUM} (apt-get install chromium)",
)

HOSTILE_Q = '<script>window.__pwned = 1</script>What is "top" & <b>bold</b>?'
HOSTILE_A = '<img src=x onerror="window.__pwned = 2">the five customers who spent the most'
HOSTILE_SQL = "SELECT '</script><script>window.__pwned = 3</script>' AS x"
RATIONALE = "asks how many count as <i>top</i>"


@pytest.fixture(scope="module")
def browser(report):
    # after the campaign: Playwright's sync API keeps an event loop running on this thread,
    # and run_campaign starts its own with asyncio.run
    # playwright is in the test extra: missing, it fails here rather than skipping
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A page that records console errors and uncaught exceptions."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.problems = []
    page.on("console", lambda m: page.problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.on(
        "request",
        lambda r: (
            None
            if r.url.startswith(("file:", "data:", "blob:"))
            else page.problems.append(f"network request: {r.url}")
        ),
    )
    yield page
    context.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> tuple[Path, str]:
    """A real Bird campaign (generic asker: failures; full condition: credits) and a hostile
    episode stored in it."""
    path = tmp_path_factory.mktemp("browser") / "results.duckdb"
    config = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1), limit=8)
    with ResultsStore(path) as store:
        campaign_id = run_campaign(config, store, progress=False).campaign_id
        store.add_episode(
            {
                "campaign_id": campaign_id,
                "condition": "asker",
                "seed": 99,
                "record_id": "bird-0001",
                "avt_id": "bird-train-avt-01",
                "m": 2,
                "n_questions": 1,
                "success": 0.0,
                "stop_reason": "asker",
                "verdict_reason": "mismatch",
                "verdict_detail": "<b>not bold</b>",
                "sql": HOSTILE_SQL,
                "dialogue": [
                    {
                        "question": HOSTILE_Q,
                        "answer": HOSTILE_A,
                        "credits": ["top_customers"],
                        "route": {
                            "kind": "labeled",
                            "argument": "Top Customers",
                            "rationale": RATIONALE,
                            "parsed": True,
                        },
                    }
                ],
            }
        )
    return path, campaign_id


@pytest.fixture(scope="module")
def report(results, tmp_path_factory) -> Path:
    path, _ = results
    files = write_report(path, tmp_path_factory.mktemp("report"), figures=False)
    return files.html


def stored(path: Path, campaign_id: str, condition: str, seed: int, record_id: str) -> dict:
    with duckdb.connect(str(path), read_only=True) as db:
        row = db.execute(
            "SELECT dialogue, sql, verdict_reason, success FROM episodes WHERE campaign_id = ? "
            "AND condition = ? AND seed = ? AND record_id = ?",
            [campaign_id, condition, seed, record_id],
        ).fetchone()
    return {"dialogue": json.loads(row[0]), "sql": row[1], "verdict": row[2], "success": row[3]}


def open_report(page, html: Path) -> None:
    page.goto(html.as_uri())
    page.wait_for_function("window.ambitabBrowser && window.ambitabBrowser.ready")


def choose(page, field: str, value: str) -> None:
    option = page.locator(f"#eb-f-{field} option[data-value='{value}']")
    page.select_option(f"#eb-f-{field}", option.get_attribute("value"))


def shown_count(page) -> int:
    return page.evaluate("window.ambitabBrowser.shown()")


def test_failed_episode_against_the_store(page, results, report, tmp_path):
    path, campaign_id = results
    open_report(page, report)
    with duckdb.connect(str(path), read_only=True) as db:
        total, failed = db.execute(
            "SELECT count(*), count(*) FILTER (WHERE success = 0) FROM episodes"
        ).fetchone()
    assert page.inner_text("#eb-status") == f"{total} of {total} episodes"

    choose(page, "success", "failure")
    assert shown_count(page) == failed
    choose(page, "seed", "0")
    rows = page.locator("#eb-list .eb-row")
    assert rows.count() > 0
    first = rows.first
    record_id = first.locator(".eb-rid").inner_text()
    assert first.locator(".eb-mark").inner_text() == "✗"
    first.click()

    detail = page.locator("#eb-detail")
    condition = detail.locator("dt:text-is('Condition') + dd").inner_text()
    row = stored(path, campaign_id, condition, 0, record_id)
    assert row["success"] == 0.0
    record = load_corpus("AmbiTab-Bird-v0").record(record_id)
    assert detail.locator(".eb-request").inner_text() == record.spec.request
    questions = detail.locator(".eb-dialogue .eb-q .eb-text").all_inner_texts()
    answers = detail.locator(".eb-dialogue .eb-a .eb-text").all_inner_texts()
    assert questions == [t["question"] for t in row["dialogue"]]
    assert answers == [t["answer"] for t in row["dialogue"]]
    assert detail.locator(".eb-sql").inner_text() == row["sql"]
    assert detail.locator(".eb-verdict").inner_text().startswith(f"failure: {row['verdict']}")

    privileged = page.locator("#eb-privileged")
    assert "analyst only" in privileged.locator("h4").inner_text()
    assert privileged.locator(".eb-refsql").inner_text() == record.verification.reference_sql
    cells = privileged.locator(".eb-ambs td").all_inner_texts()
    for ambiguity in record.ambiguities:
        assert ambiguity.resolution in cells
    credits = privileged.locator(".eb-credit").all_inner_texts()
    assert len(credits) == len(row["dialogue"])
    for turn, text in zip(row["dialogue"], credits, strict=True):
        assert text.endswith("nothing") == (not turn["credits"])
    # nothing privileged in the public part of the episode
    public = detail.inner_text().split(privileged.inner_text())[0]
    assert record.verification.reference_sql not in public
    page.locator("#episode-browser").screenshot(path=str(tmp_path / "browser.png"))
    assert (tmp_path / "browser.png").stat().st_size > 10_000
    assert page.problems == []


def test_credits_and_filters(page, results, report):
    path, campaign_id = results
    open_report(page, report)
    choose(page, "condition", "full")
    choose(page, "success", "success")
    with duckdb.connect(str(path), read_only=True) as db:
        want = db.execute(
            "SELECT count(*) FROM episodes WHERE condition = 'full' AND success = 1"
        ).fetchone()[0]
    assert shown_count(page) == want > 0
    page.locator("#eb-list .eb-row").first.click()
    detail = page.locator("#eb-detail")
    record_id = detail.locator(".eb-title").inner_text().split("\n")[0].split("success")[0].strip()
    seed = int(detail.locator("dt:text-is('Seed') + dd").inner_text())
    row = stored(path, campaign_id, "full", seed, record_id)
    credits = page.locator("#eb-privileged .eb-credit").all_inner_texts()
    for turn, text in zip(row["dialogue"], credits, strict=True):
        for credit in turn["credits"]:
            assert credit in text
    # the search narrows to episodes whose text holds the words; clearing restores all
    page.fill("#eb-search", "please elaborate")
    with duckdb.connect(str(path), read_only=True) as db:
        hits = db.execute(
            "SELECT count(*) FROM episodes WHERE condition = 'full' AND success = 1 AND "
            "lower(CAST(dialogue AS VARCHAR)) LIKE '%please elaborate%'"
        ).fetchone()[0]
    assert shown_count(page) == hits
    page.click("#eb-clear")
    assert shown_count(page) == page.evaluate("window.ambitabBrowser.episodes")
    assert page.problems == []


def test_hostile_text_renders_as_text(page, report):
    open_report(page, report)
    choose(page, "seed", "99")
    assert shown_count(page) == 1
    page.locator("#eb-list .eb-row").first.click()
    detail = page.locator("#eb-detail")
    assert detail.locator(".eb-q .eb-text").inner_text() == HOSTILE_Q
    assert detail.locator(".eb-a .eb-text").inner_text() == HOSTILE_A
    assert detail.locator(".eb-sql").inner_text() == HOSTILE_SQL
    assert "<b>not bold</b>" in detail.locator(".eb-verdict").inner_text()
    assert detail.locator("b, img, i").count() == 0  # no markup was made from stored text
    assert page.evaluate("window.__pwned") is None
    route = page.locator("#eb-privileged .eb-route").inner_text()
    assert route == "route: labeled(Top Customers)"
    assert page.locator("#eb-privileged .eb-rationale").inner_text() == f"rationale: {RATIONALE}"
    assert page.problems == []


def test_audit_page_exports_marks_that_import(page, results, tmp_path, capsys):
    path, _ = results
    audit_page = tmp_path / "audit.html"
    assert main(["audit", str(path), "--out", str(audit_page)]) == 0
    capsys.readouterr()
    page.goto(audit_page.as_uri())
    page.wait_for_function("window.ambitabAudit && window.ambitabAudit.ready")
    items = page.locator(".au-item")
    assert items.count() > 2
    hostile = page.locator(".au-answer", has_text="onerror")
    assert hostile.count() == 1 and hostile.inner_text() == HOSTILE_A
    first, second = items.nth(0), items.nth(1)
    first.locator("input[value='wrong']").check()
    first.locator("input[type='text']").fill("says ten, resolution says five")
    first.locator("input[type='text']").dispatch_event("change")
    second.locator("input[value='faithful']").check()
    page.fill("#au-auditor", "tester")
    assert page.inner_text("#au-progress").startswith("2 of ")
    with page.expect_download() as download:
        page.click("#au-export")
    marks_file = tmp_path / "marks.json"
    download.value.save_as(marks_file)
    exported = json.loads(marks_file.read_text())
    assert [m["mark"] for m in exported["marks"]] == ["wrong", "faithful"]
    assert page.evaluate("window.__pwned") is None
    assert page.problems == []

    assert main(["audit", str(path), "--import", str(marks_file), "--json"]) == 0
    shares = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sum(row["audited"] for row in shares) == 2
    with ResultsStore(path) as store:
        marks = store.audit_marks()
    by_item = {m["item_id"]: m for m in exported["marks"]}
    assert {k: v["mark"] for k, v in marks.items()} == {k: v["mark"] for k, v in by_item.items()}
    assert {v["auditor"] for v in marks.values()} == {"tester"}
    wrong = next(v for v in marks.values() if v["mark"] == "wrong")
    assert wrong["note"] == "says ten, resolution says five"


def test_tables_fit_a_1400px_window(page, tmp_path):
    """Table 8 (summary), the campaigns, Table 14 (leakage) and the audit shares of campaigns
    that differ in several settings stay within a 1400 px window: no table scrolls, none widens
    the page, numbers and corpora stay on one line (issue 31)."""
    from test_report import several_settings_file, wide_page

    html = wide_page(several_settings_file(tmp_path / "r.duckdb"), tmp_path)
    page.goto(html.as_uri())
    width = page.evaluate("document.documentElement.clientWidth")
    assert width == 1400
    for table in ("summary", "campaigns", "leakage", "audit"):
        box = page.evaluate(
            """id => {
                const table = document.getElementById(id), box = table.getBoundingClientRect();
                const wrap = table.parentElement;
                return {left: box.left, right: box.right, wrap: wrap.className,
                        scroll: wrap.scrollWidth, client: wrap.clientWidth};
            }""",
            table,
        )
        assert box["wrap"] == "tw", table
        assert box["left"] >= 0 and box["right"] <= width, (table, box)
        assert box["scroll"] <= box["client"], (table, box)
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    # a number, a corpus or a leakage line is never broken; a setting only between its pairs
    lines = page.evaluate(
        """() => {
            const count = el => {
                const range = document.createRange();
                range.selectNodeContents(el);
                return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
            };
            const pick = s => [...document.querySelectorAll(s)].map(count);
            return {numbers: pick("#summary td:not(.l)"), corpora: pick("#summary td.l:not(.w)"),
                    pieces: pick("#leakage .nw, #summary .kv")};
        }"""
    )
    for kind, counts in lines.items():
        assert counts and set(counts) == {1}, (kind, counts)
    page.screenshot(path=str(tmp_path / "tables.png"), full_page=True)
    assert page.problems == []
