"""The LLM-trainer adapters inside the real, installed trainers (TRL, verifiers, verl).

Each package is installed by the ``test`` extra (verl with ``--no-deps``, see the README's test
command), so a missing one fails here instead of skipping. Every test drives full AmbiTab
episodes through the trainer's own interface and checks the rewards against the raw
``AmbiTabEnv`` replaying the same actions. Nothing is downloaded: the model and tokenizer are
built locally (``tests/tiny_lm.py``), and the verifiers model is the scripted OpenAI-compatible
server of ``ambitab_gym.testing.llm_server`` on 127.0.0.1.
"""

from __future__ import annotations

import json
import sys

import pytest

from ambitab_gym import STOP, AmbiTabEnv

ENV_ID = "AmbiTab-Bird-v0"

# The test extra installs the trainers from Python 3.11 on (TRL >= 1.16 and verifiers 0.4 need
# it); there, a missing trainer fails these tests.
pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="TRL >= 1.16 and verifiers >= 0.4 need Python 3.11"
)


def _raw(record_id: str, actions: list[str], **env_kwargs) -> tuple[float, list[tuple[str, str]]]:
    """The raw env's reward and dialogue for ``actions`` (an episode still open ends as a stop)."""
    env = AmbiTabEnv("bird", **env_kwargs)
    env.reset(options={"record_id": record_id})
    total, done = 0.0, False
    for action in [*actions, STOP]:
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        done = terminated or truncated
        if done:
            break
    assert done
    return total, [(t.question, t.answer) for t in env.trajectory.turns]


# -- TRL: GRPOTrainer(environment_factory=...) with a tiny local model --------------------------


def _tool_call_sequences(tokenizer, calls: list[dict]) -> list[list[int]]:
    """Token ids of one Qwen3 tool call per entry of ``calls``, each ending the turn."""
    return [
        tokenizer.encode(
            "<tool_call>\n" + json.dumps(call) + "\n</tool_call>", add_special_tokens=False
        )
        + [tokenizer.eos_token_id]
        for call in calls
    ]


def _steer(sequences: list[list[int]], step: float = 20.0) -> dict[tuple[int, ...], float]:
    """``sequence_bias`` for ``generate``: each prefix of a sequence is favoured more the longer
    it is, so a turn follows one of the sequences; where they part, the model's own (random)
    logits choose. Sampling, log-probabilities and gradients stay the model's."""
    bias: dict[tuple[int, ...], float] = {}
    for sequence in sequences:
        for k in range(1, len(sequence) + 1):
            bias[tuple(sequence[:k])] = step * k
    return bias


def _actions_of(completion: list[dict]) -> list[str]:
    """The asker's actions in a TRL completion: ``ask`` questions and ``stop`` calls, in order."""
    actions = []
    for message in completion:
        for call in message.get("tool_calls") or ():
            function = call["function"]
            if function["name"] == "ask":
                actions.append(function["arguments"]["question"])
            elif function["name"] == "stop":
                actions.append(STOP)
    return actions


def test_trl_grpo_run_on_cpu_rewards_come_from_the_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from tiny_lm import tiny_model, tiny_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    from ambitab_gym.integrations.trl import trl_dataset, trl_environment_factory, trl_reward

    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    # bird-0040 has one ambiguity ("overdue"); bird-0049 has none
    rows = [
        r for r in trl_dataset(ENV_ID, split="dev") if r["record_id"] in ("bird-0040", "bird-0049")
    ]
    question = 'What do you mean by "overdue"?'
    sequences = _tool_call_sequences(
        tokenizer,
        [{"name": "ask", "arguments": {"question": question}}, {"name": "stop", "arguments": {}}],
    )
    seen: list[tuple[list[str], list, list[float]]] = []

    def reward(environments, **kwargs):
        rewards = trl_reward(environments, **kwargs)  # the adapter's reward function
        seen.append((list(kwargs["record_id"]), list(kwargs["completions"]), rewards))
        return rewards

    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=96,
        max_tool_calling_iterations=1,
        generation_kwargs={"sequence_bias": _steer(sequences)},
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=trl_environment_factory(ENV_ID, split="dev"),
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)  # one thread for this run only

    steps = [h for h in trainer.state.log_history if "reward" in h]
    assert trainer.state.global_step == 2 and len(steps) == len(seen) == 2
    asked = 0
    for (record_ids, completions, rewards), logged in zip(seen, steps, strict=True):
        assert len(completions) == len(rewards) == 2 and len(set(record_ids)) == 1
        for record_id, completion, value in zip(record_ids, completions, rewards, strict=True):
            actions = _actions_of(completion)
            assert actions, completion  # the steered turn is a tool call TRL parsed and ran
            expected, dialogue = _raw(record_id, actions, split="dev")
            assert value == expected
            answers = [
                m["content"] for m in completion if m.get("role") == "tool" and m["name"] == "ask"
            ]
            assert answers == [a for _, a in dialogue][: len(answers)]  # the env answered them
            asked += question in actions
        # what TRL logged for the step is the env's rewards
        assert logged["reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert asked > 0
    changed = any(
        not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)
    )
    contrast = any(h["frac_reward_zero_std"] < 1.0 for h in steps)
    assert changed == contrast  # an update happens exactly when a group's rewards differ


# -- verifiers 0.4 (verifiers.v1): Taskset + Env, episodes through Env.run_episode -------------

VERIFIERS_EPISODES = [
    ("bird-0040", ['What do you mean by "overdue"?', STOP]),  # productive, then stop: 1
    ("bird-0040", [STOP]),  # stops at once on an ambiguous request: 0
    ("bird-0049", [STOP]),  # no ambiguity, abstains: 1
    ("bird-0049", ["Which books?"]),  # no ambiguity, asks: 0
    ("bird-0040", ["Please elaborate."] * 8),  # unproductive until the budget ends it: 0
    ("bird-0040", ['What do you mean by "overdue"?']),  # the model stops replying: ends as a stop
]


@pytest.fixture(scope="module")
def verifiers_env():
    from pathlib import Path

    examples = str(Path(__file__).resolve().parents[1] / "examples")
    sys.path.insert(0, examples)
    try:
        from ambitab_gym.integrations.verifiers import load_environment

        yield load_environment(ENV_ID, split="dev")
    finally:
        sys.path.remove(examples)
        sys.modules.pop("ambitab_verifiers", None)


def _scripted_agents(vf, config, replies, completed, received):
    """verifiers ``Agents`` whose asker replies from a script (the model side of the run)."""
    import contextlib

    class Interaction:
        def __init__(self, trace):
            self.trace = trace
            self.replies = iter(replies)

        async def turn(self, message=None):
            received.append(message)
            reply = next(self.replies, None)
            if reply is None:  # the model has nothing more to say: the run ends
                return vf.Segment(messages=[], terminated=True)
            return vf.Segment(messages=[vf.AssistantMessage(content=reply)])

    class Agent:
        def __init__(self, name, spec):
            self.name, self.spec = name, spec

        @contextlib.asynccontextmanager
        async def interaction(self, task):
            trace = vf.Trace(
                task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key),
                agent=vf.AgentInfo(config=self.spec, name=self.name),
            )
            yield Interaction(trace)
            trace.ok = True
            completed.append(trace)

    return vf.Agents(config, Agent)


def test_verifiers_plugin_resolves_to_the_adapter(verifiers_env):
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import environment_class, taskset_class

    from ambitab_gym.integrations import verifiers as adapter

    assert isinstance(verifiers_env, vf.Env) and isinstance(verifiers_env.taskset, vf.Taskset)
    assert environment_class(adapter.TASKSET_ID) is adapter.AmbiTabVerifiersEnv
    assert taskset_class(adapter.TASKSET_ID) is adapter.AmbiTabTaskset
    tasks = list(verifiers_env.taskset)
    assert len(tasks) == 21 and [t.data.idx for t in tasks] == list(range(21))
    task = tasks[0]
    assert task.data.prompt[0].role == "system" and task.data.info["record_id"] == "bird-0040"
    assert "Which books are overdue?" in task.data.prompt_text


@pytest.mark.parametrize(("record_id", "replies"), VERIFIERS_EPISODES)
def test_verifiers_episode_rewards_equal_raw(verifiers_env, record_id, replies):
    import asyncio

    import verifiers.v1 as vf

    env = verifiers_env
    task = next(t for t in env.taskset if t.data.info["record_id"] == record_id)
    received: list = []
    # verifiers' own Env.run_episode (setup, run, finalize, verdict); only the agents, which
    # would run a model through a harness program, are scripted
    env._episode_agents = lambda ctx, traces, on_trace, on_discard: _scripted_agents(
        vf, env.config, replies, traces, received
    )
    try:
        episode = asyncio.run(env.run_episode(task, None))
    finally:
        del env._episode_agents
    assert episode.ok and not episode.errors
    (trace,) = episode.traces
    actions = replies[: len(received)]  # the replies the model gave
    expected, dialogue = _raw(record_id, actions, split="dev")
    assert trace.rewards["question_f1"].score == expected
    assert received[0] is None  # the task's prompt speaks first
    assert received[1:] == [answer for _, answer in dialogue][: len(received) - 1]


# -- verl >= 0.9: the agent loop inside verl's AgentLoopWorker.generate_sequences -------------

VERL_SCRIPTS = {
    "bird-0040": ['What do you mean by "overdue"?', "Please elaborate.", STOP],  # p = 1/2: 2/3
    "bird-0049": ["Which books?"],  # no ambiguity, asks: 0
    "bird-0014": [STOP],  # ambiguous, stops at once: 0
    "bird-0006": ['What do you mean by "revenue"?', "Which year do you mean by last year?", STOP],
}


def test_verl_agent_loop_in_the_agent_loop_worker(tmp_path):
    import asyncio
    from pathlib import Path

    import numpy as np
    import verl
    from hydra import compose, initialize_config_dir
    from tiny_lm import tiny_model, tiny_tokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopWorker
    from verl.protocol import DataProto
    from verl.workers.rollout.replica import TokenOutput

    from ambitab_gym.integrations import verl as adapter

    assert issubclass(adapter.AmbiTabAgentLoop, AgentLoopBase)
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    config = tiny_model(tokenizer).config
    config.architectures = ["Qwen3ForCausalLM"]
    config.save_pretrained(tmp_path)
    # the shipped agent-loop entry, on the records of both splits used below
    loops = tmp_path / "agent_loop.yaml"
    text = (Path(__file__).resolve().parents[1] / "examples" / "verl_agent_loop.yaml").read_text()
    loops.write_text(text.replace("split: train", "split: all"))
    with initialize_config_dir(
        config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None
    ):
        trainer_config = compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={tmp_path}",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.prompt_length=2048",
                "actor_rollout_ref.rollout.response_length=256",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
            ],
        )
    requests = {r: AmbiTabEnv("bird", split="all").unwrapped for r in VERL_SCRIPTS}
    for record_id, env in requests.items():
        env.reset(options={"record_id": record_id})

    class Server:
        """The model: verl's LLM server client interface, replying from each record's script."""

        def __init__(self):
            self.owner: dict[str, str] = {}  # request id -> record id
            self.used: dict[str, list[str]] = {r: [] for r in VERL_SCRIPTS}

        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            if request_id not in self.owner:
                prompt = tokenizer.decode(prompt_ids)
                (self.owner[request_id],) = [
                    r
                    for r, env in requests.items()
                    if f"Request: {env.record.spec.request}" in prompt
                ]
            record_id = self.owner[request_id]
            reply = VERL_SCRIPTS[record_id][len(self.used[record_id])]
            self.used[record_id].append(reply)
            ids = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.eos_token_id]
            return TokenOutput(token_ids=ids)

    rows = [
        r
        for r in adapter.verl_dataset(ENV_ID, split="all")  # records of both splits
        if r["extra_info"]["interaction_kwargs"]["record_id"] in VERL_SCRIPTS
    ]
    assert len(rows) == len(VERL_SCRIPTS) and {r["agent_name"] for r in rows} == {"ambitab_agent"}
    batch = DataProto.from_single_dict(
        {
            "raw_prompt": np.array([r["prompt"] for r in rows], dtype=object),
            "agent_name": np.array([r["agent_name"] for r in rows], dtype=object),
            "extra_info": np.array([r["extra_info"] for r in rows], dtype=object),
            "index": np.arange(len(rows)),
        }
    )
    server = Server()

    async def rollout():
        worker = AgentLoopWorker(trainer_config, server)
        return await worker.generate_sequences(batch)

    out = asyncio.run(rollout())
    scores = out.batch["rm_scores"].sum(-1).tolist()
    for i, row in enumerate(rows):
        record_id = row["extra_info"]["interaction_kwargs"]["record_id"]
        actions = server.used[record_id]
        assert actions == VERL_SCRIPTS[record_id][: len(actions)]
        expected, dialogue = _raw(record_id, actions, split="all")
        assert scores[i] == pytest.approx(expected)  # verl's token-level reward is the env's
        assert sum(out.non_tensor_batch["turn_scores"][i]) == pytest.approx(expected)
        # the opening, each asker turn, and each answer before the next turn
        assert out.non_tensor_batch["__num_turns__"][i] == 2 * len(actions)
        # the env's answers are context tokens (mask 0), the asker's replies are the model's
        mask = out.batch["response_mask"][i].bool()
        responses = out.batch["responses"][i]
        context = tokenizer.decode(responses[~mask & (responses != tokenizer.pad_token_id)])
        generated = tokenizer.decode(responses[mask])
        for turn, (question, answer) in enumerate(dialogue):
            assert question in generated
            if turn < len(actions) - 1:  # answered before the asker's next turn
                assert answer in context and answer not in generated
    assert sorted(scores) == pytest.approx(sorted([2 / 3, 0.0, 0.0, 1.0]))
