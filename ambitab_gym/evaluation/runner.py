"""Evaluation campaigns: the none / asker / full conditions over a corpus split and seeds.

* :class:`CampaignConfig` - what a campaign runs; its hash is the campaign id, so rerunning the
  same config resumes it.
* :func:`play_episode`, :func:`episode_seed` - re-exported from the campaign engine
  (:mod:`ambitab_gym.evaluation.engine`), which runs the episodes.
* :func:`run_campaign` - every (condition, seed, record) not yet stored, many in flight at once
  against LLM servers, each stored as it finishes; returns the campaign's :class:`Summary`
  (with the campaign's id and the corpus it ran on).

A config's :attr:`CampaignConfig.campaign_id` is the hash of the configuration (its *name*); the
id in the results store also folds in the corpus identity and the package version
(:meth:`CampaignConfig.stored_id`, :mod:`ambitab_gym.evaluation.identity`).

Conditions (paper C.1): ``none`` (pi_none), ``asker`` (the evaluated asker), ``full`` (pi_full),
all with the same solver and oracle. Records with m = 0 skip clarification.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ambitab_gym import defaults, registry
from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.env import ALL_SPLITS, AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.engine import (
    CampaignPlan,
    config_hash,
    create_oracle,
    episode_seed,
    play_episode,
    run_plan,
)
from ambitab_gym.evaluation.identity import identity_of
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.evaluation.summary import Summary, summarize_campaign
from ambitab_gym.llm.sampling import check_stored_sampling
from ambitab_gym.verify import Limits, Verifier
from ambitab_gym.vocabulary import EVALUATION_CONDITIONS

__all__ = ["CampaignConfig", "episode_seed", "play_episode", "run_campaign"]


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign's definition.

    Attributes:
        corpus: env id, corpus name or folder.
        asker: the evaluated asker (``none``, ``full``, ``full-adv``, ``generic``,
            ``llm:STRATEGY`` or ``module:callable``).
        solver: ``interpretation``, ``llm`` or ``module:callable``.
        oracle: ``deterministic``, ``llm``, a leaky oracle name or ``module:callable``.
        seeds: evaluation seeds.
        split: a split name, or None for every record (the evaluation pool; unlike the env,
            whose default is the ``train`` split).
        conditions: which of ``none``, ``asker``, ``full`` to run.
        budget_slack: decisions allowed beyond m (paper: 3).
        limit: run only the first ``limit`` records of the split.
        llm: LLM server options that identify the model (url, model, sampling).
        limits: verifier limits for the submitted SQL, as keyword arguments of
            :class:`~ambitab_gym.verify.Limits` (e.g. ``{"timeout_s": 2.0}``); None for the
            defaults. Part of the campaign id only when given, so earlier ids stay valid.

    >>> a = CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1))
    >>> a.campaign_id == CampaignConfig("AmbiTab-Bird-v0", asker="generic", seeds=(0, 1)).campaign_id
    True
    >>> a.campaign_id == CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0, 1)).campaign_id
    False
    """

    corpus: str
    asker: str = defaults.ASKER
    solver: str = defaults.SOLVER
    oracle: str = defaults.ORACLE
    seeds: tuple[int, ...] = defaults.SEEDS
    split: str | None = None
    conditions: tuple[str, ...] = EVALUATION_CONDITIONS
    budget_slack: int = defaults.BUDGET_SLACK
    limit: int | None = None
    llm: dict = field(default_factory=dict)
    limits: dict | None = None

    def __post_init__(self) -> None:
        unknown = set(self.conditions) - set(EVALUATION_CONDITIONS)
        if unknown:
            raise ConfigurationError(
                f"unknown conditions {sorted(unknown)}; use {', '.join(EVALUATION_CONDITIONS)}"
            )
        if not self.seeds:
            raise ConfigurationError("a campaign needs at least one seed")
        if self.limit is not None and self.limit < 1:
            raise ConfigurationError(
                f"limit must be a positive number of records, not {self.limit}"
            )
        if self.limits is not None:
            self.verifier_limits()  # fail here, not in the middle of a campaign

    def verifier_limits(self) -> Limits | None:
        """The :class:`~ambitab_gym.verify.Limits` of :attr:`limits` (None: the defaults)."""
        if self.limits is None:
            return None
        try:
            return Limits(**self.limits)
        except TypeError as error:
            raise ConfigurationError(f"invalid verifier limits {self.limits!r}: {error}") from None

    @property
    def campaign_id(self) -> str:
        """A stable id: the hash of the configuration (the campaign's *name*; the results store
        keys it by :meth:`stored_id`)."""
        data = asdict(self)
        if data["limits"] is None:
            del data["limits"]  # ids of campaigns from before the field existed stay the same
        return config_hash(data)

    def stored_id(self, corpus: Corpus | None = None) -> str:
        """The id the results store keys this campaign by: :attr:`campaign_id` with the corpus
        identity (origin, checksum) and the package version folded in.

        >>> config = CampaignConfig("AmbiTab-TACO-v0")
        >>> config.stored_id() == config.stored_id() != config.campaign_id
        True
        """
        return identity_of(corpus or load_corpus(self.corpus)).campaign_id(self.campaign_id)


def _asker_for(condition: str, config: CampaignConfig, corpus: Corpus, llm_client: Any) -> Any:
    if condition in ("none", "full"):
        return registry.create("asker", condition)
    return registry.create("asker", config.asker, corpus=corpus, llm_client=llm_client)


def run_campaign(
    config: CampaignConfig,
    results: str | Path | ResultsStore,
    *,
    concurrency: int = defaults.CONCURRENCY,
    llm_client: Any = None,
    progress: bool = True,
    oracle_options: dict | None = None,
    executor: Any = None,
    corpus: Corpus | None = None,
    retry_errors: bool = False,
    new_campaign: bool = False,
    progress_interval: float | None = None,
    abort_after: int | None = None,
    start_interval_s: float = defaults.SLOT_START_INTERVAL_S,
) -> Summary:
    """Run (or resume) a campaign and return its summary.

    Args:
        config: the campaign.
        results: a DuckDB results file or an open :class:`ResultsStore`.
        concurrency: episodes in flight at once (useful with LLM servers).
        llm_client: the LLM client for ``llm`` askers, solvers and oracles.
        progress: show progress on stderr (a bar on a terminal, else periodic lines).
        oracle_options: extra options for the oracle factory (LLM access policy, ...).
        executor: where the episodes run (:func:`~ambitab_gym.evaluation.engine.run_plan`);
            None: this process.
        corpus: the campaign's corpus already loaded, e.g. ``load_corpus(config.corpus,
            engine_override="postgres", options={"dsn": ...})`` to verify on one PostgreSQL
            server (each Ray worker opens its own pool to it); None: ``load_corpus(config.corpus)``.
        retry_errors: run the episodes stored with an error again (their rows are replaced).
        new_campaign: start this campaign even when the results file holds the same
            configuration over another corpus or package version.
        progress_interval: seconds between progress lines on a non-terminal.
        abort_after: stop after this many episodes in a row ended in a server error (default
            :data:`~ambitab_gym.defaults.ABORT_AFTER_ERRORS`; 0: never).
        start_interval_s: seconds between the first episodes of the ``concurrency`` slots, so
            that their first LLM calls do not reach the server in one burst (default
            :data:`~ambitab_gym.defaults.SLOT_START_INTERVAL_S`; 0: all at once). Timing only:
            not part of the campaign's id or stored configuration, the rows are the same.

    Raises:
        CampaignMismatch: the results file holds this configuration over other data (see
            :func:`~ambitab_gym.evaluation.engine.check_identity`); nothing ran.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "results.duckdb")
        >>> config = CampaignConfig("AmbiTab-Bird-v0", asker="full", seeds=(0,), limit=6)
        >>> summary = run_campaign(config, path, progress=False)
        >>> summary.sr["full"].mean >= summary.sr["none"].mean, summary.recall.mean
        (True, 1.0)
    """
    try:  # the stored sampling is part of the campaign id: it must be the client's
        check_stored_sampling(config.llm.get("sampling"), llm_client)
    except ValueError as error:
        raise ConfigurationError(str(error)) from None
    corpus = corpus if corpus is not None else load_corpus(config.corpus)
    records = corpus.split(config.split)
    if config.limit is not None:
        records = records[: config.limit]
    own_store = not isinstance(results, ResultsStore)
    store = ResultsStore(results) if own_store else results
    shared: dict[str, Any] = {}

    def prepare() -> None:  # only when episodes remain to run
        # one verifier for every env of the campaign: engines and reference results are opened
        # and computed once (the event loop runs verifications one at a time); with memo=True a
        # (record, SQL) pair verified before (another seed or condition), or an SQL text run
        # before on the same database (another record's reference), runs no query again
        shared["verifier"] = Verifier(
            corpus.open_engine, limits=config.verifier_limits(), memo=True
        )
        shared["solver"] = registry.create(
            "solver", config.solver, corpus=corpus, llm_client=llm_client
        )
        shared["oracle"] = create_oracle(
            config.oracle, corpus, llm_client=llm_client, **(oracle_options or {})
        )

    def parts(condition: str) -> tuple[AmbiTabEnv, Any]:
        env = AmbiTabEnv(
            corpus,
            split=config.split or ALL_SPLITS,  # the campaign's records, not the env's default
            oracle=shared["oracle"],
            solver=shared["solver"],
            budget_slack=config.budget_slack,
            zero_ambiguity=defaults.CAMPAIGN_ZERO_AMBIGUITY,
            limits=config.verifier_limits(),
            verifier=shared["verifier"],
        )
        return env, _asker_for(condition, config, corpus, llm_client)

    try:
        plan = CampaignPlan(
            kind="evaluate",
            campaign_id=config.campaign_id,
            config=asdict(config),
            corpus=corpus,
            records=records,
            seeds=config.seeds,
            conditions=config.conditions,
            parts=parts,
            label=corpus.name,
        )
        run_plan(
            plan,
            store,
            concurrency=concurrency,
            progress=progress,
            prepare=prepare,
            executor=executor,
            retry_errors=retry_errors,
            new_campaign=new_campaign,
            progress_interval=progress_interval,
            abort_after=abort_after,
            start_interval_s=start_interval_s,
        )
        assert plan.identity is not None
        return replace(
            summarize_campaign(store.episodes(plan.campaign_id)),
            campaign_id=plan.campaign_id,
            corpus=plan.identity.to_dict(),
        )
    finally:
        if "verifier" in shared:
            shared["verifier"].close()
        if own_store:
            store.close()
