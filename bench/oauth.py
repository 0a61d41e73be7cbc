"""What OAuth resource-server mode costs a warm MCP search (issue 34): the CPU and wall time of
`knowledge_search` through functions/mcp with a JWT access token, against the same search with a
session token; target: JWT CPU ≤ 1.1x session CPU, the JWKS cached.

`python -m bench.oauth [--profile full|quick|smoke] [--output FILE]`

An in-process moto stack with the demo workspace and synthetic English documents in `handbook`
(`bench.workspace.handbook_stack`), its functions in OAuth mode with a local test issuer
(`agent_knowledge_dev.oauth_issuer`: ES256, its discovery document and JWKS served on loopback over
real HTTP, fetched once by the first JWT call). The token's subject, roles and tenant are the demo
session's principal, so both searches see the same documents. After one warm-up round of both,
rounds alternate session, JWT per query; per query the median over rounds of `time.process_time`
(moto runs in-process, so the process CPU holds all the work) and wall, then the median over
queries. Beside it, the validation alone (`OAuthValidator.validate`: header, key, ES256 signature,
claims) per call. A session search reads the session by token hash in its first round trip; a JWT
search reads no session, and its client in the first round trip instead of the second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

PROFILES: dict[str, dict[str, Any]] = {
    "full": {"handbook": "quick", "rounds": 25, "validations": 2000},
    "quick": {"handbook": "quick", "rounds": 7, "validations": 500},
    "smoke": {"handbook": "smoke", "rounds": 2, "validations": 20},
}
TARGET_RATIO = 1.1


@contextmanager
def local_issuer() -> Iterator[Any]:
    """A LocalIssuer whose discovery document and JWKS a loopback HTTP server answers."""
    from agent_knowledge_dev.oauth_issuer import served_issuer

    with served_issuer() as served:
        yield served.issuer


def _search_event(query: str, token: str) -> dict[str, Any]:
    from agent_knowledge_dev.handlers import load_event, with_changes

    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "knowledge_search", "arguments": {"query": query, "limit": 3}},
    }
    return with_changes(load_event("mcp-search"), body=message, authorization=f"Bearer {token}")


def _timed(event: dict[str, Any]) -> tuple[float, float, list[str]]:
    from agent_knowledge_dev.handlers import invoke_function

    cpu, wall = time.process_time(), time.perf_counter()
    result = invoke_function("mcp", event)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if result.status != 200:
        raise RuntimeError(f"search answered {result.status}")
    answer = json.loads(result.body)["result"]
    if answer["isError"]:
        raise RuntimeError("search answered a tool error")
    return cpu, wall, [hint["title"] for hint in answer["structuredContent"]["hints"]]


def run(profile: str = "full") -> dict[str, Any]:
    from agent_knowledge.identity.oauth import oauth_config, validator_for
    from agent_knowledge.runtime.container import reset_container_caches
    from agent_knowledge.settings import get_settings
    from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_TOKEN
    from bench.workspace import handbook_stack

    settings = PROFILES[profile]
    # The OAUTH_* variables set below are undone on the way out (the whole environment restored).
    with local_issuer() as issuer, mock.patch.dict(os.environ):
        with handbook_stack(settings["handbook"]) as handbook:
            # The template's OAuth parameters, as a deployment with an issuer sets them (the stack
            # sets the defaults, bearer-token mode), read by a new container.
            os.environ.update({"OAUTH_ISSUER": issuer.issuer, "OAUTH_AUDIENCE": issuer.audience})
            reset_container_caches()
            # The demo session's principal (agent_knowledge_dev.demo): the same documents visible.
            jwt, _ = issuer.mint("demo-user", ["member"], "demo", DEMO_CLIENT, ttl_seconds=3600)
            tokens = {"session": DEMO_TOKEN, "jwt": jwt}
            events = {mode: [_search_event(q, token) for q in handbook.queries] for mode, token in tokens.items()}
            titles = {mode: [_timed(event)[2] for event in events[mode]] for mode in tokens}  # warm-up
            if titles["session"] != titles["jwt"]:
                raise RuntimeError("the JWT search and the session search answered differently")
            samples: dict[str, list[list[tuple[float, float]]]] = {
                mode: [[] for _ in handbook.queries] for mode in tokens
            }
            for _ in range(settings["rounds"]):
                for number in range(len(handbook.queries)):
                    for mode in tokens:
                        cpu, wall, _ = _timed(events[mode][number])
                        samples[mode][number].append((cpu, wall))
            config = oauth_config(get_settings())  # the container's, as its searches above validated with
            assert config is not None
            validator = validator_for(config)
            validations = []
            for _ in range(settings["validations"]):
                started = time.process_time()
                validator.validate(jwt, time.time())
                validations.append(time.process_time() - started)
            documents, queries = handbook.documents, len(handbook.queries)
    figures: dict[str, Any] = {}
    for mode, per_query in samples.items():
        cpu = [statistics.median(cpu for cpu, _ in runs) for runs in per_query]
        wall = [statistics.median(wall for _, wall in runs) for runs in per_query]
        figures[mode] = {
            "cpu_median_ms": round(statistics.median(cpu) * 1000, 3),
            "wall_median_ms": round(statistics.median(wall) * 1000, 3),
        }
    base = figures["session"]["cpu_median_ms"]
    ratio = round(figures["jwt"]["cpu_median_ms"] / base, 3) if base else None
    return {
        "profile": profile,
        "documents": documents,
        "queries": queries,
        "rounds": settings["rounds"],
        "search": figures,
        "cpu_ratio_jwt_to_session": ratio,
        "target_ratio": TARGET_RATIO,
        "target_met": ratio is not None and ratio <= TARGET_RATIO,
        "validate_cpu_median_us": round(statistics.median(validations) * 1e6, 1),
        "validations": len(validations),
    }


def main() -> None:
    from bench.environment import configure

    configure()  # before anything imports boto3 or Powertools (run() imports them)
    parser = argparse.ArgumentParser(prog="python -m bench.oauth", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--output", type=Path, help="write the result as JSON here too")
    arguments = parser.parse_args()
    from bench.report import commit

    result = {
        "commit": commit(),  # "+dirty": the shared tree held uncommitted changes (other sessions')
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "result": run(arguments.profile),
        "load_average_after": os.getloadavg(),
    }
    text = json.dumps(result, indent=2)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
