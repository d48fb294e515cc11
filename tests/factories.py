"""Small hand-written records for tests."""

from __future__ import annotations

from ambitab_gym.records import TaskRecord, parse_record


def make_record(
    ambiguities: list[dict],
    *,
    request: str = "List the top earners by region.",
    record_id: str = "demo-1",
    avt_id: str = "demo-avt-1",
    sql: str = "SELECT 1",
) -> TaskRecord:
    return parse_record(
        {
            "id": record_id,
            "avt_id": avt_id,
            "corpus": "demo",
            "split": "train",
            "spec": {"request": request, "database": "hr"},
            "ambiguities": ambiguities,
            "verification": {"database": "hr", "reference_sql": sql},
        }
    )


def amb(id: str, term: str, *aliases: str, kind: str = "critical", **extra) -> dict:
    return {
        "id": id,
        "term": term,
        "aliases": list(aliases),
        "kind": kind,
        "resolution": extra.pop("resolution", f"resolution of {id}"),
        **extra,
    }
