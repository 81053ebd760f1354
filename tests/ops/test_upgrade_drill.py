"""The drill's upgrade phase, short form: the previous release upgraded under load.

A cluster whose every process runs the previous release (``scripts.cluster``:
PostgreSQL primary and synchronous standby, Redis with Sentinels, two web
processes, two workers) is upgraded as docs/upgrading.md says, while one
client per web process writes and reads back: ``ownsona migrate``, then
each worker, then each web process replaced in turn. No write may fail or be
lost, none stored twice, no id reused (issue 33: c098406 -> 6540e3c failed 4
of 721 writes). ``python -m scripts.cluster.upgrade_drill`` is the long form.
"""

from __future__ import annotations

import asyncio

import pytest

from scripts.cluster.drill import DrillConfig
from scripts.cluster.redis_nodes import redis_server_available
from scripts.cluster.upgrade_drill import UpgradeDrill, running_previous_release, writes_failed

pytestmark = pytest.mark.skipif(
    not redis_server_available(),
    reason="redis-server is not installed (apt-get install redis-server)",
)


def test_a_rolling_upgrade_from_the_previous_release_fails_and_loses_no_write() -> None:
    config = DrillConfig(clients=2, warm_s=2.0, settle_s=2.0, recover_timeout_s=600)
    with running_previous_release() as cluster:
        drill = UpgradeDrill(cluster, config, cluster.tokens(config.clients))
        result = asyncio.run(drill.upgrade())
    assert result.acked > 0, result
    assert writes_failed(result) == 0, result.errors
    assert (result.lost, result.reused, result.duplicated) == (0, 0, 0), result
    assert (result.http_500, result.hangs, result.ryw_violations) == (0, 0, 0), result
