"""Evaluation: campaigns over the none / asker / full conditions, the results store, summaries.

* :func:`run_campaign` and :class:`CampaignConfig` - run or resume a campaign.
* :func:`run_plan`, :class:`CampaignPlan`, :func:`play_episode`, :func:`config_hash` - the one
  campaign engine (:mod:`ambitab_gym.evaluation.engine`), which leakage campaigns use too.
* :class:`ResultsStore` - the DuckDB results file.
* :func:`summarize_campaign`, :func:`format_table` - the figures of paper Table 8.
* :func:`rescore_episode`, :func:`rescore_episodes`, :func:`rescore_campaign` - re-score
  stored episodes from their recorded LLM-oracle routes (paper C.3), without new model calls.
"""

from __future__ import annotations

from ambitab_gym.evaluation.engine import CampaignPlan, WorkUnit, config_hash, run_plan
from ambitab_gym.evaluation.rescore import rescore_campaign, rescore_episode, rescore_episodes
from ambitab_gym.evaluation.runner import CampaignConfig, episode_seed, play_episode, run_campaign
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import (
    Stat,
    Summary,
    episode_metrics,
    format_table,
    summarize_campaign,
)

__all__ = [
    "CampaignConfig",
    "CampaignPlan",
    "ResultsStore",
    "Stat",
    "Summary",
    "WorkUnit",
    "config_hash",
    "episode_metrics",
    "episode_seed",
    "format_table",
    "play_episode",
    "run_campaign",
    "run_plan",
    "rescore_campaign",
    "rescore_episode",
    "rescore_episodes",
    "summarize_campaign",
]
