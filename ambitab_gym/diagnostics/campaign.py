"""Leakage campaigns: the runs behind the four diagnostics, stored in the results store.

* :class:`LeakageConfig` - what a campaign runs; its hash is the campaign id, so rerunning the
  same config resumes it (only missing episodes run).
* :func:`run_leakage` - run (or resume) every condition of :data:`CONDITIONS` over the records
  and seeds, store each episode (campaign kind ``"leakage"``), return the :class:`LeakageReport`.
* :func:`stored_leakage_report` - the report of a stored campaign.

The runs (paper A.4): the evaluated asker under O and under (match, resp*) [dJ_resp]; the
specification-randomized asker under (match, resp*) and under O* [dRec_spec^Q and Theorem 1's
reference term]; pi_full^adv (:class:`~ambitab_gym.policies.scripted.FullAsker` behind
:class:`~ambitab_gym.wrappers.AdversarialProbe`) under O and O* [dJ_full]; pi_none^adv
(:class:`~ambitab_gym.policies.scripted.GenericAsker`) under (match, resp*) and O* [dRec_none];
the restatement probe and the shotgun probe (``schema-probe``) under O* [the reference checks:
a matcher must not credit the request's words or a list of the schema].
O* is the corpus's deterministic oracle. Every run uses the same records, seeds and solver;
the runs that only feed recall diagnostics (:data:`RECALL_ONLY`) stop after asking, without
writing or verifying SQL.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ambitab_gym import defaults, registry
from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.diagnostics.estimates import (
    CONDITIONS,
    RECALL_ONLY,
    LeakageReport,
    leakage_report,
)
from ambitab_gym.env import ALL_SPLITS, AmbiTabEnv
from ambitab_gym.errors import ConfigurationError
from ambitab_gym.evaluation.engine import CampaignPlan, config_hash, create_oracle, run_plan
from ambitab_gym.evaluation.store import ResultsStore
from ambitab_gym.llm.sampling import check_stored_sampling
from ambitab_gym.oracles import Oracle
from ambitab_gym.oracles.deterministic import reference_oracle
from ambitab_gym.records import TaskRecord
from ambitab_gym.verify import Verifier
from ambitab_gym.wrappers.guard import ResponseGuard
from ambitab_gym.wrappers.leakage import (
    AdversarialProbe,
    HybridOracle,
    SpecificationRandomization,
    draw_replacements,
)

__all__ = ["LeakageConfig", "run_leakage", "stored_leakage_report"]


@dataclass(frozen=True)
class LeakageConfig:
    """A leakage campaign's definition.

    Attributes:
        corpus: env id, corpus name or folder.
        asker: the evaluated asker (a name of ``evaluate --asker``, or ``schema-probe``).
        oracle: the oracle O under study (``deterministic``, ``llm``, a leaky oracle, or
            ``module:callable``).
        solver: ``interpretation``, ``dialogue-sql``, ``dialogue-sql-blind``, ``llm`` or
            ``module:callable``.
        seeds: evaluation seeds.
        split: a split, or None for every record.
        budget_slack: decisions allowed beyond m (paper: 3).
        limit: only the first ``limit`` records of the split.
        spec_seed: seed of the replacement map of the specification randomization: one map,
            drawn from the whole corpus (every split), stored with the campaign and reused
            across the evaluation seeds and on resume.
        conditions: which runs of :data:`CONDITIONS` to do (default all).
        llm: LLM server options that identify the model.
        response_guard: wrap every env in :class:`~ambitab_gym.wrappers.ResponseGuard` (oracle
            answers that reveal SQL are redacted before the agent sees them).
    """

    corpus: str
    asker: str
    oracle: str = defaults.ORACLE
    solver: str = defaults.SOLVER
    seeds: tuple[int, ...] = defaults.SEEDS
    split: str | None = None
    budget_slack: int = defaults.BUDGET_SLACK
    limit: int | None = None
    spec_seed: int = defaults.SPEC_SEED
    conditions: tuple[str, ...] = tuple(CONDITIONS)
    llm: dict = field(default_factory=dict)
    response_guard: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.conditions) - set(CONDITIONS)
        if unknown:
            raise ConfigurationError(
                f"unknown conditions {sorted(unknown)}; use {sorted(CONDITIONS)}"
            )
        if not self.seeds:
            raise ConfigurationError("a leakage campaign needs at least one seed")

    @property
    def campaign_id(self) -> str:
        """A stable id: the hash of the configuration."""
        fields = asdict(self)
        if not fields["response_guard"]:
            del fields["response_guard"]  # unguarded campaigns keep the ids they always had
        return config_hash({"kind": "leakage", **fields})


class _Parts:
    """Builds the env and the asker of each condition."""

    def __init__(
        self,
        config: LeakageConfig,
        corpus: Corpus,
        records: list[TaskRecord],
        actual: Oracle,
        solver: Any,
        llm_client: Any,
    ) -> None:
        self.config, self.corpus, self.records = config, corpus, records
        self.actual = actual
        self.reference = reference_oracle(corpus)
        self.solver, self.llm_client = solver, llm_client
        self.replacements: dict[str, str] = {}  # receiver id -> donor id, set once per campaign
        # One verifier for every env of the campaign: engines and reference results are opened
        # and computed once, not once per condition (the event loop runs verifications one at
        # a time, so sharing is safe).
        self.verifier = Verifier(corpus.open_engine)

    def env(self, condition: str) -> Any:
        policy, oracle = CONDITIONS[condition]
        env: Any = AmbiTabEnv(
            self.corpus,
            split=self.config.split or ALL_SPLITS,  # the campaign's records, not the env's default
            record_ids=[r.id for r in self.records],
            oracle=self.reference if oracle == "reference" else self.actual,
            solver=None if condition in RECALL_ONLY else self.solver,
            mode="ask_only" if condition in RECALL_ONLY else "solver",
            budget_slack=self.config.budget_slack,
            zero_ambiguity=defaults.CAMPAIGN_ZERO_AMBIGUITY,
            verifier=self.verifier,
        )
        if self.config.response_guard:
            env = ResponseGuard(env)
        if oracle == "hybrid":
            env = HybridOracle(env)
        if policy == "asker^Q":
            env = SpecificationRandomization(env, replacements=self.replacements)
        elif policy == "full^adv":
            env = AdversarialProbe(env)
        return env

    def asker(self, condition: str, env: Any) -> Any:
        policy = CONDITIONS[condition][0]
        if policy == "full^adv":
            return registry.create("asker", "full")  # reworded into pi_full^adv by AdversarialProbe
        if policy == "none^adv":
            return registry.create("asker", "generic")
        if policy == "restatement":
            return registry.create("asker", "restatement")
        if policy == "shotgun":
            return registry.create("asker", "schema-probe")
        asker = registry.create(
            "asker", self.config.asker, corpus=self.corpus, llm_client=self.llm_client
        )
        return env.wrap_asker(asker) if policy == "asker^Q" else asker

    def parts(self, condition: str) -> tuple[Any, Any]:
        """The env and the asker of one worker for a condition (the campaign engine's hook)."""
        env = self.env(condition)
        return env, self.asker(condition, env)


def _replacements(
    config: LeakageConfig, corpus: Corpus, records: list[TaskRecord], store: ResultsStore
) -> dict[str, str]:
    """The campaign's replacement map: the stored one when resuming, else drawn once.

    Q_x (paper A.4) is uniform over the corpus's records, every split, whose database differs;
    one donor per replacement group, from ``spec_seed``.
    """
    stored = store.campaign(config.campaign_id)  # by name: the latest campaign of this config
    kept = dict((stored or {}).get("config", {}).get("replacements") or {})
    known = {r.id for r in corpus.records}
    if kept and known.issuperset(kept) and known.issuperset(kept.values()):
        return kept  # (a map stored over another corpus version is drawn afresh)
    donors = draw_replacements(records, corpus.records, np.random.default_rng(config.spec_seed))
    return {rid: donor.id for rid, donor in donors.items()}


def _links(corpus: Corpus, donors: dict[str, str]) -> list[tuple[str, str]]:
    pairs = {(corpus.record(rid).avt_id, corpus.record(did).avt_id) for rid, did in donors.items()}
    return sorted(pairs)


def _recall_only(row: dict) -> None:
    if row["condition"] in RECALL_ONLY:
        row["success"] = None  # asked only: no SQL was written or verified


def run_leakage(
    config: LeakageConfig,
    results: str | Path | ResultsStore,
    *,
    concurrency: int = defaults.CONCURRENCY,
    llm_client: Any = None,
    progress: bool = True,
    oracle_options: dict | None = None,
    resamples: int = defaults.BOOTSTRAP_RESAMPLES,
    bootstrap_seed: int = defaults.BOOTSTRAP_SEED,
    executor: Any = None,
    corpus: Corpus | None = None,
    **run_options: Any,
) -> LeakageReport:
    """Run (or resume) a leakage campaign and return its report.

    Args:
        config: the campaign.
        results: a DuckDB results file or an open :class:`ResultsStore`.
        concurrency: episodes in flight at once (useful with LLM servers).
        llm_client: the LLM client for ``llm`` askers, solvers and oracles.
        progress: show a progress bar on stderr.
        oracle_options: extra options for the oracle factory.
        resamples: bootstrap resamples (paper: 2,000).
        bootstrap_seed: the bootstrap's seed.
        executor: where the episodes run (:func:`~ambitab_gym.evaluation.engine.run_plan`);
            None: this process.
        corpus: the campaign's corpus already loaded, e.g. ``load_corpus(config.corpus,
            engine_override="postgres", options={"dsn": ...})`` to verify on one PostgreSQL
            server (each Ray worker opens its own pool to it); None: ``load_corpus(config.corpus)``.
        **run_options: passed to :func:`~ambitab_gym.evaluation.engine.run_plan`
            (``retry_errors``, ``new_campaign``, ``progress_interval``, ``start_interval_s``).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "results.duckdb")
        >>> config = LeakageConfig("AmbiTab-Bird-v0", asker="generic",
        ...                        oracle="generic-credit-matcher", limit=12)
        >>> report = run_leakage(config, path, progress=False, resamples=200)
        >>> report.to_json()["d_rec_none"]["mean"], report.reference_ok
        (100.0, True)
    """
    try:  # the stored sampling is part of the campaign id: it must be the client's
        check_stored_sampling(config.llm.get("sampling"), llm_client)
    except ValueError as error:
        raise ConfigurationError(str(error)) from None
    corpus = corpus if corpus is not None else load_corpus(config.corpus)
    records = corpus.split(config.split)
    if config.limit is not None:
        records = records[: config.limit]
    if not records:
        raise ConfigurationError(f"no records to run in corpus {corpus.name!r}")
    own_store = not isinstance(results, ResultsStore)
    store = ResultsStore(results) if own_store else results
    parts: _Parts | None = None
    try:
        solver = registry.create("solver", config.solver, corpus=corpus, llm_client=llm_client)
        actual = create_oracle(
            config.oracle, corpus, llm_client=llm_client, **(oracle_options or {})
        )
        if not config.asker.startswith("llm:") and ":" not in config.asker:
            registry.get("asker", config.asker)  # an unknown name fails before anything runs
        parts = _Parts(config, corpus, records, actual, solver, llm_client)
        donors = parts.replacements = _replacements(config, corpus, records, store)
        plan = CampaignPlan(
            kind="leakage",
            campaign_id=config.campaign_id,
            config={
                **asdict(config),
                "replacements": donors,
                "replacement_links": _links(corpus, donors),
            },
            corpus=corpus,
            records=records,
            seeds=config.seeds,
            conditions=config.conditions,
            parts=parts.parts,
            finish_row=_recall_only,
            label="leakage",
        )
        run_plan(
            plan,
            store,
            concurrency=concurrency,
            progress=progress,
            executor=executor,
            **run_options,
        )
        return stored_leakage_report(
            store, plan.campaign_id, resamples=resamples, bootstrap_seed=bootstrap_seed
        )
    finally:
        if parts is not None:
            parts.verifier.close()
        if own_store:
            store.close()


def stored_leakage_report(
    store: ResultsStore,
    campaign_id: str,
    *,
    resamples: int = defaults.BOOTSTRAP_RESAMPLES,
    bootstrap_seed: int = defaults.BOOTSTRAP_SEED,
) -> LeakageReport:
    """The report of a stored leakage campaign (its replacement links come from its config).

    Raises:
        ValueError: when the store has no leakage campaign with this id.
    """
    campaign = store.campaign(campaign_id)
    if campaign is None or campaign["kind"] != "leakage":
        raise ConfigurationError(f"{store.path} holds no leakage campaign {campaign_id!r}")
    links = [tuple(pair) for pair in campaign["config"].get("replacement_links", [])]
    return leakage_report(
        store.episodes(campaign_id),
        replacement_links=links,
        resamples=resamples,
        seed=bootstrap_seed,
    )
