"""Evaluation: campaigns over the none / asker / full conditions, the results store, summaries.

* :func:`run_campaign` and :class:`CampaignConfig` - run or resume a campaign.
* :class:`ResultsStore` - the DuckDB results file.
* :func:`summarize_campaign` (formerly ``summarize``), :func:`format_table` - the figures of
  paper Table 8.
* :func:`rescore_episode`, :func:`rescore_episodes`, :func:`rescore_campaign` - re-score
  stored episodes from their recorded LLM-oracle routes (paper C.3), without new model calls.
"""

from __future__ import annotations

from ambitab_gym.evaluation.rescore import rescore_campaign, rescore_episode, rescore_episodes
from ambitab_gym.evaluation.runner import CampaignConfig, episode_seed, play_episode, run_campaign
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import (
    Stat,
    Summary,
    episode_metrics,
    format_table,
    summarize,
    summarize_campaign,
)

__all__ = [
    "CampaignConfig",
    "ResultsStore",
    "Stat",
    "Summary",
    "episode_metrics",
    "episode_seed",
    "format_table",
    "play_episode",
    "run_campaign",
    "rescore_campaign",
    "rescore_episode",
    "rescore_episodes",
    "summarize",
    "summarize_campaign",
]
