"""The four judge-free leakage diagnostics and their AVT-cluster bootstrap (paper Definitions
4-7, Theorem 1, A.4, Appendix E; docs/design.md section 8, Leakage diagnostics).

* :func:`run_leakage`, :class:`LeakageConfig` - run or resume a leakage campaign
  (:mod:`ambitab_gym.diagnostics.campaign`).
* :class:`LeakageReport`, :func:`leakage_report`, :func:`format_leakage_table` - dJ_resp,
  dRec_spec^Q, dJ_full and dRec_none with 95% percentile intervals
  (:mod:`ambitab_gym.diagnostics.estimates`).
* :func:`cluster_bootstrap`, :func:`union_clusters`, :class:`Interval` - the bootstrap
  (:mod:`ambitab_gym.diagnostics.bootstrap`).
* :class:`SchemaProbeAsker`, :class:`DialogueSQLSolver` - probes that make leaks visible
  (re-exported from :mod:`ambitab_gym.policies.probes`: they are agent-side policies).

Example:
    >>> import tempfile, os
    >>> from ambitab_gym.diagnostics import LeakageConfig, run_leakage
    >>> path = os.path.join(tempfile.mkdtemp(), "results.duckdb")
    >>> report = run_leakage(LeakageConfig("AmbiTab-TACO-v0", asker="full", limit=8),
    ...                      path, progress=False, resamples=100)
    >>> report.to_json()["d_j_resp"], report.reference_ok
    ({'mean': 0.0, 'lo': 0.0, 'hi': 0.0}, True)
"""

from __future__ import annotations

from ambitab_gym.diagnostics.bootstrap import (
    Interval,
    cluster_bootstrap,
    percentile_interval,
    resample_indices,
    union_clusters,
)
from ambitab_gym.diagnostics.campaign import LeakageConfig, run_leakage, stored_leakage_report
from ambitab_gym.diagnostics.estimates import (
    CONDITIONS,
    DIAGNOSTICS,
    Diagnostic,
    LeakageReport,
    format_leakage_table,
    leakage_report,
)
from ambitab_gym.policies.probes import DialogueSQLSolver, SchemaProbeAsker, find_sql

__all__ = [
    "CONDITIONS",
    "DIAGNOSTICS",
    "Diagnostic",
    "DialogueSQLSolver",
    "Interval",
    "LeakageConfig",
    "LeakageReport",
    "SchemaProbeAsker",
    "cluster_bootstrap",
    "find_sql",
    "format_leakage_table",
    "leakage_report",
    "percentile_interval",
    "resample_indices",
    "run_leakage",
    "stored_leakage_report",
    "union_clusters",
]
