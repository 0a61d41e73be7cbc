"""One cold start, in a fresh process: `python -m bench.cold_child SPEC_JSON`.

SPEC: {"mode": "ours" | "floor" | "libraries", "handler": name, "event": {...} (ours), "record":
bool (ours: record the AWS calls the request makes), "services": [...], "calls": [...], "config":
{...} (floor, libraries)}. All run against the moto server named by AWS_ENDPOINT_URL.

Ours: import functions/<handler>/app.py and handle its first request. Floor: import botocore only,
create the same clients with the same Config the layer creates (repositories/aws.py), and make the
calls the product made for that request (recorded by a first run of ours), one after another.
Libraries: the floor after the least any handler on our libraries does — one pydantic model
validated, Powertools' Logger and Metrics created, its HTTP API resolver imported — a reference
for how much of a cold start those libraries alone take, not a floor for ours.

Prints one line `BENCH_RESULT {json}`: `cold_seconds` / `cold_cpu_seconds` run from just before the
first import of the measured side to the end of its request.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import base64  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.child import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BYTES = "__bytes_b64__"


# This child keeps its own minimal Lambda context and handler loader on purpose: it measures the
# cold import, so it must not import anything the handler does not (agent_knowledge_dev.stacks
# would bring yaml, http.client and subprocess in before the clock starts).
class _Context:
    function_name = "bench"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "bench-request-id"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 15_000


def encode(value: Any) -> Any:
    """Call parameters as JSON: bytes (S3 bodies, DynamoDB binary values) as tagged base64."""
    if isinstance(value, bytes | bytearray):
        return {BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {BYTES}:
            return base64.b64decode(value[BYTES])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def _ours(handler: str, event: dict[str, Any], record: bool) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"function_{handler}_app", ROOT / "functions" / handler / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    imported = time.perf_counter()
    aws = sys.modules["agent_knowledge.repositories.aws"]
    calls: list[Any] = []
    if record:
        # The clients a function certainly uses exist after import (created at init); the
        # recorder is only on the trial run, never on a measured one.
        def remember(params: dict[str, Any], model: Any, **_: Any) -> None:
            calls.append([model.service_model.service_name, model.name, encode(params)])

        # A client created later, during the request, copies the session's hooks.
        emitters = [client.meta.events for client in aws._clients.values()]
        if aws._session is not None:
            emitters.append(aws._session.get_component("event_emitter"))
        for emitter in emitters:
            emitter.register("provide-client-params", remember)
    response = module.lambda_handler(event, _Context())
    outcome: dict[str, Any] = {
        "imported_at": imported,
        "status": response["statusCode"],
        "services": sorted(aws._clients),  # every client the container created by then
    }
    if record:
        outcome["calls"] = calls
    if response["statusCode"] != 200:
        outcome["body"] = response.get("body", "")[:500]
    return outcome


def _floor(services: list[str], calls: list[Any], config: dict[str, Any]) -> dict[str, Any]:
    import botocore.session
    from botocore import xform_name
    from botocore.config import Config
    from botocore.exceptions import ClientError

    session = botocore.session.get_session()
    settings = Config(
        retries={"mode": "standard", "total_max_attempts": config["max_attempts"]},
        connect_timeout=config["connect_timeout"],
        read_timeout=config["read_timeout"],
        max_pool_connections=config["max_pool_connections"],
    )
    clients = {service: session.create_client(service, config=settings) for service in services}
    errors = 0
    for service, operation, params in calls:
        try:
            response = getattr(clients[service], xform_name(operation))(**decode(params))
        except ClientError:
            errors += 1  # e.g. a replayed conditional write; the round trip was made all the same
            continue
        body = response.get("Body")
        if body is not None:
            body.read()
    return {"imported_at": None, "status": None, "services": services, "calls_made": len(calls), "errors": errors}


def _libraries(services: list[str], calls: list[Any], config: dict[str, Any]) -> dict[str, Any]:
    from pydantic import BaseModel

    class Probe(BaseModel):
        name: str
        size: int

    Probe.model_validate({"name": "probe", "size": 1})
    from aws_lambda_powertools import Logger, Metrics

    Logger()
    Metrics()
    # Powertools' HTTP API resolver, imported as the handlers import it.
    import aws_lambda_powertools.event_handler.api_gateway  # noqa: F401

    return _floor(services, calls, config)


def main() -> None:
    spec = json.loads(sys.argv[1])
    ready, ready_cpu = time.perf_counter(), time.process_time()
    if spec["mode"] == "ours":
        outcome = _ours(spec["handler"], spec["event"], spec.get("record", False))
    elif spec["mode"] == "libraries":
        outcome = _libraries(spec["services"], spec["calls"], spec["config"])
    else:
        outcome = _floor(spec["services"], spec["calls"], spec["config"])
    done, done_cpu = time.perf_counter(), time.process_time()
    imported = outcome.pop("imported_at")
    # Where the measured code came from, so the parent can check it was the layer under test.
    outcome["loaded_from"] = {
        name: getattr(sys.modules.get(name), "__file__", None)
        for name in ("botocore", "pydantic", "aws_lambda_powertools", "agent_knowledge")
        if name in sys.modules
    }
    result = {
        **outcome,
        "setup_seconds": ready - STARTED,
        "cold_seconds": done - ready,
        "cold_cpu_seconds": done_cpu - ready_cpu,
        "import_seconds": (imported - ready) if imported else None,
        "first_request_seconds": (done - imported) if imported else None,
    }
    sys.stdout.flush()
    report(result)


if __name__ == "__main__":
    main()
