"""GRPO with the question-F1 reward and zero-advantage group filtering (paper Appendix D), small.

The recipe the paper uses to train an LLM asker, run here on a linear softmax policy over the
``QuestionMenu`` candidates so that it finishes in seconds on a CPU with numpy alone:

1. Each iteration samples ``--requests`` training records and, for each, ``--group`` (K)
   trajectories with the current stochastic policy. The deterministic oracle answers.
2. Each trajectory earns the question-F1 reward R_F1 (paper eq. 2): the harmonic mean of its
   precision p (share of questions that credit a not-yet-credited ambiguity) and recall r
   (share of the ambiguities credited); 1 for stopping at once on a request without
   ambiguities, 0 for asking there, and 0 when no question is productive.
3. Advantages are group-relative (eq. 4): A_k = (R_k - mean) / (sd + 1e-6) within the K
   trajectories of one request, sd the sample standard deviation.
4. Groups whose rewards are constant (sd <= 1e-6) carry no signal: their advantage is zero and
   they are dropped before the update. If every group of a batch is constant, one complete group
   is kept so the batch is not empty (it then contributes nothing but regularization).
5. Every retained decision - each question and the stop - gets its trajectory's advantage.

It prints the fraction of groups with non-constant rewards per iteration (the "reward contrast"
of the paper's Figure 9d), then evaluates the greedy policy on the held-out ``dev`` split
against a uniformly random menu policy. The last line is JSON.

    python examples/grpo_question_f1.py [--iterations 60] [--group 8]
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np

from ambitab_gym.integrations.common import group_advantages, macro_means, score_episode
from ambitab_gym.wrappers import QuestionMenu
from ambitab_gym.wrappers.menu import MenuLayout

_GLOBAL_SCALARS = 22  # questions left and asked (one-hot), refusal statistics, menu fill


def features(obs: np.ndarray, layout: MenuLayout) -> tuple[np.ndarray, np.ndarray]:
    """phi(s, a) for every slot, and the mask of valid slots.

    A slot's own features, plus - for the stop slot only - the global budget/refusal features,
    so that a linear score can learn *when* to stop.
    """
    glob, slots = layout.split(obs)
    is_stop = slots[:, 1:2]
    phi = np.concatenate([slots, is_stop * glob[:_GLOBAL_SCALARS]], axis=1)
    return phi, slots[:, 0] > 0.5


def policy(w: np.ndarray, phi: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Softmax over the valid slots of the linear scores w . phi."""
    scores = np.where(valid, phi @ w, -np.inf)
    scores -= scores.max()
    probs = np.exp(scores)
    return probs / probs.sum()


def rollout(env, w, record_id, rng, greedy=False):
    """One episode; returns the reward and the (phi, valid, action) of every decision."""
    obs, _ = env.reset(options={"record_id": record_id})
    layout = env.layout
    decisions, reward, done = [], 0.0, False
    while not done:
        phi, valid = features(obs, layout)
        probs = policy(w, phi, valid)
        action = int(np.argmax(probs)) if greedy else int(rng.choice(len(probs), p=probs))
        decisions.append((phi, probs, action))
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return float(reward), decisions


def evaluate(env, act) -> dict:
    scores = []
    for record in env.unwrapped.records:
        obs, _ = env.reset(options={"record_id": record.id})
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(act(obs))
            done = terminated or truncated
        scores.append(score_episode(env.unwrapped.trajectory, env.unwrapped.record))
    return macro_means(scores)


def greedy_zero(obs: np.ndarray, layout: MenuLayout) -> int:
    """The untrained policy (w = 0) is uniform; greedily it takes the first slot: STOP."""
    phi, valid = features(obs, layout)
    return int(np.argmax(policy(np.zeros(phi.shape[1]), phi, valid)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="AmbiTab-Bird-v0")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--requests", type=int, default=8, help="requests per rollout batch")
    parser.add_argument("--group", type=int, default=8, help="K trajectories per request")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    train = QuestionMenu(gym.make(args.env_id, split="train"))
    dev = QuestionMenu(gym.make(args.env_id, split="dev"))
    rng = np.random.default_rng(args.seed)
    record_ids = [r.id for r in train.unwrapped.records]
    dim = train.layout.slot_dim + _GLOBAL_SCALARS
    w = np.zeros(dim)
    contrast = []
    for iteration in range(args.iterations):
        batch = rng.choice(record_ids, size=args.requests, replace=False)
        groups = [[rollout(train, w, rid, rng) for _ in range(args.group)] for rid in batch]
        rewards = [[reward for reward, _ in group] for group in groups]
        result = group_advantages(rewards)
        contrast.append(sum(np.ptp(r) > 0 for r in rewards) / len(rewards))
        gradient, retained = np.zeros(dim), 0
        for group, advantages, kept in zip(groups, result.advantages, result.kept, strict=True):
            if not kept:
                continue  # zero-advantage group: filtered before the update
            for (_, decisions), advantage in zip(group, advantages, strict=True):
                for phi, probs, action in decisions:  # every decision, the stop included
                    gradient += advantage * (phi[action] - probs @ phi)
                    retained += 1
        if retained:
            w += args.lr * gradient / retained
        if iteration % 10 == 0 or iteration == args.iterations - 1:
            mean_reward = float(np.mean(rewards))
            print(
                f"iteration {iteration:3d}: mean R_F1 {mean_reward:.3f}, groups with contrast "
                f"{contrast[-1]:.2f}, kept {sum(result.kept)}/{len(result.kept)}"
                + (" (all constant: one kept)" if result.all_constant else "")
            )

    def greedy(obs):
        phi, valid = features(obs, dev.layout)
        return int(np.argmax(policy(w, phi, valid)))

    random_rng = np.random.default_rng(args.seed)

    def uniform(obs):
        return int(random_rng.choice(np.flatnonzero(dev.action_masks())))

    trained = evaluate(dev, greedy)
    untrained = evaluate(dev, lambda obs: greedy_zero(obs, dev.layout))
    baseline = evaluate(dev, uniform)
    print(f"held-out dev: trained F1 {trained['f1']:.3f}, random F1 {baseline['f1']:.3f}")
    print(
        json.dumps(
            {
                "example": "grpo_question_f1",
                "trained": trained,
                "untrained": untrained,
                "random": baseline,
                "mean_group_contrast": round(float(np.mean(contrast)), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
