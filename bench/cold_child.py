"""One cold start, in a fresh process: `python -m bench.cold_child SPEC_JSON`.

SPEC: {"mode": "ours" | "floor", "handler": name, "event": {...}, "services": [...],
"dump": path or null (restore it into in-process moto first), "tracer": bool (floor only)}.

Prints one line `BENCH_RESULT {json}`: `cold_seconds` is import + first request handled
(ours) or import of boto3 and Powertools + creating the same clients (floor), measured from
the moment the stack is ready; `setup_seconds` is what the in-process moto setup took before.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.child import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# This child keeps its own minimal Lambda context and handler loader on purpose: it measures the
# cold import, so it must not import anything the handler does not (agent_knowledge_dev.testing
# would bring yaml, http.client and subprocess in before the clock starts).
class _Context:
    function_name = "bench"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "bench-request-id"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 15_000


def _in_process_stack(dump_path: str) -> None:
    # moto imports boto3 and botocore: from here on both variants have them loaded already.
    import boto3
    from moto import mock_aws

    from bench import stack_dump

    mock_aws().start()
    session = boto3.session.Session()
    environment = stack_dump.restore(stack_dump.load(Path(dump_path)), session.client)
    os.environ.update(environment)


def _ours(handler: str, event: dict[str, Any]) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"function_{handler}_app", ROOT / "functions" / handler / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    imported = time.perf_counter()
    response = module.lambda_handler(event, _Context())
    clients = sorted(
        sys.modules["agent_knowledge.repositories.aws"]._clients
    )  # which clients the first request created
    outcome = {"imported_at": imported, "status": response["statusCode"], "services": clients}
    if response["statusCode"] != 200:
        outcome["body"] = response.get("body", "")[:500]
    return outcome


def _floor(services: list[str], tracer: bool) -> dict[str, Any]:
    import aws_lambda_powertools
    import boto3

    for service in services:
        boto3.client(service)
    if tracer:
        aws_lambda_powertools.Tracer(patch_modules=["botocore"])
    return {"imported_at": None, "status": None, "services": services}


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec.get("dump"):
        _in_process_stack(spec["dump"])
    ready, ready_cpu = time.perf_counter(), time.process_time()
    if spec["mode"] == "ours":
        outcome = _ours(spec["handler"], spec["event"])
    else:
        outcome = _floor(spec["services"], spec.get("tracer", False))
    done, done_cpu = time.perf_counter(), time.process_time()
    imported = outcome.pop("imported_at")
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
