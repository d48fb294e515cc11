"""The roles' prompt caches (issue 19, item 3) change no byte of any prompt and never carry one
record's text into another record's prompt.

Every request is recorded by the real scripted server (``ambitab_gym.testing.llm_server``) over
whole campaigns of the four roles (asker, matcher, responder, solver): once with the caches, once
with every cache bypassed (each builder's uncached function put in its place), and the two sets
of request bodies must be equal byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import pytest

import ambitab_gym.oracles.llm as oracle_llm
import ambitab_gym.oracles.llm_prompts as oracle_prompts
import ambitab_gym.policies.llm_prompts as agent_prompts
from ambitab_gym.corpora import load_corpus
from ambitab_gym.evaluation import CampaignConfig, run_campaign
from ambitab_gym.llm.client import response_format
from ambitab_gym.llm.sampling import EpisodeKey, derive_seed
from ambitab_gym.oracles.access import AccessPolicy, NotesBuilder
from ambitab_gym.oracles.base import OracleContext
from ambitab_gym.oracles.llm_prompts import (
    NoteEntry,
    OracleNotes,
    matcher_messages,
    matcher_schema,
    responder_messages,
)
from ambitab_gym.oracles.sqltext import sql_segments
from ambitab_gym.policies.llm_prompts import TaskTexts, asker_messages, solver_messages
from ambitab_gym.records import PublicSpec
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptRule, role_rules
from ambitab_gym.trajectory import DialogueTurn, PublicView

CORPUS = "AmbiTab-Bird-v0"


def _records(limit: int):
    records = load_corpus(CORPUS).records[:limit]
    assert all(r.m > 0 for r in records[:2])  # both clarify: every role is called for them
    return records


def _rules(records) -> list[ScriptRule]:
    """Per record, a matcher route that is valid for it (labeled for the first record of each
    pair, unlabeled with a real reference segment for the other), so the responder is called."""
    matcher_rules = []
    for i, rec in enumerate(records):
        if not rec.m:
            continue
        if i % 2 == 0:
            action = "labeled(" + json.dumps(rec.ambiguities[0].term) + ")"
        else:
            action = (
                "unlabeled(" + json.dumps(sql_segments(rec.verification.reference_sql)[0]) + ")"
            )
        when = f"(?s)(?=.*{re.escape(ROLE_MARKERS['matcher'])})(?=.*{re.escape(rec.spec.request)})"
        matcher_rules.append(
            ScriptRule(json.dumps({"reasoning": "r", "action": action}), when=when)
        )
    return matcher_rules + role_rules(
        ["Which rows do you mean?", "Which time period?"],
        responder=json.dumps({"answer": "The usual ones."}),
        solver=json.dumps({"reasoning": "r", "type": "final_sql", "output": "SELECT 1"}),
    )


def _bodies(server) -> list[str]:
    """Every request body the server received, as canonical JSON (prompts compared exactly)."""
    return sorted(
        json.dumps(r["body"], sort_keys=True, ensure_ascii=False) for r in server.requests()
    )


def _campaign(serve, make_client, tmp_path, name, strategy, records, seeds, concurrency):
    server = serve(_rules(records), latency_s=0.02)  # a latency: episodes overlap
    client = make_client(server.url, concurrency=8)
    config = CampaignConfig(
        CORPUS, asker=f"llm:{strategy}", solver="llm", oracle="llm", conditions=("asker",),
        seeds=seeds, limit=len(records),
    )  # fmt: skip
    summary = run_campaign(
        config, tmp_path / f"{name}.duckdb", concurrency=concurrency, llm_client=client,
        progress=False,
    )  # fmt: skip
    assert summary.errors == {}
    return server


def _bypass_caches(monkeypatch) -> None:
    """Every prompt cache replaced by the function it wraps, or a plain re-render."""
    monkeypatch.setattr(
        oracle_prompts, "_matcher_static", oracle_prompts._matcher_static.__wrapped__
    )
    monkeypatch.setattr(
        oracle_prompts, "_responder_head", oracle_prompts._responder_head.__wrapped__
    )
    monkeypatch.setattr(agent_prompts, "_solver_system", agent_prompts._solver_system.__wrapped__)
    monkeypatch.setattr(oracle_llm, "_route_format", oracle_llm._route_format.__wrapped__)
    monkeypatch.setattr(TaskTexts, "get", lambda self, view: view.render_task())
    original = NotesBuilder._entries

    def fresh_entries(self, record, **flags):
        self._notes.clear()
        return original(self, record, **flags)

    monkeypatch.setattr(NotesBuilder, "_entries", fresh_entries)


@pytest.mark.parametrize("strategy", ["checklist-ledger", "checklist-chat", "direct"])
def test_a_whole_campaign_sends_the_same_bytes_with_and_without_caches(
    serve, make_client, tmp_path, monkeypatch, strategy
):
    records = _records(6)
    cached = _campaign(serve, make_client, tmp_path, "cached", strategy, records, (0, 1), 4)
    with monkeypatch.context() as patch:
        _bypass_caches(patch)
        assert oracle_prompts._matcher_static.__name__ == "_matcher_static"  # the bare function
        assert not hasattr(oracle_prompts._matcher_static, "cache_info")
        plain = _campaign(serve, make_client, tmp_path, "plain", strategy, records, (0, 1), 4)
    with_caches, without = _bodies(cached), _bodies(plain)
    assert len(with_caches) == len(without) > 0
    assert with_caches == without
    # every role was called, the responder included
    roles = Counter(
        role
        for body in with_caches
        for role, marker in ROLE_MARKERS.items()
        if marker in json.loads(body)["messages"][0]["content"]
    )
    assert set(roles) == {"asker", "matcher", "responder", "solver"}, roles
    # the caches were used in the cached run (so the comparison compares something)
    assert oracle_prompts._matcher_static.cache_info().hits > 0
    assert oracle_prompts._responder_head.cache_info().hits > 0


def _owners(records, seeds, sampling) -> dict[int, str]:
    """Which record each derived request seed belongs to (the seed is derived from the episode:
    condition, campaign seed, record id, role, turn, attempt)."""
    out: dict[int, str] = {}
    for rec in records:
        for seed in seeds:
            for role in ROLE_MARKERS:
                for turn in range(6):
                    key = EpisodeKey("", "asker", seed, rec.id)
                    derived = derive_seed(key, role, turn, 1, sampling[role].seed)
                    assert out.setdefault(derived, rec.id) == rec.id  # no collision
    return out


def test_interleaved_episodes_of_two_records_never_share_text(serve, make_client, tmp_path):
    # bird-0001 and bird-0002: one request, two readings ("five" vs "ten" top customers); a
    # cache keyed by the request, or left over from the other episode, would show the wrong one
    first, second = records = _records(2)
    assert first.spec.request == second.spec.request
    meaning = {r.id: r.ambiguities[0].resolution for r in records}
    assert meaning[first.id] != meaning[second.id]
    seeds = (0, 1, 2, 3)
    server = _campaign(serve, make_client, tmp_path, "two", "checklist-ledger", records, seeds, 4)
    assert server.stats()["max_in_flight"] >= 2  # the two records' episodes overlapped
    owners = _owners(records, seeds, make_client(server.url).sampling)
    corpus = load_corpus(CORPUS)
    builders = [
        NotesBuilder(AccessPolicy.scoped(), corpus),
        NotesBuilder(AccessPolicy.unfiltered(), corpus),
    ]
    by_id = {r.id: r for r in records}
    seen: Counter = Counter()
    for request in server.requests():
        body = request["body"]
        messages = body["messages"]
        role = next(k for k, v in ROLE_MARKERS.items() if v in messages[0]["content"])
        owner = by_id[owners[body["seed"]]]
        other = second if owner is first else first
        seen[role, owner.id] += 1
        user = messages[1]["content"]
        if role in ("asker", "solver"):
            assert corpus.public_spec(owner).request in user
        elif role == "responder":  # the responder always reads the meanings
            assert meaning[owner.id] in user and meaning[other.id] not in user
        else:  # the matcher: the uncached builder's text for its own record, under the policy
            matched = False
            for notes in builders:
                mine = oracle_prompts._matcher_static.__wrapped__(
                    *_static(notes.matcher_notes(OracleContext(owner)))
                )
                theirs = oracle_prompts._matcher_static.__wrapped__(
                    *_static(notes.matcher_notes(OracleContext(other)))
                )
                if messages[0]["content"] == mine[0] and user.startswith(mine[1] + "\n\n"):
                    matched = True
                    assert theirs[1] == mine[1] or not user.startswith(theirs[1] + "\n\n")
            assert matched, user[:300]
    for role in ROLE_MARKERS:
        assert seen[role, first.id] > 0 and seen[role, second.id] > 0, seen


def _static(notes):
    return notes.request, notes.entries, notes.context, notes.segments, notes.reference_sql


def _record(record_id: str, term: str, request: str):
    from llm_helpers import record

    return record(
        [{"id": "a", "term": term, "resolution": f"the meaning of {term}"}],
        request=request,
        record_id=record_id,
    )


def test_records_sharing_an_id_keep_their_own_notes_and_prompts():
    one = _record("same-id", "top customers", "List the top customers.")
    two = _record("same-id", "recent orders", "Show the recent orders.")
    builder = NotesBuilder(AccessPolicy.scoped())
    for _ in range(3):  # interleaved, as two episodes in flight
        for rec, term, request in ((one, "top customers", "List"), (two, "recent orders", "Show")):
            notes = builder.matcher_notes(OracleContext(rec))
            assert [e.term for e in notes.entries] == [term]
            user = matcher_messages("Which?", notes)[1]["content"]
            other = "recent orders" if term == "top customers" else "top customers"
            assert term in user and other not in user and request in user


def test_task_texts_are_reused_only_for_the_same_spec_and_pickle_empty():
    import pickle

    texts = TaskTexts(limit=2)
    a = PublicView(PublicSpec(request="Count staff.", database="hr"))
    b = PublicView(PublicSpec(request="Count staff.", database="sales"))
    assert texts.get(a) == a.render_task() and "hr" in texts.get(a)
    assert texts.get(b) == b.render_task() and "sales" in texts.get(b)
    assert texts.get(a) == a.render_task()  # interleaved: each spec its own text
    for i in range(5):  # bounded
        texts.get(PublicView(PublicSpec(request=f"R{i}", database="d")))
    assert len(texts._texts) <= 2
    copy = pickle.loads(pickle.dumps(texts))
    assert copy.limit == 2 and copy._texts == {} and copy.get(a) == a.render_task()


# -- known answers: the prompts as the builders wrote them before any cache -----------------
# sha256 (first 16 hex digits) of json.dumps(messages, ensure_ascii=False), computed with the
# code of commit 7c8bae2 (before the caches); every case is built twice below, so both the
# first (cache-filling) and the second (cache-hit) call must give these bytes.
GOLDEN = {
    "matcher-full": "cb2d9819c3356959",
    'responder-full-labeled("top customers")': "8d6b81cb549e6cc2",
    'responder-full-unlabeled("LIMIT 5")': "dc5cf43bb6456edb",
    "responder-full-unanswerable()": "7ce332c7e7ae516b",
    "matcher-bare": "7b8f5a4fd564da4d",
    'responder-bare-labeled("top customers")': "454d72ff4fe1c034",
    'responder-bare-unlabeled("LIMIT 5")': "c827f3152716ef88",
    "responder-bare-unanswerable()": "37a21f41b672d2fd",
    "asker-direct-2-0": "f2bb24a6ce2b2c70",
    "asker-checklist-chat-2-0": "d97d66b47ce07b30",
    "asker-checklist-ledger-2-0": "e6496d2e9336f678",
    "asker-direct-2-2": "638bc2f42a13bd17",
    "asker-checklist-chat-2-2": "46ef168ab747a75f",
    "asker-checklist-ledger-2-2": "d5043f8755697534",
    "asker-direct-1-0": "88d3956bb471588f",
    "asker-checklist-chat-1-0": "307138fb3c3db3fd",
    "asker-checklist-ledger-1-0": "deeb7dcb2342eec1",
    "asker-direct-1-2": "c222bdb813406836",
    "asker-checklist-chat-1-2": "b7dbb5d432409fed",
    "asker-checklist-ledger-1-2": "59fcc6c7d9594e94",
    "solver-sqlite-0": "59898d4b46d7145f",
    "solver-sqlite-2": "456cd74fdbd0f1c2",
    "solver-postgres-0": "40c1789918618b07",
    "solver-postgres-2": "cb717ff1266c5ba2",
    "solver-duckdb-0": "e79f821da25f2d6f",
    "solver-duckdb-2": "3ec40252bdc83607",
    "solver-mysql-0": "1ce1b22b1efb27e7",
    "solver-mysql-2": "89b4e526a089d9c2",
}


def _golden_cases() -> dict:
    entries = (
        NoteEntry("top customers", ("best customers",), "the five biggest spenders", "ORDER BY spent DESC"),
        NoteEntry('région "x"', (), None, None),
    )  # fmt: skip
    full = OracleNotes(
        "List the top customers.", entries, "Schema:\nCREATE TABLE c (n TEXT)",
        ("SELECT n", "FROM c", "LIMIT 5"), "SELECT n FROM c LIMIT 5", "Q1: Which?\nA1: Five.",
    )  # fmt: skip
    bare = OracleNotes("Count rows.")
    out = {}
    for name, notes in (("full", full), ("bare", bare)):
        out[f"matcher-{name}"] = matcher_messages("Top how many?", notes)
        for action, focus in (
            ('labeled("top customers")', "the five"),
            ('unlabeled("LIMIT 5")', "LIMIT 5"),
            ("unanswerable()", None),
        ):
            out[f"responder-{name}-{action}"] = responder_messages(
                "Top how many?", notes, action=action, focus=focus
            )
    spec = PublicSpec(
        request="List top customers.", database="shop", schema="CREATE TABLE c (n TEXT)",
        column_meanings={"c.n": "name"}, external_knowledge=("top means spend",),
    )  # fmt: skip
    turns = (
        DialogueTurn("Top how many?", "Five."),
        DialogueTurn("Which year?", "Sorry, I don't know."),
    )
    texts = TaskTexts()
    for left in (2, 1):
        for k in (0, 2):
            view = PublicView(spec, turns[:k], questions_left=left)
            for strategy in ("direct", "checklist-chat", "checklist-ledger"):
                out[f"asker-{strategy}-{left}-{k}"] = asker_messages(
                    strategy, view, task=texts.get(view)
                )
    for dialect in ("sqlite", "postgres", "duckdb", "mysql"):
        for k in (0, 2):
            view = PublicView(spec, turns[:k], phase="sql")
            out[f"solver-{dialect}-{k}"] = solver_messages(
                view, dialect=dialect, task=texts.get(view)
            )
    return out


def test_prompts_match_the_bytes_written_before_the_caches():
    for _ in range(2):  # cold, then from the caches
        digests = {
            key: hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode()).hexdigest()[:16]
            for key, messages in _golden_cases().items()
        }
        assert digests == GOLDEN


def test_the_cached_route_format_is_the_schema_of_the_notes():
    notes = OracleNotes("r", (NoteEntry("top"),), segments=("LIMIT 5",))
    expected = response_format("route", matcher_schema(notes))
    assert oracle_llm._route_format(notes.entries, notes.segments) == expected
    assert oracle_llm._route_format(notes.entries, ("LIMIT 6",))["json_schema"]["schema"][
        "properties"
    ]["action"]["enum"] == ['labeled("top")', 'unlabeled("LIMIT 6")', "unanswerable()"]
