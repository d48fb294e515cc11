"""The bundled corpora, for tests parametrized over all six env ids."""

from __future__ import annotations

import pytest

from ambitab_gym.corpora import ENV_IDS, load_corpus

ALL_ENV_IDS = list(ENV_IDS)


def corpus_records(env_id: str):
    """(env_id, record) pairs over every bundled record of an env id."""
    return [(env_id, r.id) for r in load_corpus(env_id).records]


def every_record():
    """pytest params: one per bundled record of every corpus."""
    params = []
    for env_id in ALL_ENV_IDS:
        for _, record_id in corpus_records(env_id):
            params.append(pytest.param(env_id, record_id, id=f"{ENV_IDS[env_id]}:{record_id}"))
    return params
