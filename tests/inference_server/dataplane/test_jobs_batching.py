# SPDX-License-Identifier: GPL-3.0-or-later
"""The job manager's dynamic batcher on its own (no model): which queued jobs run together."""

import asyncio
import threading
import time

from inference_server.dataplane.jobs import DONE, BatchItem, JobManager


def item(key, groups: list):
    def run_batch(jobs, inputs):
        groups.append(inputs)
        return [f"maps of {i}" for i in inputs]

    return BatchItem(key, lambda job: job.id, run_batch, lambda job, result: result.upper())


async def run_all(jobs: JobManager, specs, hold: threading.Event | None = None):
    """Admit and run (id, work) pairs; with ``hold`` a first plain job keeps the worker busy."""
    tasks = []
    if hold is not None:
        blocker = jobs.admit("hold", "infer", "x")
        tasks.append(asyncio.create_task(jobs.run(blocker, lambda job: hold.wait(10))))
        await asyncio.sleep(0.05)
    for job_id, work in specs:
        tasks.append(asyncio.create_task(jobs.run(jobs.admit(job_id, "infer", "m"), work)))
    await asyncio.sleep(0.05)
    if hold is not None:
        hold.set()
    return await asyncio.gather(*tasks)


def test_queued_items_with_one_key_run_together_up_to_max_batch():
    jobs, groups = JobManager(max_concurrency=1, max_queue=16, max_batch=4), []
    specs = [(f"a{i}", item("A", groups)) for i in range(5)] + [("b0", item("B", groups))]
    answers = asyncio.run(run_all(jobs, specs, threading.Event()))
    assert answers[1:] == [f"MAPS OF A{i}" for i in range(5)] + ["MAPS OF B0"]
    assert groups == [["a0", "a1", "a2", "a3"], ["a4"], ["b0"]]
    assert [jobs.get(f"a{i}").batch_size for i in range(5)] == [4, 4, 4, 4, 1]
    assert jobs.get("hold").batch_size is None and jobs.get("a0").state == DONE
    assert jobs.batch_stats() == {"max_batch": 4, "batch_window_ms": 5.0, "batches": 1,
                                  "batched_requests": 4, "largest_batch": 4}


def test_max_batch_one_disables_and_a_lone_request_is_not_delayed():
    jobs, groups = JobManager(max_concurrency=1, max_batch=1), []
    asyncio.run(run_all(jobs, [(f"a{i}", item("A", groups)) for i in range(3)], threading.Event()))
    assert groups == [["a0"], ["a1"], ["a2"]]
    jobs, groups = JobManager(max_concurrency=1, max_batch=4, batch_window_s=0.005), []
    start = time.perf_counter()
    asyncio.run(run_all(jobs, [("alone", item("A", groups))]))
    assert groups == [["alone"]] and time.perf_counter() - start < 0.5  # 50 ms of it is the test's own sleep
