"""GRPO with TRL on AmbiTab: an LLM asker calls the env's ``ask``/``stop`` tools (TRL >= 1.16).

The recipe of paper Appendix D with TRL's ``GRPOTrainer(environment_factory=...)``: K
completions per request (``--group``, the paper's K = 16), each a multi-turn episode in which
the model asks clarifying questions through the ``ask`` tool and ends with ``stop`` (or a reply
without a tool call); the question-F1 reward is the env's. Needs a GPU-sized model and
``pip install "ambitab-gym[trl]"``; ``tests/test_trainers_real.py`` runs the same trainer on CPU
with a tiny local model.

    python examples/train_trl_grpo.py --model Qwen/Qwen3-0.6B --steps 200 --out asker-grpo

(``--cpu`` for a smoke run on the CPU with a small local model directory as ``--model``.)
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    parser.add_argument("--env-id", default="AmbiTab-Bird-v0")
    parser.add_argument("--split", default="train")
    parser.add_argument("--group", type=int, default=16, help="completions per request (K)")
    parser.add_argument("--batch", type=int, default=16, help="completions per device and step")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--max-completion-length", type=int, default=512)
    parser.add_argument("--out", default="asker-grpo")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (a smoke run)")
    args = parser.parse_args()

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from ambitab_gym.integrations.trl import trl_dataset, trl_environment_factory, trl_reward

    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=trl_reward,
        train_dataset=Dataset.from_list(trl_dataset(args.env_id, split=args.split)),
        environment_factory=trl_environment_factory(args.env_id, split=args.split),
        args=GRPOConfig(
            output_dir=args.out,
            use_cpu=args.cpu,
            num_generations=args.group,
            per_device_train_batch_size=args.batch,
            max_steps=args.steps,
            max_completion_length=args.max_completion_length,
            chat_template_kwargs={"enable_thinking": False},
            logging_steps=1,
            report_to=[],
        ),
    )
    trainer.train()
    trainer.save_model(args.out)


if __name__ == "__main__":
    main()
