"""One reader of model replies (issue 17, item 2): the env, ChatMessages and the LLM roles agree.

Replies as models write them - Qwen/DeepSeek-R1 ``<think>`` blocks (closed, opened by the chat
template, cut off), ``<thinking>``/``<reasoning>``, Llama-style Markdown fences with and without
language tags, GPT-style prose that ends with ``<STOP>``, JSON in fences, trailing whitespace,
CRLF - read by :func:`ambitab_gym.actions.read_reply` directly, through ``gym.make(...).step``,
through :class:`~ambitab_gym.wrappers.ChatMessages` and through the LLM asker, solver and oracle
talking to the real scripted server on 127.0.0.1. Fenced SQL verifies exactly like the same
SQL unfenced (which the verifier alone fails with ``syntax``).
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ambitab_gym  # noqa: F401  (registers the ids)
from ambitab_gym import AmbiTabEnv, load_corpus
from ambitab_gym.actions import STOP, parse_action, read_reply, read_sql_action
from ambitab_gym.llm import LLMClient
from ambitab_gym.oracles import OracleContext
from ambitab_gym.oracles.llm import make_llm_oracle
from ambitab_gym.oracles.llm_prompts import parse_matcher_output, parse_responder_output
from ambitab_gym.policies.llm import DONE_ACTION, FALLBACK_STOP, LLMAsker, make_llm_solver
from ambitab_gym.policies.llm_prompts import parse_asker_output
from ambitab_gym.testing.llm_server import ROLE_MARKERS, ScriptedServer, ScriptRule
from ambitab_gym.textutil import extract_sql, strip_thinking
from ambitab_gym.vocabulary import REPLY_READS
from ambitab_gym.wrappers import ChatMessages

ENV_ID = "AmbiTab-Bird-v0"
ASK_RECORD = "bird-0001"  # two ambiguities: budget of 4 questions
SQL_RECORD = "bird-0004"


def _case(id_, reply, read, text=None, asker=True):
    """One reply: how it reads (``question``/``stop``/``unreadable``), the question's text,
    and whether the LLM asker (asked for JSON) takes it as the env does."""
    return pytest.param(reply, read, text, asker, id=id_)


ASK_CASES = [
    # reasoning blocks (Qwen3 / DeepSeek-R1 / Claude-style / generic)
    _case(
        "qwen-think",
        "<think>\nThe user wants top customers. Top by spending or by orders? I should ask."
        "\n</think>\n\nWhat do you mean by top customers: by spending or by number of orders?",
        "question",
        "What do you mean by top customers: by spending or by number of orders?",
    ),
    _case(
        "r1-template-opened-think",
        "Okay, the request mentions spending; which measure is meant?\n</think>\n\n"
        "How should spending be measured?",
        "question",
        "How should spending be measured?",
    ),
    _case(
        "r1-cut-off-while-thinking",
        "<think>\nLet me look at the orders table. It has",
        "unreadable",
        "",
    ),
    _case(
        "thinking-tag-then-stop", "<thinking>Both points are settled.</thinking>\n<STOP>", "stop"
    ),
    _case(
        "reasoning-tag",
        "<reasoning>The year is still open.</reasoning>\nWhich year should the list cover?",
        "question",
        "Which year should the list cover?",
    ),
    _case("think-upper-case", "<THINK>done here</THINK>STOP", "stop"),
    # STOP variants
    _case("sentinel", STOP, "stop"),
    _case("bare-STOP", "STOP", "stop"),
    _case("bracket-STOP", "[STOP]", "stop"),
    _case("stop-full-stop-whole-reply", "stop.", "stop"),
    _case("bold-STOP", "**STOP**", "stop"),
    _case("sentinel-crlf", "<STOP>\r\n", "stop"),
    _case("gpt-prose-then-sentinel", "Thanks, that settles everything I needed. <STOP>", "stop"),
    _case("gpt-prose-newline-STOP", "I have no further questions.\n\nSTOP", "stop"),
    _case("prose-then-bracket-stop", "I'm done asking. [STOP]", "stop"),
    _case("sentinel-then-prose", "<STOP>\nI have everything I need to write the query.", "stop"),
    # questions that merely contain the word stop
    _case(
        "stop-inside-question",
        "Should the list stop at the end of 2023?",
        "question",
        "Should the list stop at the end of 2023?",
    ),
    _case("bus-stop", "Which bus stop do you mean?", "question", "Which bus stop do you mean?"),
    _case(
        "STOP-inside-question",
        "Do you want rows before the STOP date?",
        "question",
        "Do you want rows before the STOP date?",
    ),
    _case(
        "STOP-hyphen-word",
        "STOP-loss orders or market orders?",
        "question",
        "STOP-loss orders or market orders?",
    ),
    _case(
        "ends-with-hyphenated-STOP",
        "Should I include flights that are non-STOP",
        "question",
        "Should I include flights that are non-STOP",
        False,
    ),
    _case("prose-em-dash-STOP", "That settles it — STOP", "stop"),
    # the JSON form: bare, fenced with and without a tag, ~~~, inside prose, Python-style
    _case(
        "json", '{"type": "clarification", "output": "Which region?"}', "question", "Which region?"
    ),
    _case(
        "llama-json-fence",
        '```json\n{"type": "clarification", "output": "Which year do you mean?"}\n```',
        "question",
        "Which year do you mean?",
    ),
    _case("untagged-fence-done", '```\n{"type": "done", "output": null}\n```', "stop"),
    _case("tilde-fence-done", '~~~json\n{"type": "done", "output": ""}\n~~~', "stop"),
    _case(
        "json-fence-inside-prose",
        'Sure! Here is my next action:\n\n```json\n{"type": "clarification", '
        '"output": "Top how many customers?"}\n```\n\nLet me know.',
        "question",
        "Top how many customers?",
    ),
    _case("python-style-dict", "{'type': 'done', 'output': None}", "stop"),
    _case("think-then-json", '<think>ok</think>{"type": "done", "output": null}', "stop"),
    # whitespace, CRLF, quotes, a fenced plain question
    _case(
        "trailing-whitespace",
        "Which year do you mean?   \n\n",
        "question",
        "Which year do you mean?",
    ),
    _case("crlf", "Which year\r\ndo you mean?\r\n", "question", "Which year\ndo you mean?", False),
    _case("quoted", '"Which table holds sales?"', "question", "Which table holds sales?"),
    _case(
        "think-then-fenced-question",
        "<think>ok</think>\n```\nWhich year?\n```",
        "question",
        "Which year?",
    ),
    # prose that is not a question: the env asks it, the LLM asker (asked for JSON) does not
    _case(
        "prose-statement",
        "Let me look at the schema first.",
        "question",
        "Let me look at the schema first.",
        False,
    ),
    # unreadable: asked as text anyway by the env
    _case(
        "json-other-type",
        '{"type": "final_sql", "output": "SELECT 1"}',
        "unreadable",
        '{"type": "final_sql", "output": "SELECT 1"}',
    ),
    _case("empty", "", "unreadable", ""),
    _case("empty-clarification", '{"type": "clarification", "output": ""}', "unreadable", ""),
]


# -- the reader itself ----------------------------------------------------------------------------


@pytest.mark.parametrize("reply, read, text, asker", ASK_CASES)
def test_reader_table(reply, read, text, asker):
    reading = read_reply(reply)
    assert reading.read == read, (reading, reply)
    assert reading.kind == ("stop" if read == "stop" else "question")
    if text is not None:
        assert reading.text == text
    assert parse_action(reply) == reading  # the old name is the same reader
    if reading.kind == "stop":
        assert reading.text == ""


@pytest.mark.parametrize("reply, read, text, asker", ASK_CASES)
def test_llm_asker_parser_agrees(reply, read, text, asker):
    output = parse_asker_output(reply)
    if read == "stop":
        assert output.kind == "stop"
    elif read == "question" and asker:
        assert (output.kind, output.text) == ("question", text)
    else:
        assert output.kind == "invalid"


# -- through gym.make(...).step and ChatMessages ----------------------------------------------------


@pytest.fixture(scope="module")
def ask_env():
    env = gym.make(ENV_ID)
    yield env
    env.close()


@pytest.fixture(scope="module")
def chat_env():
    env = ChatMessages(gym.make(ENV_ID))
    yield env
    env.close()


@pytest.mark.parametrize("reply, read, text, asker", ASK_CASES)
def test_env_step_reads_the_reply(ask_env, reply, read, text, asker):
    ask_env.reset(seed=0, options={"record_id": ASK_RECORD})
    _, _, terminated, _, info = ask_env.step(reply)
    assert info["reply_read"] == read and info["reply_read"] in REPLY_READS
    trajectory = ask_env.unwrapped.trajectory
    if read == "stop":
        assert terminated and trajectory.stop_reason == "asker" and not trajectory.turns
    else:
        assert not terminated and len(trajectory.turns) == 1
        assert trajectory.turns[0].question == text
        assert trajectory.turns[0].action == reply  # the raw reply is kept


@pytest.mark.parametrize("reply, read, text, asker", ASK_CASES)
def test_chat_messages_reads_the_reply(chat_env, reply, read, text, asker):
    messages, _ = chat_env.reset(seed=0, options={"record_id": ASK_RECORD})
    assert len(messages) == 1
    messages, _, terminated, _, info = chat_env.step(reply)
    assert info["reply_read"] == read
    if read == "stop":
        assert terminated and len(messages) == 1  # a stop adds no message
    else:
        assert [m["role"] for m in messages] == ["system", "assistant", "user"]
        assert messages[1]["content"] == text  # the transcript shows the question as read


def test_the_word_stop_in_a_question_earns_its_credit(ask_env):
    ask_env.reset(seed=0, options={"record_id": ASK_RECORD})
    _, _, terminated, _, info = ask_env.step(
        "Which customers are top customers - should it stop at five?"
    )
    assert not terminated and info["reply_read"] == "question"
    assert ask_env.unwrapped.trajectory.credits == [frozenset({"top_customers"})]


# -- through the LLM asker and the real scripted server -------------------------------------------


@pytest.mark.parametrize("reply, read, text, asker", ASK_CASES)
def test_llm_asker_reads_replies_like_the_env(reply, read, text, asker):
    rule = ScriptRule(reply, when=ROLE_MARKERS["asker"])
    with ScriptedServer([rule]) as server, LLMClient(server.url, "scripted") as client:
        llm_asker = LLMAsker(client, "direct", structured=False)
        env = AmbiTabEnv(ENV_ID, record_ids=[ASK_RECORD])
        env.reset(seed=0, options={"record_id": ASK_RECORD})
        action = llm_asker.act(env.public_view)
        _, _, terminated, _, info = env.step(action)
        assert len(server.requests()) == 1
    if read == "stop":
        assert action == DONE_ACTION and info["reply_read"] == "stop"
        assert env.trajectory.stop_reason == "asker"
    elif read == "question" and asker:
        assert info["reply_read"] == "question" and not terminated
        assert env.trajectory.turns[0].question == text  # the question the env reads directly
    else:  # the asker's on_unreadable policy (default: the fallback stop, paper C.3)
        assert action == FALLBACK_STOP and llm_asker.stats["unreadable"] == 1
        assert env.trajectory.stop_reason == "fallback"


# -- SQL: fenced verifies exactly like unfenced ---------------------------------------------------

SQL_WRAPS = {
    "bare": lambda s: s,
    "bare-trailing-whitespace": lambda s: s + "  \n\n",
    "sql-fence": lambda s: f"```sql\n{s}\n```",
    "SQL-fence": lambda s: f"```SQL\n{s}\n```",
    "sqlite-fence": lambda s: f"```sqlite\n{s}\n```",
    "postgresql-fence": lambda s: f"```postgresql\n{s}\n```",
    "untagged-fence": lambda s: f"```\n{s}\n```",
    "tilde-fence": lambda s: f"~~~sql\n{s}\n~~~",
    "crlf-fence": lambda s: "```sql\r\n" + s.replace("\n", "\r\n") + "\r\n```\r\n",
    "prose-around-fence": lambda s: f"Here is the query:\n\n```sql\n{s}\n```\n\nIt counts them.",
    "think-then-fence": lambda s: f"<think>\nMaybe SELECT 0 FROM x?\n</think>\n```sql\n{s}\n```",
    "json": lambda s: json.dumps({"reasoning": "r", "type": "final_sql", "output": s}),
    "json-in-fence": lambda s: "```json\n" + json.dumps({"type": "sql", "output": s}) + "\n```",
    "json-output-fenced": lambda s: json.dumps({"type": "sql", "output": f"```sql\n{s}\n```"}),
}


def _reference() -> str:
    return load_corpus(ENV_ID).record(SQL_RECORD).verification.reference_sql.strip()


def _multiline(sql: str) -> str:
    return sql.replace(" FROM ", "\nFROM ").replace(" WHERE ", "\nWHERE ")


@pytest.mark.parametrize("layout", [str, _multiline], ids=["one-line", "multi-line"])
@pytest.mark.parametrize("wrap", SQL_WRAPS.values(), ids=SQL_WRAPS.keys())
def test_agent_mode_fenced_sql_verifies_like_unfenced(wrap, layout):
    sql = layout(_reference())
    env = gym.make(ENV_ID, mode="agent")
    try:
        verdicts = {}
        for reply in (sql, wrap(sql)):
            env.reset(seed=0, options={"record_id": SQL_RECORD})
            env.step(STOP)
            *_, terminated, _, info = env.step(reply)
            verdicts[reply] = (info["success"], info["verdict_reason"], info["reply_read"])
            assert terminated and env.unwrapped.trajectory.sql == sql
        assert verdicts[wrap(sql)] == verdicts[sql] == (True, "match", "sql")
        # what the env used to do: hand the reply to the verifier as it is
        record = env.unwrapped.record
        raw = env.unwrapped.verifier.verify(record, wrap(sql))
        if wrap(sql).strip() != sql:
            assert not raw.success
    finally:
        env.close()


def test_solver_mode_llm_solver_reads_like_the_env():
    sql = _reference()
    replies = tuple(wrap(sql) for wrap in SQL_WRAPS.values())
    rule = ScriptRule(replies, when=ROLE_MARKERS["solver"])
    with ScriptedServer([rule]) as server, LLMClient(server.url, "scripted") as client:
        solver = make_llm_solver(client, corpus=ENV_ID, structured=False)
        env = AmbiTabEnv(ENV_ID, record_ids=[SQL_RECORD], solver=solver)
        for reply in replies:
            env.reset(seed=0, options={"record_id": SQL_RECORD})
            *_, terminated, _, info = env.step(DONE_ACTION)
            assert terminated and info["success"] is True and info["verdict_reason"] == "match"
            assert env.trajectory.sql == sql == read_sql_action(reply).text
        assert solver.stats == {"calls": len(replies)}
        assert server.stats()["requests"] == len(replies)


def test_solver_reply_without_sql_is_unreadable_everywhere():
    reply = "<think>No table has that.</think>I cannot write this query."
    reading = read_sql_action(reply)
    assert (reading.read, reading.text) == ("unreadable", "I cannot write this query.")
    env = gym.make(ENV_ID, mode="agent")
    env.reset(seed=0, options={"record_id": SQL_RECORD})
    env.step(STOP)
    *_, info = env.step(reply)
    assert info["reply_read"] == "unreadable" and info["success"] is False
    assert env.unwrapped.trajectory.sql == "I cannot write this query."
    env.close()
    rule = ScriptRule(reply, when=ROLE_MARKERS["solver"])
    with ScriptedServer([rule]) as server, LLMClient(server.url, "scripted") as client:
        solver = make_llm_solver(client, corpus=ENV_ID, structured=False)
        solver_env = AmbiTabEnv(ENV_ID, record_ids=[SQL_RECORD], solver=solver)
        solver_env.reset(seed=0, options={"record_id": SQL_RECORD})
        *_, info = solver_env.step(DONE_ACTION)
        assert solver_env.trajectory.sql == "I cannot write this query."
        assert solver.stats == {"calls": 1, "unreadable": 1} and info["success"] is False


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO customers SELECT * FROM customers",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
        "SELECT i FROM n",
        "(SELECT 1) UNION (SELECT 2)",
        'SELECT \'{"output": "x"}\' AS j',
        "-- count them\nSELECT COUNT(*) FROM customers",
        "select count(*) from customers",
    ],
)
def test_a_statement_stays_whole(sql):
    assert read_sql_action(sql).text == sql and read_sql_action(sql).read == "sql"
    assert read_sql_action(f"```sql\n{sql}\n```").text == sql
    assert extract_sql(sql) == sql


def test_sql_inside_prose_is_found():
    reading = read_sql_action("Sure, here you go: SELECT name FROM staff WHERE id = 1")
    assert (reading.read, reading.text) == ("sql", "SELECT name FROM staff WHERE id = 1")
    assert reading.note == "SQL taken from within the reply"


# -- the LLM oracle reads its replies with the same helpers ----------------------------------------


def test_oracle_replies_with_reasoning_blocks_and_tilde_fences():
    braces = '<reasoning>Maybe {"action": "unanswerable()"}? No.</reasoning>'
    matcher = (
        braces + '\n~~~json\n{"reasoning": "asks", "action": "labeled(\\"top customers\\")"}\n~~~'
    )
    responder = '<reasoning>{"answer": "wrong"}</reasoning>\n{"answer": "The five who spent most."}'
    assert parse_matcher_output(matcher).argument == "top customers"
    assert parse_responder_output(responder) == "The five who spent most."
    record = load_corpus(ENV_ID).record(ASK_RECORD)
    rules = [
        ScriptRule(matcher, when=ROLE_MARKERS["matcher"]),
        ScriptRule(responder, when=ROLE_MARKERS["responder"]),
    ]
    with ScriptedServer(rules) as server, LLMClient(server.url, "scripted") as client:
        oracle = make_llm_oracle(None, client, structured=False)
        credits, answer = oracle.answer("Top how many?", OracleContext(record))
    assert credits == frozenset({"top_customers"}) and answer == "The five who spent most."
    assert oracle.matcher.parse_failures == 0 and oracle.responder.parse_failures == 0


# -- properties ------------------------------------------------------------------------------------

TAGGY = st.lists(
    st.sampled_from(
        [
            "<think>",
            "</think>",
            "<thinking>",
            "</THINKING>",
            "<reasoning>",
            "</reasoning>",
            "<",
            ">",
            "/",
            "think",
            "```",
            "~~~",
            "sql",
            "{",
            "}",
            '"',
            "STOP",
            "<STOP>",
            "stop",
            "\r\n",
            "\n",
            " ",
            ".",
            "?",
            "a",
            "SELECT 1",
            "\x00",
            chr(0xD800),
        ]
    ),
    max_size=40,
).map("".join)


class _Unprintable:
    def __str__(self) -> str:
        raise ValueError("no text")


anything = (
    st.text()
    | TAGGY
    | st.binary()
    | st.none()
    | st.integers()
    | st.floats()
    | st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.integers(), max_size=3)
    | st.lists(st.text(max_size=5), max_size=3)
    | st.builds(_Unprintable)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anything, st.sampled_from(["ask", "sql"]))
def test_the_reader_never_raises(reply, phase):
    reading = read_reply(reply, phase=phase)
    assert reading.note != "the action could not be read"  # read, not caught by the last resort
    assert reading.read in REPLY_READS
    assert reading.kind in (("sql",) if phase == "sql" else ("question", "stop"))
    assert isinstance(reading.text, str) and isinstance(reading.note, str)
    reading.text.encode("utf-8")  # storable
    reading.raw.encode("utf-8")
    assert "\x00" not in reading.text and len(reading.note) < 300
    if reading.kind == "stop":
        assert reading.text == ""


@settings(max_examples=400, deadline=None)
@given(TAGGY | st.text())
def test_stripping_reasoning_is_idempotent(text):
    once = strip_thinking(text)
    assert strip_thinking(once) == once
    assert "</think>" not in once.lower() and "<think>" not in once.lower()


identifiers = st.sampled_from(["id", "name", "total", "country", "c.region"])
queries = st.builds(
    lambda cols, table, n, op: f"SELECT {', '.join(cols)}\nFROM {table}\nWHERE x {op} {n}",
    st.lists(identifiers, min_size=1, max_size=3),
    st.sampled_from(["customers", "orders o", '"staff"']),
    st.integers(-(10**6), 10**6),
    st.sampled_from(["=", "<", ">=", "<>"]),
)


@settings(max_examples=200, deadline=None)
@given(queries, st.sampled_from(list(SQL_WRAPS.values())))
def test_every_wrapping_reads_as_the_bare_query(sql, wrap):
    assert read_sql_action(wrap(sql)).text == read_sql_action(sql).text == sql


def test_hostile_tag_soup_is_read_in_one_pass():
    # an unclosed tag after every character would make a backtracking reader quadratic
    soup = "<think>" * 60_000 + "</think>" + "<thinking>a" * 20_000
    assert strip_thinking(soup) == ""
    assert read_reply(soup).read == "unreadable"
    assert read_reply("```" * 100_001, phase="sql").kind == "sql"


class _SaysStop:
    def __str__(self) -> str:
        return "STOP"


def test_read_is_what_the_env_did_with_the_reply():
    # a stop sent as an object is still a stop (the form says it was not text)
    reading = read_reply(_SaysStop())
    assert (reading.kind, reading.read, reading.form) == ("stop", "stop", "unreadable")
    # repaired SQL is still SQL; the note says what was repaired
    reading = read_sql_action("SELECT 'a\x00b'")
    assert (reading.read, reading.text) == ("sql", "SELECT 'a\ufffdb'")
    assert reading.note == "NUL characters replaced by U+FFFD"
    # not read at all: the env skips asking on an m = 0 record
    env = gym.make(ENV_ID, zero_ambiguity="skip", mode="ask_only")
    record = next(r for r in env.unwrapped.records if r.m == 0)
    env.reset(seed=0, options={"record_id": record.id})
    *_, terminated, _, info = env.step("Which year?")
    assert terminated and info["action_parse"] == "ignored" and "reply_read" not in info
    env.close()
