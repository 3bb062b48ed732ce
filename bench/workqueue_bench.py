"""Throughput of workqueue add/get/done cycles, against stdlib ``queue.SimpleQueue``.

The target is judged on the queue the operator runs: rate-limited, with its Prometheus metrics
(controller/machinery/prom_workqueue.py), with one worker and with the operator's default four.

Run: ``python -m bench.workqueue_bench``. Prints figures only; never fails on timing.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from bench.support.figures import record
from controller.machinery.prom_workqueue import PrometheusWorkqueueMetricsProvider
from workqueue import Queue, RateLimitingQueue

N = 200_000  # distinct keys per run
ROUNDS = 3  # best of, to dampen scheduler noise
TARGET = 100_000  # cycles/s for the operator's queue (rate-limited, Prometheus metrics)
OPERATOR_QUEUE = "rate_limiting_queue+prometheus (the operator's)"


def workqueue_rate(make: Callable[[], Queue[int]], workers: int) -> float:
    """Cycles/s: one producer adds N distinct keys, ``workers`` threads get/done to shutdown."""
    q = make()

    def worker() -> None:
        while True:
            item, _ = q.get()
            if item is None:  # shut down and empty
                return
            q.done(item)

    def produce() -> None:
        for i in range(N):
            q.add(i)
        q.shut_down()  # workers still drain what is queued

    return N / _elapsed(produce, worker, workers)


def simple_queue_rate(workers: int) -> float:
    """The same producer/consumer shape over ``queue.SimpleQueue`` (one sentinel per worker)."""
    q: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def worker() -> None:
        while q.get() is not None:
            pass

    def produce() -> None:
        for i in range(N):
            q.put(i)
        for _ in range(workers):
            q.put(None)

    return N / _elapsed(produce, worker, workers)


def _elapsed(produce: Callable[[], None], worker: Callable[[], None], workers: int) -> float:
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    threads.append(threading.Thread(target=produce))
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def best(run: Callable[[], float]) -> float:
    return max(run() for _ in range(ROUNDS))


def operator_queue() -> RateLimitingQueue[int]:
    """The operator's own configuration: named, with the Prometheus workqueue metrics."""
    provider = PrometheusWorkqueueMetricsProvider(CollectorRegistry())
    return RateLimitingQueue[int]("dgljob", metrics_provider=provider)


def main() -> None:
    print(f"python {sys.version.split()[0]}, N={N:,} keys, one producer, best of {ROUNDS}")
    cases: list[tuple[str, Callable[[], Queue[int]]]] = [
        ("queue", Queue[int]),
        ("rate_limiting_queue", RateLimitingQueue[int]),
        (OPERATOR_QUEUE, operator_queue),
    ]
    judged: dict[int, float] = {}
    for workers in (1, 4):
        baseline = best(functools.partial(simple_queue_rate, workers))
        print(f"stdlib SimpleQueue workers={workers}: {baseline:,.0f} cycles/s")
        for label, make in cases:
            rate = best(functools.partial(workqueue_rate, make, workers))
            if label == OPERATOR_QUEUE:
                judged[workers] = rate
            record(
                "workqueue_bench", f"{label} workers={workers}", rate, "cycles/s", baseline,
                "stdlib SimpleQueue",
            )  # fmt: skip
            print(
                f"{label} workers={workers}: {rate:,.0f} cycles/s "
                f"({rate / baseline:.2f}x stdlib SimpleQueue)"
            )
    for workers, rate in judged.items():
        verdict = "met" if rate >= TARGET else "NOT met"
        print(
            f"target >= {TARGET:,} cycles/s for the operator's queue, workers={workers} "
            f"({'its default --workers' if workers == 4 else 'one worker'}): {rate:,.0f}: {verdict}"
        )


if __name__ == "__main__":
    main()
