"""The report's episode browser: every stored episode of the shown campaigns in one HTML section.

* :func:`campaign_records` - the task records of each campaign's corpus (for the public request
  and the analyst-only fields), loaded once per corpus.
* :func:`episode_data` - the episodes as compact JSON-ready data: every text interned once in a
  string table, each episode a short array of indices.
* :func:`render_browser` - the HTML section: the data embedded as ``application/json`` (never
  executed), plain JavaScript (``assets/browser.js``) that filters, searches and draws a
  virtualized list and the selected episode. No network, no library, no server.
* :func:`script_json`, :func:`asset_text` - shared with the audit page.

Everything stored is shown as text: the script builds the page with ``textContent`` only, so
agent text such as ``<script>`` renders as the characters it is. The privileged fields
(credits per question, the record's resolutions and frozen responses, the reference SQL and an
LLM oracle's routes) sit in a separate panel marked as analyst-only. The page is for analysts:
nothing here is ever given to an agent (the env and wrappers never import this module).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.records import TaskRecord

__all__ = [
    "DATA_VERSION",
    "StringTable",
    "asset_text",
    "campaign_label",
    "campaign_records",
    "episode_data",
    "render_browser",
    "script_json",
]

#: Version of the embedded data layout (``episode_data``).
DATA_VERSION = 1

RecordLookup = Callable[[str], "TaskRecord | None"]


class StringTable:
    """Interns strings: each distinct text is stored once and referred to by its index.

    Index 0 is the empty string, which also stands for a missing value.

    >>> table = StringTable()
    >>> table.add("a"), table.add("b"), table.add("a"), table.add(None)
    (1, 2, 1, 0)
    >>> table.strings
    ['', 'a', 'b']
    """

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def add(self, text: Any) -> int:
        """The index of ``text`` (``str(text)``; None is the empty string)."""
        if text is None:
            return 0
        text = text if isinstance(text, str) else str(text)
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.strings)
            self.strings.append(text)
        return found


def script_json(data: Any) -> str:
    """JSON safe to embed in ``<script type="application/json">``: ``<``, ``>``, ``&`` and the
    JavaScript line separators are written as ``\\u`` escapes, so no stored text can close the
    element or start markup.

    >>> script_json({"x": "</script><b>"})
    '{"x":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def asset_text(name: str) -> str:
    """A file of ``ambitab_gym/evaluation/assets`` (shipped as package data)."""
    return (resources.files("ambitab_gym.evaluation") / "assets" / name).read_text("utf-8")


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("model") or json.dumps(value, sort_keys=True))
    return "" if value is None else str(value)


def campaign_label(campaign: Mapping[str, Any], key: str) -> str:
    """A campaign's asker, oracle or solver as shown: the config value, with the LLM's model
    for ``llm`` components (``llm (qwen3-14b)``).

    >>> campaign_label({"config": {"oracle": "llm", "llm": {"model": "qwen3"}}}, "oracle")
    'llm (qwen3)'
    >>> campaign_label({"config": {"asker": "generic"}}, "asker")
    'generic'
    """
    config = campaign.get("config") or {}
    value = _short(config.get(key))
    model = (config.get("llm") or {}).get("model") if isinstance(config.get("llm"), dict) else None
    if model and (value == "llm" or value.startswith("llm:")):
        value = f"{value} ({model})"
    return value


def _corpus_reference(campaign: Mapping[str, Any]) -> str:
    config = campaign.get("config") or {}
    return str(config.get("corpus") or campaign.get("env_id") or campaign.get("corpus") or "")


def campaign_records(
    campaigns: Iterable[Mapping[str, Any]],
    *,
    loader: Callable[[str], Any] = load_corpus,
) -> tuple[dict[str, RecordLookup], list[str]]:
    """Each campaign's record lookup (``record_id -> TaskRecord | None``) and notes on corpora
    that did not load (their episodes are shown without request and privileged fields).

    Example:
        >>> lookups, notes = campaign_records(
        ...     [{"campaign_id": "c", "corpus": "taco", "config": {"corpus": "AmbiTab-TACO-v0"}}])
        >>> record = lookups["c"]("taco-0001")
        >>> record.corpus, lookups["c"]("no-such-record"), notes
        ('taco', None, [])
    """
    loaded: dict[str, dict[str, TaskRecord] | None] = {}
    notes: list[str] = []
    lookups: dict[str, RecordLookup] = {}
    for campaign in campaigns:
        reference = _corpus_reference(campaign)
        if reference not in loaded:
            try:
                corpus = loader(reference)
                loaded[reference] = {r.id: r for r in corpus.records}
            except Exception as error:  # noqa: BLE001 - shown as a note; the episodes still are
                loaded[reference] = None
                notes.append(f"corpus {reference!r} did not load ({error}): requests not shown")
        records = loaded[reference] or {}
        lookups[campaign["campaign_id"]] = records.get
    return lookups, notes


def _record_row(record: TaskRecord | None, record_id: str, strings: StringTable) -> list:
    """``[record id, request, reference SQL, [[id, term, kind, resolution, response], ...]]``."""
    if record is None:
        return [strings.add(record_id), 0, 0, []]
    return [
        strings.add(record.id),
        strings.add(record.spec.request),
        strings.add(record.verification.reference_sql),
        [
            [
                strings.add(a.id),
                strings.add(a.term),
                strings.add(a.kind),
                strings.add(a.resolution),
                strings.add(a.response),
            ]
            for a in record.ambiguities
        ],
    ]


def _turn_row(turn: Mapping[str, Any], strings: StringTable) -> list:
    """``[question, answer, [credit ids], route]``; route ``[kind, argument, rationale,
    parsed]`` or 0 (deterministic and leaky oracles store none)."""
    route = turn.get("route")
    route_row: Any = 0
    if isinstance(route, Mapping):
        route_row = [
            strings.add(route.get("kind")),
            strings.add(route.get("argument")),
            strings.add(route.get("rationale")),
            1 if route.get("parsed", True) else 0,
        ]
    return [
        strings.add(turn.get("question")),
        strings.add(turn.get("answer")),
        [strings.add(c) for c in turn.get("credits") or ()],
        route_row,
    ]


def episode_data(
    campaigns: Sequence[Mapping[str, Any]],
    episodes: Mapping[str, Sequence[Mapping[str, Any]]],
    records: Mapping[str, RecordLookup],
    *,
    corpus_names: Mapping[str, str] | None = None,
) -> dict:
    """The browser's data: compact, JSON-ready.

    Args:
        campaigns: the campaigns shown (store dicts).
        episodes: campaign id -> its stored episode rows.
        records: campaign id -> record lookup (:func:`campaign_records`).
        corpus_names: campaign id -> corpus as displayed (default: the stored corpus name).

    Returns:
        ``{"v", "s", "c", "r", "e"}``: ``s`` the string table; ``c`` campaigns ``[id, kind,
        corpus, asker, oracle, solver]``; ``r`` records ``[record id, request, reference SQL,
        ambiguities]``; ``e`` episodes ``[campaign, condition, seed, record, success (1, 0 or
        null), stop reason, verdict reason, error, SQL, verdict detail, turns, precision,
        recall]``. Text fields are indices into ``s``.

    Example:
        >>> campaign = {"campaign_id": "c1", "kind": "evaluate", "corpus": "bird",
        ...             "config": {"asker": "generic", "oracle": "deterministic"}}
        >>> row = {"condition": "asker", "seed": 0, "record_id": "r1", "success": 0.0,
        ...        "dialogue": [{"question": "Q?", "answer": "A.", "credits": ["x"]}]}
        >>> data = episode_data([campaign], {"c1": [row]}, {"c1": lambda rid: None})
        >>> e = data["e"][0]
        >>> data["s"][e[1]], e[4], [data["s"][i] for i in e[10][0][:2]]
        ('asker', 0, ['Q?', 'A.'])
    """
    strings = StringTable()
    names = corpus_names or {}
    campaign_rows, record_rows, episode_rows = [], [], []
    record_index: dict[tuple[str, str], int] = {}
    for i, campaign in enumerate(campaigns):
        cid = campaign["campaign_id"]
        corpus = names.get(cid) or str(campaign.get("corpus") or "")
        campaign_rows.append(
            [
                strings.add(cid),
                strings.add(campaign.get("kind")),
                strings.add(corpus),
                strings.add(campaign_label(campaign, "asker")),
                strings.add(campaign_label(campaign, "oracle")),
                strings.add(campaign_label(campaign, "solver")),
            ]
        )
        lookup = records.get(cid)
        for row in episodes.get(cid, ()):
            record_id = str(row.get("record_id") or "")
            key = (_corpus_reference(campaign), record_id)
            at = record_index.get(key)
            if at is None:
                record = lookup(record_id) if lookup is not None else None
                at = record_index[key] = len(record_rows)
                record_rows.append(_record_row(record, record_id, strings))
            success = row.get("success")
            episode_rows.append(
                [
                    i,
                    strings.add(row.get("condition")),
                    int(row.get("seed") or 0),
                    at,
                    None if success is None else (1 if success >= 0.5 else 0),
                    strings.add(row.get("stop_reason")),
                    strings.add(row.get("verdict_reason")),
                    strings.add(row.get("error")),
                    strings.add(row.get("sql")),
                    strings.add(row.get("verdict_detail")),
                    [_turn_row(t, strings) for t in row.get("dialogue") or ()],
                    _rate(row.get("precision")),
                    _rate(row.get("recall")),
                ]
            )
    return {
        "v": DATA_VERSION,
        "s": strings.strings,
        "c": campaign_rows,
        "r": record_rows,
        "e": episode_rows,
    }


def _rate(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)


def render_browser(data: Mapping[str, Any]) -> str:
    """The browser's HTML section (its CSS, the embedded data and the script).

    >>> html = render_browser({"v": 1, "s": [""], "c": [], "r": [], "e": []})
    >>> '<section id="episode-browser"' in html and 'type="application/json"' in html
    True
    """
    count = len(data.get("e", ()))
    return "\n".join(
        [
            f"<style>{asset_text('browser.css')}</style>",
            f'<section id="episode-browser" data-episodes="{count}">',
            "<h2>Episodes</h2>",
            '<p class="note">Every stored episode of the campaigns shown. Filter, search, and '
            "pick one to read its request, dialogue, submitted SQL and verdict. The "
            "<strong>privileged</strong> panel holds what only an analyst may see (credits, "
            "resolutions, reference SQL, oracle routes); none of it is ever shown to an agent.</p>",
            '<div id="eb-app"><noscript>The episode browser needs JavaScript.</noscript></div>',
            "</section>",
            f'<script type="application/json" id="episode-data">{script_json(data)}</script>',
            f"<script>{asset_text('browser.js')}</script>",
        ]
    )


def load_episodes(
    store: ResultsStore, campaigns: Sequence[Mapping[str, Any]]
) -> dict[str, list[dict]]:
    """Campaign id -> its stored episodes."""
    return {c["campaign_id"]: store.episodes(c["campaign_id"]) for c in campaigns}
