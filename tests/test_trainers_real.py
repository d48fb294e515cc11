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

import pytest

from ambitab_gym import STOP, AmbiTabEnv

ENV_ID = "AmbiTab-Bird-v0"


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
        tokenizer.encode("<tool_call>\n" + json.dumps(call) + "\n</tool_call>", add_special_tokens=False)
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

    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    # bird-0040 has one ambiguity ("overdue"); bird-0049 has none
    rows = [r for r in trl_dataset(ENV_ID, split="dev") if r["record_id"] in ("bird-0040", "bird-0049")]
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
    trainer.train()

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
            answers = [m["content"] for m in completion if m.get("role") == "tool" and m["name"] == "ask"]
            assert answers == [a for _, a in dialogue][: len(answers)]  # the env answered them
            asked += question in actions
        # what TRL logged for the step is the env's rewards
        assert logged["reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert asked > 0
    changed = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
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
    import sys
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
