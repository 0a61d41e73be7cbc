"""Bounded load on the local API from loopback: capabilities, search and read (following cursors)
mixed over many threads, stopping by itself after a fixed number of requests.

    python -m bench.reliability.load [--requests 5000] [--threads 16]

Prints the count of each status, the 5xx count and p50/p99 latencies per endpoint; exits 1 on any
5xx. The test suite runs a short version (tests/reliability/test_local_api.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bench.reliability.client import LocalApi, Reply

QUERIES = [
    "vacation policy",
    "How do I report a lost laptop?",
    "expenses receipts",
    "remote work equipment",
    "incident response on-call",
    "code review checklist",
    "年假 怎么 申请",
    "差旅 报销",
    "信息安全 密码",
    "onboarding first week",
    "nothing matches this zqxj",
]


@dataclass
class LoadResult:
    statuses: Counter = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    tokens_seen: set[str] = field(default_factory=set)  # references and cursors, for the leak check
    seconds: float = 0.0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.statuses.items() if status >= 500)

    @property
    def unanswered(self) -> int:
        return sum(n for (_, status), n in self.statuses.items() if status == 0)

    def percentile(self, endpoint: str, fraction: float) -> float:
        values = sorted(self.latencies[endpoint])
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(fraction * len(values)))]

    def report(self) -> str:
        every = [value for values in self.latencies.values() for value in values]
        self.latencies["all"] = every
        lines = [
            f"{self.requests} requests in {self.seconds:.1f} s ({self.requests / self.seconds:.0f}/s), "
            f"5xx: {self.server_errors}, unanswered (client timeout): {self.unanswered}",
            "statuses: " + ", ".join(f"{e} {s}: {n}" for (e, s), n in sorted(self.statuses.items())),
        ]
        for endpoint in ("capabilities", "search", "read", "all"):
            if self.latencies[endpoint]:
                lines.append(
                    f"{endpoint:>12}: n={len(self.latencies[endpoint])} "
                    f"p50={self.percentile(endpoint, 0.50) * 1000:.1f} ms "
                    f"p99={self.percentile(endpoint, 0.99) * 1000:.1f} ms "
                    f"mean={statistics.fmean(self.latencies[endpoint]) * 1000:.1f} ms"
                )
        del self.latencies["all"]
        return "\n".join(lines)


def run_load(api: LocalApi, requests: int, threads: int, seed: int = 7, progress: int = 0) -> LoadResult:
    result = LoadResult()
    started = time.perf_counter()
    lock = threading.Lock()
    budget = iter(range(requests))
    references: list[str] = []

    def record(endpoint: str, reply: Reply) -> None:
        with lock:
            result.statuses[(endpoint, reply.status)] += 1
            result.latencies[endpoint].append(reply.seconds)
            done = result.requests
        if progress and done % progress == 0:
            print(f"  {done} requests, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    def call(endpoint: str, send: Callable[[], Reply]) -> Reply | None:
        """A request that got no answer in time is a failure too (status 0), not a crash of the run."""
        started = time.perf_counter()
        try:
            reply = send()
        except OSError:
            reply = Reply(status=0, headers={}, body=b"", seconds=time.perf_counter() - started)
        record(endpoint, reply)
        return reply if reply.status else None

    def take() -> bool:
        with lock:
            return next(budget, None) is not None

    def worker(worker_id: int) -> None:
        rng = random.Random(seed * 1000 + worker_id)
        cursor: tuple[str, str] | None = None  # (ref, next cursor) of a chain this worker follows
        while take():
            roll = rng.random()
            if cursor and roll < 0.5:
                ref, next_cursor = cursor
                reply = call("read", partial(api.read, ref, next_cursor, max_bytes=4096))
                cursor = _continue(reply, ref, result, lock)
            elif roll < 0.2:
                call("capabilities", api.capabilities)
            elif roll < 0.6 or not references:
                query, limit = rng.choice(QUERIES), rng.randint(1, 3)
                reply = call("search", partial(api.search, query, limit=limit))
                if reply is not None and reply.status == 200:
                    refs = [hint["ref"] for hint in reply.json()["hints"]]
                    with lock:
                        references.extend(refs)
                        result.tokens_seen.update(refs)
                        del references[:-200]
            else:
                with lock:
                    ref = rng.choice(references)
                size = rng.choice([4096, 16384, 32768])
                reply = call("read", partial(api.read, ref, max_bytes=size))
                cursor = _continue(reply, ref, result, lock)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(worker, n) for n in range(threads)]:
            future.result()
    result.seconds = time.perf_counter() - started
    return result


def _continue(reply: Reply | None, ref: str, result: LoadResult, lock: threading.Lock) -> tuple[str, str] | None:
    if reply is None or reply.status != 200:
        return None
    next_cursor = reply.json()["next_cursor"]
    if next_cursor:
        with lock:
            result.tokens_seen.add(next_cursor)
        return ref, next_cursor
    return None


def with_local_api(run: Callable[[LocalApi], int], log: Path | None = None) -> int:
    with tempfile.TemporaryDirectory() as directory:
        api = LocalApi(log or Path(directory) / "harness.log")
        try:
            return run(api)
        finally:
            api.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bounded load on the local API")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--log", type=Path, help="keep the functions' log lines (harness stderr) in this file")
    arguments = parser.parse_args(argv)

    def run(api: LocalApi) -> int:
        result = run_load(api, arguments.requests, arguments.threads, arguments.seed, progress=250)
        print(f"load: {arguments.threads} threads, loopback, local API (gateway + handlers + moto server)")
        print(result.report())
        return 1 if result.server_errors or result.unanswered else 0

    return with_local_api(run, arguments.log)


if __name__ == "__main__":
    sys.exit(main())
