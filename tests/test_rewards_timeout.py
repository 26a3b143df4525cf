# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Tests of the deadline pool that bounds the time of untrusted-input jobs (soft alarm, hard kill, crash)."""

from __future__ import annotations

import threading
import time

import pytest

from trl_srppo.rewards._timeout import DeadlinePool, WorkerStartError

MODULE = "trl_srppo.rewards._timeout"  # serves a diagnostic handler: echo, sleep, crash
SLACK = 4.0


@pytest.fixture
def pool():
    pools = []

    def make(**kwargs):
        pools.append(DeadlinePool(MODULE, **kwargs))
        return pools[-1]

    yield make
    for p in pools:
        p.close()


def test_hard_deadline_kills_and_replaces_a_stuck_worker(pool):
    p = pool(num_workers=2, deadline=0.5, args=["--soft-timeout", "60"])
    p.warm_up()
    start = time.monotonic()
    results = p.run([{"value": 1}, {"sleep": 60, "block_alarm": True, "value": 2}, {"value": 3}])
    elapsed = time.monotonic() - start
    assert [r["status"] for r in results] == ["ok", "timeout", "ok"]
    assert results[0]["echo"] == 1 and results[2]["echo"] == 3
    assert p.kills == 1
    assert elapsed < 0.5 + SLACK, elapsed
    assert [r["echo"] for r in p.run([{"value": v} for v in range(5)])] == list(range(5))


def test_soft_deadline_keeps_the_worker(pool):
    p = pool(num_workers=1, deadline=10.0, args=["--soft-timeout", "0.3"])
    p.warm_up()
    start = time.monotonic()
    results = p.run([{"sleep": 60, "value": 1}, {"value": 2}])
    assert time.monotonic() - start < 0.3 + SLACK
    assert [r["status"] for r in results] == ["timeout", "ok"]
    assert p.kills == 0


def test_crashed_worker_is_an_error_and_is_replaced(pool):
    p = pool(num_workers=1, deadline=5.0)
    results = p.run([{"crash": True}, {"value": 7}])
    assert results[0]["status"] == "error"
    assert results[1] == {"id": 1, "status": "ok", "echo": 7}


def test_deadline_holds_from_a_thread(pool):
    p = pool(num_workers=1, deadline=0.5, args=["--soft-timeout", "60"])
    p.warm_up()
    out = {}
    thread = threading.Thread(target=lambda: out.update(r=p.run([{"sleep": 60, "block_alarm": True}])))
    start = time.monotonic()
    thread.start()
    thread.join(timeout=60)
    assert time.monotonic() - start < 0.5 + SLACK
    assert out["r"][0]["status"] == "timeout"


def test_worker_that_cannot_start_raises(pool):
    p = pool(num_workers=1, deadline=1.0)
    p.module = "trl_srppo.rewards.no_such_module"
    with pytest.raises(WorkerStartError):
        p.run([{"value": 1}])


def test_bad_arguments():
    with pytest.raises(ValueError):
        DeadlinePool(MODULE, num_workers=0, deadline=1.0)
    with pytest.raises(ValueError):
        DeadlinePool(MODULE, num_workers=1, deadline=0)
