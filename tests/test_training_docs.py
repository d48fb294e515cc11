"""Every Python and shell block of docs/training.md runs as written (issue 31, item 2).

The blocks are read from the page. Each one is run here, in this process, in an empty working
folder that holds a link to ``examples/`` (so the page's commands, written for the repository
root, find their files), or it starts with ``# needs: ...`` naming what a test machine lacks
(the network, a GPU, a cluster, a running LLM server). Two marked blocks run anyway, with
stand-ins: the TRL block (one step on the CPU with the tiny model of ``tiny_lm.py`` in place of
the hub model, through TRL's own ``GRPOConfig`` checks) and the ``ambitab-gym evaluate`` lines
of section 6 (against an OpenAI-compatible server that serves the folder the TRL block saved).

What a run may change is the compute budget only - fewer steps and records (:data:`OVERRIDES`,
:func:`run_evaluate_block`), CPU settings that are no batch size (:data:`TRL_CPU`) - and each
text change must match its block as often as expected, so a block that changes under it fails
here instead of silently running something else. A new block that is neither runnable here nor
marked fails :func:`test_block`.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import runpy
import shlex
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "training.md"
ENV_ID = "AmbiTab-Bird-v0"

#: What a ``# needs:`` line may name (one at least).
NEEDS = ("network", "GPU", "cluster", "server")
SHELLS = ("bash", "sh", "shell", "console")

#: Changes a run makes to a block, keyed by a phrase of the block: (old, new), each old text
#: found exactly once. Only the compute budget changes (steps, iterations, records).
OVERRIDES: dict[str, list[tuple[str, str]]] = {
    "train_sb3_asker.py train": [("--steps 20000", "--steps 1024")],
    "model.learn(20_000)": [("model.learn(20_000)", "model.learn(1024)")],
    "grpo_question_f1.py": [("grpo_question_f1.py ", "grpo_question_f1.py --iterations 3 ")],
}

#: Settings the TRL block runs with on the CPU: none of them is a batch size, so TRL's checks of
#: the documented batch shape (``generation_batch_size`` against ``num_generations``) apply.
TRL_CPU = {
    "use_cpu": True,
    "bf16": False,
    "gradient_checkpointing": False,
    "max_steps": 1,
    "max_completion_length": 32,
    "save_strategy": "no",
    "logging_steps": 1,
    "report_to": [],
}
BATCH_SHAPE = {
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "generation_batch_size",
    "steps_per_generation",
}

# the trainers need Python 3.11 (tests/test_trainers_real.py); the other blocks run anywhere
_TRAINERS = sys.version_info >= (3, 11)


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int

    @property
    def needs(self) -> str | None:
        """What the block's ``# needs: ...`` first line names, or None."""
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        match = re.match(r"#\s*needs:\s*(.+)", first)
        return match.group(1) if match else None

    @property
    def id(self) -> str:
        return f"line{self.line}-{self.lang}"


def blocks() -> list[Block]:
    """The fenced blocks of the page in order (any language; closing fences are never openings)."""
    text = DOCS.read_text("utf-8")
    found = []
    for match in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(match.group(1), match.group(2), line))
    return found


def code_blocks() -> list[Block]:
    """The Python and shell blocks."""
    return [b for b in blocks() if b.lang == "python" or b.lang in SHELLS]


def overridden(block: Block, extra: list[tuple[str, str]] = ()) -> str:
    """The block's code with its :data:`OVERRIDES` (and ``extra``) applied, each exactly once."""
    code = block.code
    changes = [c for key, cs in OVERRIDES.items() if key in block.code for c in cs]
    for old, new in [*changes, *extra]:
        assert code.count(old) == 1, f"{block.id}: expected {old!r} once in\n{block.code}"
        code = code.replace(old, new)
    return code


# -- running shell lines in this process ---------------------------------------------------


def commands(code: str) -> list[list[str]]:
    """The block's commands as argument lists (comments dropped, continued and quoted lines
    joined)."""
    found, pending = [], ""
    for line in code.splitlines():
        pending += line + "\n"
        if line.rstrip().endswith("\\"):
            continue
        try:  # a backslash-newline continues the line, as in the shell
            words = shlex.split(pending.replace("\\\n", " "), comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        pending = ""
        if words:
            found.append(words)
    assert not pending.strip(), f"unfinished command: {pending!r}"
    return found


def runnable_command(words: list[str]) -> bool:
    """Whether :func:`run_command` can run it: ``python -c``, ``python SCRIPT.py``, ``ambitab-gym``,
    after ``NAME=value`` assignments."""
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words = words[1:]
    if not words:
        return False
    if words[0] == "python":
        return len(words) > 1 and (words[1] == "-c" or words[1].endswith(".py"))
    return words[0] == "ambitab-gym" and "&" not in words


def run_command(words: list[str], monkeypatch, capsys) -> str:
    """Run one command in this process, as the shell would from the working folder; returns
    what it printed."""
    with monkeypatch.context() as patch:
        while re.match(r"^[A-Z_]+=", words[0]):
            name, _, value = words[0].partition("=")
            patch.setenv(name, value)
            if name == "PYTHONPATH":
                for folder in reversed(value.split(os.pathsep)):
                    patch.syspath_prepend(str(Path(folder).resolve()))
            words = words[1:]
        capsys.readouterr()
        if words[0] == "python" and words[1] == "-c":
            exec(compile(words[2], "<python -c>", "exec"), {"__name__": "__main__"})
        elif words[0] == "python":
            patch.setattr(sys, "argv", words[1:])
            try:
                runpy.run_path(words[1], run_name="__main__")
            except SystemExit as stop:
                assert stop.code in (None, 0), f"{shlex.join(words)} exited with {stop.code}"
        else:
            from ambitab_gym.cli import main

            status = main(words[1:])
            out = capsys.readouterr()
            assert status == 0, f"{shlex.join(words)} exited with {status}:\n{out.err}"
            return out.out
        return capsys.readouterr().out


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder with ``examples`` linked, as the repository root has it."""
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    sys.modules.pop("ambitab_verifiers", None)  # the verifiers plugin id: not importable here
    modules = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules:  # modules the commands imported from examples/
        origin = str(getattr(sys.modules[name], "__file__", "") or "")
        if origin.startswith((str(tmp_path), str(ROOT / "examples"))):
            del sys.modules[name]
    sys.modules.pop("ambitab_verifiers", None)


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: the blocks' models are tiny, and the machine's cores are shared."""
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- the TRL block: one CPU step with a tiny local model ------------------------------------


def _trl_block() -> Block:
    (block,) = [b for b in code_blocks() if "GRPOTrainer(" in b.code]
    return block


@dataclass
class TrainedCheckpoint:
    folder: Path
    trainer: object
    config: object


@pytest.fixture(scope="module")
def trl_checkpoint(tmp_path_factory):
    """Run the TRL block as written in a fresh folder; the model it saved and its trainer."""
    if not _TRAINERS:
        pytest.skip("TRL >= 1.16 needs Python 3.11")
    import trl
    from tiny_lm import tiny_model, tiny_tokenizer

    folder = tmp_path_factory.mktemp("trl-block")
    tiny = folder / "tiny-qwen3"  # the hub model's stand-in
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    model.config.architectures = ["Qwen3ForCausalLM"]
    model.save_pretrained(tiny)
    tokenizer.save_pretrained(tiny)

    block = _trl_block()
    code = overridden(block, [('"Qwen/Qwen3-0.6B"', repr(str(tiny)))])
    assert not BATCH_SHAPE & set(TRL_CPU)
    real = trl.GRPOConfig
    made = []

    def on_cpu(*args, **kwargs):  # TRL's own GRPOConfig, its checks included
        made.append(real(*args, **{**kwargs, **TRL_CPU}))
        return made[-1]

    namespace = {"__name__": "__main__"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        patch.setattr(trl, "GRPOConfig", on_cpu)
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            exec(compile(code, f"{DOCS}:{block.line}", "exec"), namespace)
        finally:
            torch.set_num_threads(threads)
    (config,) = made
    return TrainedCheckpoint(folder / "asker-grpo", namespace["trainer"], config)


# -- a stand-in for `vllm serve FOLDER` -----------------------------------------------------


class CheckpointServer:
    """OpenAI chat completions from a saved model folder with ``transformers``, on 127.0.0.1.

    Like vLLM, it renders each request with the folder's chat template (the request's ``tools``
    included, as vLLM >= 0.10 does under ``tool_choice: "none"``, and its
    ``chat_template_kwargs``) and returns the generated text as the message content, tool-call
    markup included. A tiny random model writes neither tool calls nor questions, so generation
    is nudged with ``sequence_bias`` (as in ``tests/test_trainers_real.py``): on an episode's
    first turn towards asking about "overdue", later towards stopping, in the form the request's
    asker reads (tool calls when the request has tools, plain text otherwise). Every request is
    kept with the prompt it rendered to.
    """

    QUESTION = 'What do you mean by "overdue"?'

    def __init__(self, folder: Path, names: list[str]) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder).eval()
        self.names = names
        self.requests: list[tuple[dict, str]] = []
        self.lock = threading.Lock()
        eos = self.tokenizer.eos_token_id
        calls = [
            {"name": "ask", "arguments": {"question": self.QUESTION}},
            {"name": "stop", "arguments": {}},
        ]
        ask, stop = ("<tool_call>\n" + json.dumps(c) + "\n</tool_call>" for c in calls)
        # (tools?, first turn?) -> bias
        self.bias = {
            (True, True): self._steer(ask, eos),
            (True, False): self._steer(stop, eos),
            (False, True): self._steer(self.QUESTION, eos),
            (False, False): self._steer("<STOP>", eos),
        }
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/v1/models":
                    data = [{"id": n, "object": "model", "owned_by": "test"} for n in server.names]
                    self._send(200, {"object": "list", "data": data})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length))
                if self.path != "/v1/chat/completions" or request.get("model") not in server.names:
                    self._send(404, {"error": f"no model {request.get('model')!r}"})
                    return
                text = server.complete(request)
                self._send(
                    200,
                    {
                        "id": "cmpl",
                        "object": "chat.completion",
                        "model": request["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def _steer(self, text: str, eos: int) -> dict[tuple[int, ...], float]:
        """Each prefix of ``text`` and the end of the turn favoured more the longer it is."""
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [eos]
        return {tuple(ids[:k]): 20.0 * k for k in range(1, len(ids) + 1)}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def render(self, request: dict) -> str:
        return self.tokenizer.apply_chat_template(
            request["messages"],
            tools=request.get("tools"),
            add_generation_prompt=True,
            tokenize=False,
            **(request.get("chat_template_kwargs") or {}),
        )

    def complete(self, request: dict) -> str:
        import torch

        prompt = self.render(request)
        ids = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        with self.lock:  # one generation at a time (the model is shared)
            self.requests.append((request, prompt))
            torch.manual_seed(int(request.get("seed") or 0))
            with torch.no_grad():
                out = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=48,
                    do_sample=True,
                    temperature=float(request.get("temperature") or 1.0),
                    sequence_bias=self.bias[
                        bool(request.get("tools")), len(request["messages"]) == 1
                    ],
                    pad_token_id=self.tokenizer.pad_token_id,
                )
        # Qwen3's <tool_call> is not a special token, so vLLM keeps it in the text; the tiny
        # tokenizer's is, so keep special tokens and drop only the end-of-turn ones
        text = self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
        for token in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            text = text.replace(token, "")
        return text

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- the page's structure ------------------------------------------------------------------


def test_the_page_has_the_blocks_this_file_runs():
    found = code_blocks()
    assert len(found) >= 15
    assert sum("GRPOTrainer(" in b.code for b in found) == 1
    for key in OVERRIDES:
        assert any(key in b.code for b in found), f"no block of docs/training.md has {key!r}"
    evaluate = [b for b in found if "ambitab-gym evaluate" in b.code]
    assert len(evaluate) == 1 and "trained_asker:ToolAsker" in evaluate[0].code
    assert "trained_asker:ChatAsker" in evaluate[0].code


def test_links_to_headings_of_the_page_resolve():
    text = DOCS.read_text("utf-8")
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and not [a for a in links if a not in anchors]


# -- every block -----------------------------------------------------------------------------


@pytest.mark.parametrize("block", code_blocks(), ids=lambda b: b.id)
def test_block(block, workdir, monkeypatch, capsys, request):
    needs = block.needs
    if needs is not None:
        assert any(word in needs for word in NEEDS), (
            f"{block.id}: '# needs: {needs}' names none of {NEEDS}"
        )
    if "GRPOTrainer(" in block.code:
        checkpoint = request.getfixturevalue("trl_checkpoint")
        check_trl_run(checkpoint)
        return
    if block.lang == "python":
        if needs is not None:
            pytest.skip(f"needs {needs}")
        _requires(block)
        if block.code.lstrip().startswith(">>>"):
            run_doctest(block)
        else:
            code = overridden(block)
            exec(compile(code, f"{DOCS}:{block.line}", "exec"), {"__name__": "__main__"})
        return
    if "ambitab-gym evaluate" in block.code:
        run_evaluate_block(block, request.getfixturevalue("trl_checkpoint"), monkeypatch, capsys)
        return
    lines = commands(overridden(block))
    unrunnable = [shlex.join(w) for w in lines if not runnable_command(w)]
    if unrunnable:
        assert needs is not None, (
            f"{block.id} runs {unrunnable}, which this test cannot run: make the block's first "
            f"line '# needs: ...' naming one of {NEEDS}, or make it runnable here"
        )
        pytest.skip(f"needs {needs}: {unrunnable[0]}")
    assert needs is None, f"{block.id} is marked '# needs: {needs}' but runs here: drop the mark"
    _requires(block)
    for words in lines:
        run_command(words, monkeypatch, capsys)


def _requires(block: Block) -> None:
    """The ``test`` extra installs TRL and verifiers from Python 3.11 on (and every other
    package a block imports everywhere): before 3.11 their blocks are skipped."""
    if not _TRAINERS and re.search(r"from trl |integrations\.verifiers", block.code):
        pytest.skip("TRL >= 1.16 and verifiers >= 0.4 need Python 3.11")


def run_doctest(block: Block) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.code, {}, block.id, str(DOCS), block.line)
    runner = doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False
    )
    runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


def check_trl_run(checkpoint: TrainedCheckpoint) -> None:
    """The TRL block ran one GRPO step with the documented batch shape and saved the model."""
    config = checkpoint.config
    assert config.num_generations == 16 and config.per_device_train_batch_size == 16
    assert config.generation_batch_size % config.num_generations == 0
    assert checkpoint.trainer.state.global_step == 1
    logged = [h for h in checkpoint.trainer.state.log_history if "reward" in h]
    assert len(logged) == 1
    saved = {p.name for p in checkpoint.folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= saved


def test_trl_block_fails_trls_check_without_its_batch_size():
    """The check the block used to fail (issue 31): TRL's default batch of 8 against 16."""
    if not _TRAINERS:
        pytest.skip("TRL >= 1.16 needs Python 3.11")
    from trl import GRPOConfig

    with pytest.raises(ValueError, match=r"must be divisible by num_generations \(16\)"):
        GRPOConfig(output_dir="unused", num_generations=16, use_cpu=True, bf16=False)


# -- section 6: the evaluate lines against the served checkpoint ----------------------------


def run_evaluate_block(block: Block, checkpoint: TrainedCheckpoint, monkeypatch, capsys) -> None:
    from transformers.utils import get_json_schema

    from ambitab_gym.integrations.trl import trl_dataset, trl_environment_factory

    assert block.needs is not None and "server" in block.needs
    lines = commands(block.code)
    names = [w[w.index("--model") + 1] for w in lines]
    server = CheckpointServer(checkpoint.folder, names)
    try:
        code = block.code
        for old, new in (
            ("http://127.0.0.1:8000/v1", server.url),  # the stand-in for `vllm serve`
            ("--split dev", "--split dev --limit 2"),  # two records
        ):
            assert code.count(old) == len(lines), f"{old!r} once per line of\n{block.code}"
            code = code.replace(old, new)
        results = []
        for words in commands(code):
            assert runnable_command(words), shlex.join(words)
            out = run_command(words, monkeypatch, capsys)
            results.append((words, json.loads(out.strip().splitlines()[-1])))
    finally:
        server.close()

    # the ToolAsker: TRL's tools and, first in each episode, TRL's own training prompt
    tool_requests = [(r, p) for r, p in server.requests if r.get("tools")]
    chat_requests = [(r, p) for r, p in server.requests if not r.get("tools")]
    assert tool_requests and chat_requests
    env = trl_environment_factory(ENV_ID, split="dev")()
    tools = [get_json_schema(env.ask), get_json_schema(env.stop)]
    trainer = checkpoint.trainer
    trained_on = {
        trainer.processing_class.apply_chat_template(
            row["prompt"],
            tools=[env.ask, env.stop],
            chat_template=trainer.chat_template,
            add_generation_prompt=True,
            tokenize=False,
            enable_thinking=False,
        )
        for row in trl_dataset(ENV_ID, split="dev")
    }
    firsts = [p for r, p in tool_requests if len(r["messages"]) == 1]
    assert len(firsts) == 2  # one per record (--limit 2)
    for request_body, _ in tool_requests:
        assert request_body["tools"] == tools and request_body["tool_choice"] == "none"
    assert set(firsts) <= trained_on
    # later turns carry the question as an `ask` call and the oracle's answer as its result
    later = [r for r, _ in tool_requests if len(r["messages"]) > 1]
    assert later, "the model never asked (every episode stopped at once)"
    call = later[0]["messages"][1]["tool_calls"][0]["function"]
    assert call["name"] == "ask" and json.loads(call["arguments"]) == {
        "question": CheckpointServer.QUESTION
    }
    # the ChatAsker: the ChatMessages transcript, the question as the assistant turn
    from ambitab_gym.integrations.common import ChatSession

    session = ChatSession(ENV_ID, env_kwargs={"split": "dev"})
    openings = [session.start(record_id=r) for r in session.record_ids]
    assert all(r["messages"][:1] in openings for r, _ in chat_requests)
    asked = [r["messages"][1]["content"] for r, _ in chat_requests if len(r["messages"]) > 1]
    assert asked and set(asked) == {CheckpointServer.QUESTION}

    for words, summary in results:
        assert summary["episodes"] == 6 and not summary["errors"], (words, summary)
        assert summary["fallback_stops"] == 0
    # the trained asker's questions reached the oracle: "overdue" is bird-0040's ambiguity
    assert any(summary["recall"] > 0 for _, summary in results)


# -- examples/trained_asker.py: the training transcripts, turn by turn -----------------------


@pytest.fixture
def trained_asker(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import trained_asker

    yield trained_asker
    sys.modules.pop("trained_asker", None)


def test_trained_asker_doctests(trained_asker):
    failures, tries = doctest.testmod(trained_asker, optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tries > 0


@pytest.mark.parametrize("kind", ["ChatAsker", "ToolAsker"])
def test_trained_askers_send_the_training_transcript(trained_asker, kind):
    """At every turn, the messages the asker sends are the transcript the adapters trained on:
    ``ChatSession``'s with the default prompt (verl, verifiers, SkyRL), or with ``TOOL_PROMPT``
    (TRL: its system message, and each answer as the ``ask`` tool's result)."""
    from ambitab_gym.integrations.common import ChatSession
    from ambitab_gym.integrations.trl import TOOL_PROMPT
    from ambitab_gym.llm.sampling import SamplingTable
    from ambitab_gym.wrappers.stack import agent_view

    class Client:  # what the askers read of an LLMClient before calling it
        sampling = SamplingTable.build()

    asker = getattr(trained_asker, kind)(Client())
    tools = kind == "ToolAsker"
    session = ChatSession(
        ENV_ID, env_kwargs={"split": "dev"}, prompt=TOOL_PROMPT if tools else None
    )
    transcript = session.start(record_id="bird-0040")
    for question in ['What do you mean by "overdue"?', "Please elaborate.", "Which books?"]:
        sent = asker.messages(agent_view(session.env))
        assert sent[0] == transcript[0]
        if tools:
            assert [m["role"] for m in sent[1:]] == ["assistant", "tool"] * (len(sent) // 2)
            assert [m["content"] for m in sent[2::2]] == [m["content"] for m in transcript[2::2]]
            calls = [json.loads(m["tool_calls"][0]["function"]["arguments"]) for m in sent[1::2]]
            assert calls == [{"question": m["content"]} for m in transcript[1::2]]
        else:
            assert sent == transcript
        added, _, done, _ = session.step(question)
        transcript = [*transcript, {"role": "assistant", "content": question}, *added]
        if done:
            break
    session.close()
