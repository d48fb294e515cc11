"""The oracle-response audit: a person marks each credited oracle answer against its resolution.

The paper audits the LLM-authored response catalogue of AmbiTab-BIRD-Interact by hand; this
makes that check repeatable for any oracle and corpus in a results file:

* :func:`audit_items` - every distinct oracle answer of the chosen campaigns that was credited
  for an ambiguity, next to that ambiguity's resolution (and frozen response): one
  :class:`AuditItem` per (oracle, corpus, record, ambiguity, answer).
* :func:`render_audit_page` - a static, offline HTML page to mark each item ``faithful``,
  ``reveals more`` or ``wrong`` (:data:`~ambitab_gym.evaluation.store.AUDIT_MARKS`); it keeps
  the marks in the browser's local storage and exports them as a marks JSON file.
* :func:`read_marks` and :func:`import_marks` - check a marks file and store its marks in the
  results file's ``audit_marks`` table.
* :func:`audit_shares` - per oracle and corpus: items, items audited, and the share of each mark.

An item's id is a hash of its oracle, corpus, record, ambiguity and answer text, so the same
answer met again in another campaign (a frozen response is given in every seed) is audited once,
and an imported mark whose fields do not hash to its id is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.browser import (
    RecordLookup,
    asset_text,
    campaign_label,
    script_json,
)
from ambitab_gym.evaluation.store import AUDIT_MARKS, ResultsStore

__all__ = [
    "AUDIT_LABELS",
    "MARKS_FORMAT",
    "AuditItem",
    "audit_items",
    "audit_shares",
    "import_marks",
    "item_key",
    "oracle_of",
    "read_marks",
    "render_audit_page",
]

#: How each mark is shown.
AUDIT_LABELS = {"faithful": "faithful", "reveals_more": "reveals more", "wrong": "wrong"}
#: The ``format`` field of a marks file.
MARKS_FORMAT = "ambitab-gym-audit-marks"
_KEY_FIELDS = ("oracle", "corpus", "record_id", "ambiguity_id", "answer")


def item_key(oracle: str, corpus: str, record_id: str, ambiguity_id: str, answer: str) -> str:
    """The id of an audit item: a hash of what identifies it.

    >>> item_key("deterministic", "bird", "r1", "top", "the five best") == item_key(
    ...     "deterministic", "bird", "r1", "top", "the five best")
    True
    >>> len(item_key("o", "c", "r", "a", "x"))
    20
    """
    text = json.dumps([oracle, corpus, record_id, ambiguity_id, answer], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def oracle_of(campaign: Mapping[str, Any], condition: str) -> str:
    """Which oracle answered an episode: the campaign's oracle, except in a leakage campaign's
    ``hybrid`` runs ((match, resp*): the answer is the reference responder's) and ``reference``
    runs (the corpus's deterministic oracle).

    >>> c = {"kind": "leakage", "config": {"oracle": "llm", "llm": {"model": "m"}}}
    >>> oracle_of(c, "asker:actual"), oracle_of(c, "asker:hybrid"), oracle_of(c, "spec:reference")
    ('llm (m)', 'llm (m) matcher + reference responder', 'deterministic')
    """
    oracle = campaign_label(campaign, "oracle") or "deterministic"
    if campaign.get("kind") == "leakage" and ":" in condition:
        run = condition.rsplit(":", 1)[1]
        if run == "hybrid":
            return f"{oracle} matcher + reference responder"
        if run == "reference":
            return "deterministic"
    return oracle


@dataclass(frozen=True)
class AuditItem:
    """One oracle answer to audit, next to the resolution of the ambiguity it was credited for.

    Attributes:
        item_id: :func:`item_key` of oracle, corpus, record, ambiguity and answer.
        oracle, corpus, record_id, ambiguity_id: where the answer comes from.
        term: the ambiguity's term; resolution and response (frozen, may be empty): what the
            record says it resolves to.
        question: one question that drew this answer; answer: the oracle's answer.
        episodes: how many stored turns gave this answer for this ambiguity.

    >>> item = AuditItem("id", "deterministic", "bird", "r1", "top", "top customers",
    ...                  "the five best", "", "Who are the top customers?", "the five best", 3)
    >>> item.to_json()["resolution"]
    'the five best'
    """

    item_id: str
    oracle: str
    corpus: str
    record_id: str
    ambiguity_id: str
    term: str
    resolution: str
    response: str
    question: str
    answer: str
    episodes: int = 1

    def to_json(self) -> dict:
        return asdict(self)


def audit_items(
    campaigns: Sequence[Mapping[str, Any]],
    episodes: Mapping[str, Sequence[Mapping[str, Any]]],
    records: Mapping[str, RecordLookup],
    *,
    corpus_names: Mapping[str, str] | None = None,
) -> list[AuditItem]:
    """Every distinct credited oracle answer of the campaigns, in order of first appearance.

    Args:
        campaigns: the campaigns (store dicts).
        episodes: campaign id -> stored episode rows.
        records: campaign id -> record lookup (for resolutions; an answer whose record or
            ambiguity is not found is listed with an empty resolution).
        corpus_names: campaign id -> corpus as displayed (default: the stored corpus name).

    Example:
        >>> campaign = {"campaign_id": "c", "kind": "evaluate", "corpus": "bird",
        ...             "config": {"oracle": "deterministic"}}
        >>> turn = {"question": "Q?", "answer": "the five best", "credits": ["top"]}
        >>> rows = [{"condition": "full", "record_id": "r", "dialogue": [turn]}] * 2
        >>> [(i.ambiguity_id, i.episodes) for i in audit_items([campaign], {"c": rows}, {})]
        [('top', 2)]
    """
    names = corpus_names or {}
    found: dict[str, dict[str, Any]] = {}
    for campaign in campaigns:
        cid = campaign["campaign_id"]
        corpus = names.get(cid) or str(campaign.get("corpus") or "")
        lookup = records.get(cid)
        for row in episodes.get(cid, ()):
            record_id = str(row.get("record_id") or "")
            oracle = oracle_of(campaign, str(row.get("condition") or ""))
            record = lookup(record_id) if lookup is not None else None
            ambiguities = {a.id: a for a in record.ambiguities} if record is not None else {}
            for turn in row.get("dialogue") or ():
                answer = str(turn.get("answer") or "")
                for ambiguity_id in turn.get("credits") or ():
                    key = item_key(oracle, corpus, record_id, ambiguity_id, answer)
                    item = found.get(key)
                    if item is not None:
                        item["episodes"] += 1
                        continue
                    ambiguity = ambiguities.get(ambiguity_id)
                    found[key] = {
                        "item_id": key,
                        "oracle": oracle,
                        "corpus": corpus,
                        "record_id": record_id,
                        "ambiguity_id": ambiguity_id,
                        "term": ambiguity.term if ambiguity else "",
                        "resolution": ambiguity.resolution if ambiguity else "",
                        "response": (ambiguity.response or "") if ambiguity else "",
                        "question": str(turn.get("question") or ""),
                        "answer": answer,
                        "episodes": 1,
                    }
    return [AuditItem(**item) for item in found.values()]


def audit_shares(
    items: Sequence[AuditItem], marks: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per oracle and corpus: ``items``, ``audited`` (items with a stored mark), ``share``
    (audited / items) and, per mark, its count and its share of the audited items.

    Example:
        >>> items = [AuditItem(str(i), "det", "bird", "r", "a", "", "", "", "", str(i))
        ...          for i in range(4)]
        >>> row = audit_shares(items, {"0": {"mark": "faithful"}, "1": {"mark": "wrong"}})[0]
        >>> row["audited"], row["share"], row["faithful"], row["wrong_share"]
        (2, 0.5, 1, 0.5)
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        row = groups.setdefault(
            (item.oracle, item.corpus),
            {"oracle": item.oracle, "corpus": item.corpus, "items": 0, "audited": 0}
            | {m: 0 for m in AUDIT_MARKS},
        )
        row["items"] += 1
        mark = marks.get(item.item_id)
        if mark is not None and mark.get("mark") in AUDIT_MARKS:
            row["audited"] += 1
            row[mark["mark"]] += 1
    out = []
    for row in groups.values():
        row["share"] = row["audited"] / row["items"] if row["items"] else None
        for m in AUDIT_MARKS:
            row[f"{m}_share"] = row[m] / row["audited"] if row["audited"] else None
        out.append(row)
    return out


def read_marks(source: str | Path | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The marks of a marks file (or its parsed JSON), checked.

    Raises:
        ConfigurationError: not a marks file, an unknown mark, a missing field, or a mark whose
            fields do not hash to its ``item_id`` (edited or from another page).
    """
    if isinstance(source, Mapping):
        data = source
    else:
        try:
            data = json.loads(Path(source).read_text("utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"cannot read marks file {source}: {error}") from None
    if not isinstance(data, Mapping) or data.get("format") != MARKS_FORMAT:
        raise ConfigurationError(
            f'not an audit marks file (no "format": "{MARKS_FORMAT}"): export it from the '
            "page `ambitab-gym audit RESULTS` writes"
        )
    marks = data.get("marks")
    if not isinstance(marks, list):
        raise ConfigurationError("the marks file has no list of marks")
    auditor = str(data.get("auditor") or "")
    out = []
    for i, mark in enumerate(marks):
        if not isinstance(mark, Mapping):
            raise ConfigurationError(f"mark {i} is not an object")
        missing = [f for f in (*_KEY_FIELDS, "item_id", "mark") if not isinstance(mark.get(f), str)]
        if missing:
            raise ConfigurationError(f"mark {i} lacks {', '.join(missing)}")
        if mark["mark"] not in AUDIT_MARKS:
            raise ConfigurationError(
                f"mark {i} is {mark['mark']!r}, not one of {', '.join(AUDIT_MARKS)}"
            )
        if item_key(*(mark[f] for f in _KEY_FIELDS)) != mark["item_id"]:
            raise ConfigurationError(
                f"mark {i} (item {mark['item_id']}): its oracle, corpus, record, ambiguity and "
                "answer do not match its item id"
            )
        out.append(
            {
                **{f: mark[f] for f in (*_KEY_FIELDS, "item_id", "mark")},
                "resolution": str(mark.get("resolution") or ""),
                "note": str(mark.get("note") or ""),
                "auditor": str(mark.get("auditor") or auditor),
            }
        )
    return out


def import_marks(store: ResultsStore, source: str | Path | Mapping[str, Any]) -> int:
    """Check a marks file and store its marks (all or none); returns how many were stored."""
    return store.add_audit_marks(read_marks(source))


def render_audit_page(
    items: Sequence[AuditItem],
    marks: Mapping[str, Mapping[str, Any]],
    *,
    source: str = "",
) -> str:
    """The audit page: one self-contained HTML file, offline, no server.

    Marks already stored in the results file are filled in; a person's new marks are kept in the
    browser's local storage until exported with the page's "Export marks" button.

    >>> page = render_audit_page([], {}, source="r.duckdb")
    >>> "ambitab-gym-audit-marks" in page and 'id="audit-data"' in page
    True
    """
    data = {
        "format": MARKS_FORMAT,
        "source": source,
        "marks": list(AUDIT_MARKS),
        "labels": AUDIT_LABELS,
        "items": [item.to_json() for item in items],
        "stored": {
            key: {"mark": value.get("mark"), "note": value.get("note") or ""}
            for key, value in marks.items()
            if value.get("mark") in AUDIT_MARKS
        },
    }
    css = asset_text("browser.css") + asset_text("audit.css")
    return "\n".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            "<title>ambitab-gym oracle-response audit</title>",
            f"<style>{css}</style></head><body>",
            "<h1>Oracle-response audit</h1>",
            '<p class="note">Each oracle answer that was credited for an ambiguity, next to the '
            "resolution that ambiguity has in the record. Mark it <b>faithful</b> (it says the "
            "resolution and no more), <b>reveals more</b> (it says more than the resolution: "
            "column names, values, SQL) or <b>wrong</b> (it contradicts or misses the "
            "resolution). Marks stay in this browser until you export them; store them with "
            "<code>ambitab-gym audit RESULTS --import marks.json</code>.</p>",
            '<div id="audit-app"><noscript>The audit page needs JavaScript.</noscript></div>',
            f'<script type="application/json" id="audit-data">{script_json(data)}</script>',
            f"<script>{asset_text('audit.js')}</script>",
            "</body></html>",
        ]
    )
