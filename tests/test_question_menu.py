"""QuestionMenu: candidates from visible text only, features, determinism, env plumbing."""

from __future__ import annotations

import inspect
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import ambitab_gym
from ambitab_gym import STOP, AmbiTabEnv, PublicSpec, PublicView
from ambitab_gym.corpora.corpus import available_corpora, load_corpus
from ambitab_gym.oracles.base import REFUSAL
from ambitab_gym.records import TaskRecord
from ambitab_gym.trajectory import DialogueTurn
from ambitab_gym.wrappers import QuestionMenu
from ambitab_gym.wrappers import menu as menu_module
from ambitab_gym.wrappers.menu import (
    OPEN_QUESTIONS,
    MenuLayout,
    build_menu,
    menu_features,
    schema_names,
)

SCHEMA = (
    "CREATE TABLE products (\n  product_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n"
    "  category TEXT,\n  unit_price REAL\n);\n"
    'CREATE TABLE "order_items" (order_id INT, product_id INT, quantity INT, '
    "PRIMARY KEY (order_id, product_id));"
)
_WORD = re.compile(r"[A-Za-z0-9]+(?:['\u2019\-][A-Za-z0-9]+)*")


def _view(request: str, schema: str | None = SCHEMA, **kwargs) -> PublicView:
    return PublicView(PublicSpec(request=request, database="shop", schema=schema), **kwargs)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text.replace("_", " "))}


def test_menu_of_a_hand_worked_request():
    menu = build_menu(_view("Which five products are the most popular?"))
    assert [(i.kind, i.phrase) for i in menu.items] == [
        ("stop", ""),
        ("generic", ""),
        ("generic", ""),
        ("request", "five"),
        ("request", "products"),
        ("request", "most"),
        ("request", "popular"),
        ("request", "five products"),
        ("request", "most popular"),
        # "products" is a request phrase already; "order items" is a table; no column
        # shares a word with the request except product_id, which is an id.
        ("table", "order items"),
    ]
    assert menu.items[0].question == STOP
    assert [i.question for i in menu.items[1:3]] == list(OPEN_QUESTIONS)
    assert menu.items[8].question == 'What exactly do you mean by "most popular"?'
    assert menu.mask().tolist() == [True] * 10 + [False] * 22


def test_leading_prepositions_and_hyphenated_words():
    menu = build_menu(_view("What percentage of flights were on time for long-haul routes?"))
    phrases = [i.phrase for i in menu.items if i.kind == "request"]
    assert "on time" in phrases and "long-haul" in phrases and "long-haul routes" in phrases
    assert "on" not in phrases and "time for" not in phrases and "percentage of" not in phrases


def test_schema_names_parses_tables_columns_and_skips_constraints():
    tables, columns = schema_names(SCHEMA)
    assert tables == ["products", "order_items"]
    assert columns == ["product_id", "name", "category", "unit_price", "order_id", "quantity"]
    assert schema_names(None) == ([], [])


def test_menu_is_cut_to_the_slot_count():
    request = " ".join(f"word{i}" for i in range(30))
    menu = build_menu(_view(request), n_slots=8)
    assert len(menu.items) == 8 and menu.items[0].question == STOP
    with pytest.raises(ValueError, match="n_slots"):
        build_menu(_view(request), n_slots=2)


def test_build_menu_takes_a_public_view_not_a_record():
    parameters = list(inspect.signature(build_menu).parameters.values())
    assert parameters[0].name == "view"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[1:])
    env = AmbiTabEnv("bird")
    with pytest.raises(TypeError, match="PublicView"):
        build_menu(env.records[0])  # type: ignore[arg-type]


def test_the_wrapper_hands_the_builder_only_public_views(monkeypatch):
    received = []
    real = menu_module.build_menu

    def spy(view, **kwargs):
        received.append(view)
        return real(view, **kwargs)

    monkeypatch.setattr(menu_module, "build_menu", spy)
    env = QuestionMenu(gym.make("AmbiTab-Bird-v0"))
    for seed in range(5):
        env.reset(seed=seed)
        env.step(3)
    assert len(received) == 5
    assert all(type(view) is PublicView for view in received)
    assert not any(isinstance(view, TaskRecord) for view in received)


def _bundled():
    corpora = []
    for name, path in available_corpora().items():
        if (path / "records.jsonl").is_file():
            corpora.append(name)
    return corpora


@pytest.mark.parametrize("corpus_name", _bundled())
def test_no_candidate_uses_words_outside_the_visible_text(corpus_name):
    corpus = load_corpus(corpus_name)
    assert corpus.records, f"bundled corpus {corpus_name} has no records"
    fixed = {STOP, *OPEN_QUESTIONS}
    for record in corpus.records:
        spec = corpus.public_spec(record)
        visible = _words(spec.request) | _words(spec.schema_text or "")
        visible |= _words(" ".join(spec.column_meanings)) | _words(
            " ".join(spec.column_meanings.values())
        )
        visible |= _words(" ".join(spec.external_knowledge))
        menu = build_menu(PublicView(spec))
        for item in menu.items:
            if item.kind in ("stop", "generic"):
                assert item.question in fixed
                continue
            assert _words(item.phrase) <= visible, (record.id, item)
            assert item.question == f'What exactly do you mean by "{item.phrase}"?'
            if item.kind == "request":
                assert item.phrase in spec.request, (record.id, item)
        hidden = {a.resolution for a in record.ambiguities} | {
            a.response for a in record.ambiguities if a.response
        }
        questions = " ".join(item.question for item in menu.items)
        for text in hidden:
            assert text not in questions or text in spec.request


def _altered(record: TaskRecord) -> TaskRecord:
    request_words = [w for w in _WORD.findall(record.spec.request) if len(w) > 3]
    ambiguities = []
    for index, ambiguity in enumerate(record.ambiguities):
        term = request_words[index % len(request_words)] if request_words else "zzz"
        ambiguities.append(
            ambiguity.model_copy(
                update={
                    "term": term,
                    "aliases": ("qqq alias",),
                    "resolution": f"an invented reading number {index}",
                    "response": None,
                }
            )
        )
    return record.model_copy(update={"ambiguities": tuple(ambiguities)})


@pytest.mark.parametrize("corpus_name", ["bird", "ew_bird"])
def test_menus_do_not_change_when_ambiguities_change(corpus_name):
    original = QuestionMenu(AmbiTabEnv(corpus_name))
    altered_env = AmbiTabEnv(corpus_name)
    altered_env.records = [_altered(r) for r in altered_env.records]
    altered = QuestionMenu(altered_env)
    for record in original.unwrapped.records:
        obs_a, _ = original.reset(options={"record_id": record.id})
        obs_b, _ = altered.reset(options={"record_id": record.id})
        assert original.menu == altered.menu
        np.testing.assert_array_equal(obs_a, obs_b)
        changed = altered_env.records[altered_env._index[record.id]]
        assert changed.ambiguities != record.ambiguities or not record.ambiguities


def test_features_follow_the_visible_dialogue():
    spec_view = _view("Which five products are the most popular?", questions_left=4)
    menu = build_menu(spec_view)
    layout = MenuLayout(menu.n_slots)
    popular = next(i for i, item in enumerate(menu.items) if item.phrase == "most popular")
    most = next(i for i, item in enumerate(menu.items) if item.phrase == "most")
    five = next(i for i, item in enumerate(menu.items) if item.phrase == "five")
    dialogue = (
        DialogueTurn(menu.items[popular].question, "By units sold."),
        DialogueTurn(menu.items[five].question, REFUSAL),
    )
    view = _view("Which five products are the most popular?", dialogue=dialogue, questions_left=2)
    glob, slots = layout.split(menu_features(view, menu))
    assert glob[2] == 1.0 and glob[9 + 2] == 1.0  # 2 questions left, 2 asked
    assert glob[18] == 1.0 and glob[19] == 0.5 and glob[20] == 0.5  # last refused, shares
    assert slots[popular, 16] == 1.0 and slots[popular, 18] == 1.0 and slots[popular, 19] == 0.0
    assert slots[five, 16] == 1.0 and slots[five, 19] == 1.0 and slots[five, 18] == 0.0
    assert slots[most, 15] == 1.0 and slots[most, 20] == 1.0  # unasked, overlaps an answer
    assert slots[len(menu.items) :].sum() == 0.0
    assert slots[: len(menu.items), 0].tolist() == [1.0] * len(menu.items)
    assert slots[0, 1] == 1.0 and slots[popular, 3] == 1.0  # kinds: stop, request


def test_observations_are_deterministic_and_inside_the_space():
    runs = []
    for _ in range(2):
        env = QuestionMenu(gym.make("AmbiTab-Bird-v0"))
        obs, _ = env.reset(seed=7)
        trace = [obs]
        for action in (4, 5, 0):
            obs, _, terminated, _, _ = env.step(action)
            trace.append(obs)
            assert env.observation_space.contains(obs)
            if terminated:
                break
        runs.append(trace)
    assert len(runs[0]) == len(runs[1])
    for a, b in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_productive_phrase_then_stop_earns_full_f1():
    env = QuestionMenu(gym.make("AmbiTab-Bird-v0"))
    env.reset(options={"record_id": "bird-0014"})  # "How many orders were placed recently?"
    slot = next(i for i, item in enumerate(env.candidates()) if item.phrase == "recently")
    _, reward, terminated, _, info = env.step(slot)
    assert (reward, terminated) == (0.0, False)
    assert info["question"] == 'What exactly do you mean by "recently"?'
    _, reward, terminated, _, info = env.step(0)
    assert (reward, terminated, info["stop_reason"]) == (1.0, True, "asker")

    env.reset(options={"record_id": "bird-0014"})
    slot = next(i for i, item in enumerate(env.candidates()) if item.phrase == "orders")
    env.step(slot)
    _, reward, terminated, _, _ = env.step(0)
    assert (reward, terminated) == (0.0, True)


def test_empty_slots_stop_the_episode():
    env = QuestionMenu(gym.make("AmbiTab-Bird-v0"), n_slots=40)
    env.reset(options={"record_id": "bird-0014"})
    assert not env.action_masks()[-1]
    _, _, terminated, _, info = env.step(39)
    assert terminated and info["stop_reason"] == "asker" and info["question"] == STOP


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_passes():
    check_env(QuestionMenu(gym.make("AmbiTab-Bird-v0").unwrapped))


def test_wrapper_needs_an_ambitab_env_that_does_not_wait_for_sql():
    with pytest.raises(TypeError, match="AmbiTab env"):
        QuestionMenu(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="mode='solver'"):
        QuestionMenu(AmbiTabEnv("bird", mode="agent"))
    assert ambitab_gym.wrappers.QuestionMenu is QuestionMenu
