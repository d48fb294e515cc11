"""Evaluation: campaigns over the none / asker / full conditions, the results store, summaries.

* :func:`run_campaign` and :class:`CampaignConfig` - run or resume a campaign.
* :class:`ResultsStore` - the DuckDB results file.
* :func:`summarize`, :func:`format_table` - the figures of paper Table 8.
"""

from __future__ import annotations

from ambitab_gym.evaluation.runner import CampaignConfig, episode_seed, play_episode, run_campaign
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import Stat, Summary, episode_metrics, format_table, summarize

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
    "summarize",
]
