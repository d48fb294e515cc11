"""Shared helpers for the LLM tests."""

from __future__ import annotations

from ambitab_gym.records import TaskRecord, parse_record


def record(
    ambiguities: list[dict] | None = None,
    *,
    request: str = "List the top customers by spending.",
    sql: str = "SELECT name FROM customers ORDER BY spent DESC LIMIT 5",
    record_id: str = "llm-demo-1",
    schema: str | None = "CREATE TABLE customers (name TEXT, spent REAL);",
) -> TaskRecord:
    """A hand-written record; the default has one ambiguity with a distinctive resolution."""
    if ambiguities is None:
        ambiguities = [
            {
                "id": "top",
                "term": "top customers",
                "aliases": ["best customers"],
                "resolution": "the five customers with the highest spending",
                "response": "I mean the five biggest spenders.",
                "evidence": "top customers refers to ORDER BY spent DESC LIMIT 5",
            }
        ]
    return parse_record(
        {
            "id": record_id,
            "avt_id": f"{record_id}-avt",
            "corpus": "demo",
            "spec": {"request": request, "database": "shop", "schema": schema},
            "ambiguities": ambiguities,
            "verification": {"database": "shop", "reference_sql": sql},
        }
    )


def contents(request: dict) -> str:
    """All message contents of a recorded request, joined."""
    return "\n".join(m["content"] for m in request["body"]["messages"])
