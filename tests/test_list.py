"""``ambitab-gym list``: every corpus with the Table 4 counts per split.

The counts are checked against counts computed here straight from ``records.jsonl`` with the
json module, not through the package's record model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ambitab_gym.cli import main
from ambitab_gym.corpora import BUNDLED_DIR, ENV_IDS

COUNTED = {"critical", "knowledge"}


def independent_counts(records_path: Path) -> dict[str, dict[str, int]]:
    """split -> Table 4 counts, from the raw JSON lines."""
    raw: dict[str, list[dict]] = {}
    for line in records_path.read_text("utf-8").splitlines():
        record = json.loads(line)
        raw.setdefault(record.get("split", "all"), []).append(record)
    out = {}
    for split, records in raw.items():
        per_record = [
            sum(1 for a in r.get("ambiguities", []) if a.get("kind", "critical") in COUNTED)
            for r in records
        ]
        out[split] = {
            "records": len(records),
            "databases": len({r["spec"]["database"] for r in records}),
            "records_with_ambiguities": sum(1 for m in per_record if m > 0),
            "ambiguities": sum(per_record),
            "avts": len({r["avt_id"] for r in records}),
        }
    return out


def listed(capsys) -> list[dict]:
    assert main(["list", "--json"]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def as_counts(entry: dict) -> dict[str, dict[str, int]]:
    keys = ("records", "databases", "records_with_ambiguities", "ambiguities", "avts")
    return {s["split"]: {k: s[k] for k in keys} for s in entry["splits"]}


def test_json_counts_match_records_for_every_bundled_corpus(data_home, capsys):
    entries = {e["name"]: e for e in listed(capsys)}
    bundled = [n for n in ENV_IDS.values() if (BUNDLED_DIR / n / "manifest.json").is_file()]
    assert len(bundled) >= 5
    for name in bundled:
        entry = entries[name]
        assert "error" not in entry, entry.get("error")
        assert entry["origin"] == "bundled" and entry["active"] is True
        assert entry["env_id"] in ENV_IDS and ENV_IDS[entry["env_id"]] == name
        assert as_counts(entry) == independent_counts(BUNDLED_DIR / name / "records.jsonl")


def test_known_sample_counts(data_home, capsys):
    # Hand-checked: the bundled Bird sample's manifest states 60 records in 29 AVTs with 72
    # counted ambiguities; the listing must agree when summed over its splits.
    entry = next(e for e in listed(capsys) if e["name"] == "bird")
    manifest = json.loads((BUNDLED_DIR / "bird" / "manifest.json").read_text("utf-8"))
    totals = {k: sum(s[k] for s in entry["splits"]) for k in ("records", "avts", "ambiguities")}
    assert totals == {k: manifest["counts"][k] for k in ("records", "avts", "ambiguities")}


def test_built_corpus_is_listed_and_shadows_the_bundled_one(data_home, capsys):
    target = data_home / "corpora" / "ambiqt"
    shutil.copytree(BUNDLED_DIR / "ambiqt", target)
    lines = (target / "records.jsonl").read_text("utf-8").splitlines()
    (target / "records.jsonl").write_text("\n".join(lines[:10]) + "\n", "utf-8")
    entries = [e for e in listed(capsys) if e["name"] == "ambiqt"]
    by_origin = {e["origin"]: e for e in entries}
    assert set(by_origin) == {"bundled", "built"}
    assert by_origin["built"]["active"] is True and by_origin["bundled"]["active"] is False
    assert as_counts(by_origin["built"]) == independent_counts(target / "records.jsonl")
    assert sum(s["records"] for s in by_origin["built"]["splits"]) == 10


def test_broken_corpus_is_listed_with_its_error(data_home, capsys):
    target = data_home / "corpora" / "broken"
    shutil.copytree(BUNDLED_DIR / "ambrosia", target)
    with (target / "records.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    entry = next(e for e in listed(capsys) if e["name"] == "broken")
    assert entry["origin"] == "built" and "invalid JSON" in entry["error"]


def test_table_is_aligned_with_one_row_per_split(data_home, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out[0].split()
    assert header[:4] == ["corpus", "env", "id", "origin"]
    assert "ambiguities" in header and "AVTs" in header
    expected = independent_counts(BUNDLED_DIR / "bird" / "records.jsonl")
    bird_rows = [line.split() for line in out if line.startswith("bird ")]
    assert {row[3] for row in bird_rows} == set(expected)
    for row in bird_rows:
        counts = expected[row[3]]
        assert [int(x) for x in row[4:9]] == [
            counts["records"],
            counts["databases"],
            counts["records_with_ambiguities"],
            counts["ambiguities"],
            counts["avts"],
        ]
    # right-aligned numeric columns end at the same position in every row
    table = out[: out.index("")]
    assert len({len(line) for line in table}) == 1


def test_components_name_the_solver_each_leakage_check_needs(capsys):
    readers = "dialogue-sql, dialogue-sql-blind or llm"
    assert main(["list", "--components"]) == 0
    lines = capsys.readouterr().out.splitlines()

    def line_of(name: str) -> str:
        return next(line for line in lines if line.split()[:1] == [name])

    # the oracle said "caught by dJ_resp" without saying that the default solver never shows it
    leaky = line_of("leaky-sql-responder")
    assert "(caught by dJ_resp)" in leaky and f"dJ_resp needs --solver {readers}" in leaky
    assert "needs --solver" not in line_of("generic-credit-matcher")
    assert "cannot show dJ_resp or dJ_full" in line_of("interpretation")
    assert "cannot show" not in line_of("dialogue-sql")
    start = lines.index("leakage checks (ambitab-gym leakage), the solver each needs:")
    checks = {line.split()[0]: line.split(None, 1)[1] for line in lines[start + 1 :]}
    assert checks == {
        "dJ_resp": f"a solver that reads the answers: {readers}",
        "dRec_spec^Q": "no solver (its runs only ask)",
        "dJ_full": f"a solver that reads the answers: {readers}",
        "dRec_none": "no solver (its runs only ask)",
    }

    assert main(["list", "--components", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out.splitlines()[-1])
    solvers = {e["name"]: e["reads_answers"] for e in entries if e["kind"] == "solver"}
    assert solvers == {
        "interpretation": False,
        "dialogue-sql": True,
        "dialogue-sql-blind": True,
        "llm": True,
    }
    needing = {e["name"]: e["needs_solver"] for e in entries if "needs_solver" in e}
    assert needing == {
        "leaky-sql-responder": {"dJ_resp": ["dialogue-sql", "dialogue-sql-blind", "llm"]}
    }


def test_component_lines_keep_the_case_of_product_names(capsys):
    # a description's first letter is lowered for a plain word ("Credits ..."), never inside a
    # name such as DuckDB or PostgreSQL
    assert main(["list", "--components"]) == 0
    out = capsys.readouterr().out
    assert "duckDB" not in out and "postgreSQL" not in out
    assert "DuckDB (embedded" in out and "PostgreSQL server" in out
