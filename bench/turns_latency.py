"""Turn handler latency in-process against moto, for `inline` and `on_demand` delivery.

Every measured call is a NEW turn (its own client_turn_id and user_message_id), so it does the
whole preparation: identity, idempotency claims, run creation, retrieval, body reads (inline) or
hint fitting (on_demand), reference signing, the frozen-context write. Replays of a stored turn
are measured separately. Queries rotate over English and Chinese questions about the bundled
sample documents. Modes alternate call by call so both see the same machine noise. For scale,
the capabilities handler (identity revalidation and the scope: four reads) is timed alongside.
Powertools' metric lines go to a sink; only the report is printed.

    .venv/bin/python -m bench.turns_latency [--calls 60] [--warmup 10]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time
from typing import Any

from agent_knowledge_dev.handlers import load_event, load_function, with_changes
from agent_knowledge_dev.lambda_context import LambdaContext
from bench.environment import configure, local_stack

QUERIES = [
    "How many vacation days do I get and how do I request them?",
    "What is the expense reimbursement process?",
    "How should I respond to an incident?",
    "年假怎么申请？",
    "差旅报销需要哪些材料",
    "code review checklist",
]


def turn_event(base: dict[str, Any], mode: str, number: int) -> dict[str, Any]:
    body = {
        "client_conversation_id": "bench-conversation",
        "client_turn_id": f"{mode}-{number}",
        "user_message_id": f"{mode}-message-{number}",
        "user_input": QUERIES[number % len(QUERIES)],
        "knowledge_delivery": mode,
    }
    return with_changes(base, body=body)


def timed(handler: Any, event: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = handler(event, LambdaContext())
    elapsed = time.perf_counter() - started
    if result["statusCode"] != 200:
        raise SystemExit(f"turn failed: {result['statusCode']} {result['body']}")
    return elapsed


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples) * 1000, 2),
        "p90_ms": round(ordered[max(0, round(0.9 * len(ordered)) - 1)] * 1000, 2),
        "min_ms": round(ordered[0] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="measured calls per mode (≥ 50 for the report)")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured calls per mode first")
    arguments = parser.parse_args()

    configure()
    from agent_knowledge.core.observability import logger
    from agent_knowledge_dev.demo import seed_demo, seed_sample_documents

    logger.setLevel("WARNING")  # one INFO line per turn would be measured too
    with local_stack() as repositories:
        seed_demo(repositories)
        documents = seed_sample_documents(repositories)
        handler = load_function("turns").lambda_handler
        capabilities = load_function("capabilities").lambda_handler
        base = load_event("turns-on-demand")
        probe = load_event("capabilities-valid-bearer")

        modes = ("inline", "on_demand")
        samples: dict[str, list[float]] = {mode: [] for mode in (*modes, "capabilities")}
        with contextlib.redirect_stdout(io.StringIO()):
            for number in range(arguments.warmup):
                for mode in modes:
                    timed(handler, turn_event(base, mode, 1_000_000 + number))
                timed(capabilities, probe)
            for number in range(arguments.calls):
                for mode in modes:
                    samples[mode].append(timed(handler, turn_event(base, mode, number)))
                samples["capabilities"].append(timed(capabilities, probe))
            replays = [timed(handler, turn_event(base, "on_demand", n % 10)) for n in range(arguments.calls)]

    report = {
        "documents": documents,
        "new_turn": {mode: summary(samples[mode]) for mode in modes},
        "replay_on_demand": summary(replays),
        "capabilities_for_scale": summary(samples["capabilities"]),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
