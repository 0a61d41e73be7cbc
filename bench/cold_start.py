"""Figure 1 — cold start per handler against its floor, each in a fresh process.

Ours: import the handler module and handle its first request. Floor: import boto3 and
aws_lambda_powertools and create the same boto3 clients the handler's first request created.
Runs of ours and of the floor alternate, so both see the same machine noise; the figure is
the ratio of their medians, by wall clock and by the child's CPU time (steadier on a shared
machine: it leaves out time spent waiting for a core).

Two placements of the stack:
- `in_process` (the issue's setting): the child restores the seeded stack into moto inside
  itself before the clock starts. moto imports boto3/botocore, so neither side pays for that
  import here — a stricter ratio than a real Lambda cold start, where both do.
- `moto_server`: the stack runs in a separate moto server process (AWS_ENDPOINT_URL); the
  child imports everything itself, as a Lambda container does.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_knowledge_dev.testing import free_port
from bench import handlers, stack_dump
from bench.child import run_child
from bench.corpus import documents, known_item_queries
from bench.environment import BASE_ENVIRONMENT, local_stack
from bench.stats import ratio
from bench.warm import _quiet
from bench.workspace import ingest, seed_demo_workspace

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.5


def _run_child(spec: dict[str, Any], extra_env: dict[str, str]) -> dict[str, Any]:
    environment = {**os.environ, **BASE_ENVIRONMENT, **extra_env}
    if "AWS_ENDPOINT_URL" not in extra_env:
        environment.pop("AWS_ENDPOINT_URL", None)
    return run_child("bench.cold_child", [json.dumps(spec)], environment, timeout=120)


@contextmanager
def _moto_server(dump_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-p", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **BASE_ENVIRONMENT},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.2)
        subprocess.run(
            [sys.executable, "-m", "bench.stack_dump", "restore", str(dump_path), url],
            cwd=ROOT,
            env={**os.environ, **BASE_ENVIRONMENT},
            check=True,
            timeout=300,
        )
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _restored_environment(dump_path: Path, url: str) -> dict[str, str]:
    """The stack environment as the restore created it in the server (the secret ARN differs)."""
    import boto3

    arn = boto3.client("secretsmanager", endpoint_url=url).describe_secret(SecretId="agent-knowledge/server-token")
    environment = dict(stack_dump.load(dump_path)["environment"])
    environment["SERVER_TOKEN_SECRET_ID"] = arn["ARN"]
    return environment


def _request_event(handler: str, query: str) -> dict[str, Any]:
    if handler == "search":
        return handlers.event("search", {"query": query})
    if handler == "read":
        with _quiet():
            status, body = handlers.invoke("search", handlers.event("search", {"query": query}))
        assert status == 200, body
        return handlers.event("read", {"ref": json.loads(body)["hints"][0]["ref"]})
    if handler == "turns":
        event = handlers.event("turns")
        body = json.loads(event["body"])
        unique = uuid.uuid4().hex[:12]  # a new turn every run, never a replay or a conflict
        body["client_turn_id"], body["user_message_id"] = f"turn-{unique}", f"msg-{unique}"
        event["body"] = json.dumps(body)
        return event
    return handlers.event(handler)


def _measure(
    names: list[str], runs: int, query: str, placement: dict[str, Any], extra_env: dict[str, str], tracer: bool
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name in names:
        trial_spec = {"mode": "ours", "handler": name, "event": _request_event(name, query), **placement}
        trial = _run_child(trial_spec, extra_env)
        if trial["status"] != 200:
            raise RuntimeError(f"{name} answered {trial['status']} on its first request")
        services = trial["services"]
        ours: list[dict[str, Any]] = []
        floor: list[dict[str, Any]] = []
        for _ in range(runs):
            spec = {"mode": "ours", "handler": name, "event": _request_event(name, query), **placement}
            ours.append(_run_child(spec, extra_env))
            floor_spec = {"mode": "floor", "handler": name, "services": services, "tracer": tracer, **placement}
            floor.append(_run_child(floor_spec, extra_env))
        failed = [run for run in ours if run["status"] != 200]
        if failed:
            raise RuntimeError(f"{name} failed a cold start: {failed[0]}")
        ours_ms = [run["cold_seconds"] * 1000 for run in ours]
        floor_ms = [run["cold_seconds"] * 1000 for run in floor]
        figures[name] = {
            "services": services,
            "runs": runs,
            "ours_p50_ms": round(statistics.median(ours_ms), 1),
            "ours_import_p50_ms": round(statistics.median(run["import_seconds"] * 1000 for run in ours), 1),
            "ours_first_request_p50_ms": round(
                statistics.median(run["first_request_seconds"] * 1000 for run in ours), 1
            ),
            "floor_p50_ms": round(statistics.median(floor_ms), 1),
            "ratio": ratio(statistics.median(ours_ms), statistics.median(floor_ms)),
            "ours_cpu_p50_ms": round(statistics.median(run["cold_cpu_seconds"] * 1000 for run in ours), 1),
            "floor_cpu_p50_ms": round(statistics.median(run["cold_cpu_seconds"] * 1000 for run in floor), 1),
            "cpu_ratio": ratio(
                statistics.median(run["cold_cpu_seconds"] for run in ours),
                statistics.median(run["cold_cpu_seconds"] for run in floor),
            ),
            "ours_ms": [round(value, 1) for value in ours_ms],
            "floor_ms": [round(value, 1) for value in floor_ms],
        }
    return figures


PROFILES = {
    "full": {"handlers": handlers.HANDLERS, "runs": 5, "traced_runs": 1, "server": True, "documents": 60},
    "quick": {"handlers": handlers.HANDLERS, "runs": 1, "traced_runs": 0, "server": False, "documents": 20},
    "smoke": {"handlers": ("capabilities",), "runs": 1, "traced_runs": 0, "server": False, "documents": 3},
}


def run(profile: str = "full") -> dict[str, Any]:
    settings = PROFILES[profile]
    runs = settings["runs"]
    names = [name for name in settings["handlers"] if handlers.available(name)]
    docs = list(documents("en", settings["documents"], 4000, seed=3))
    query = known_item_queries([doc.body for doc in docs], 1, seed=5)[0]
    result: dict[str, Any] = {"handlers": names, "runs": runs, "query": query, "target_ratio": TARGET_RATIO}
    with tempfile.TemporaryDirectory(prefix="ak-bench-cold-") as scratch, local_stack() as repositories, _quiet():
        from agent_knowledge.repositories import aws
        from agent_knowledge_dev.template import environment_variables

        seed_demo_workspace(repositories)
        ingest(repositories, "handbook", docs)
        dump_path = Path(scratch) / "stack.pickle"
        environment = {name: os.environ[name] for name in environment_variables() if name in os.environ}
        stack_dump.save(stack_dump.dump(aws.client, environment), dump_path)
        in_process = {"dump": str(dump_path)}
        result["in_process"] = _measure(names, runs, query, in_process, {}, tracer=False)
        if settings["traced_runs"]:
            traced_env = {"POWERTOOLS_TRACE_DISABLED": "false"}
            result["in_process_traced"] = _measure(names, settings["traced_runs"], query, in_process, traced_env, True)
        if settings["server"]:
            with _moto_server(dump_path) as url:
                server_env = {**_restored_environment(dump_path, url), "AWS_ENDPOINT_URL": url}
                result["moto_server"] = _measure(names, runs, query, {"dump": None}, server_env, tracer=False)
    result["met"] = all(figure["ratio"] <= TARGET_RATIO for figure in result["in_process"].values())
    return result
