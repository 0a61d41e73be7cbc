"""The handlers import Powertools' HTTP API resolver without the event handler package's others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    completed = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120, check=True
    )
    return completed.stdout.strip()


def test_the_http_surface_does_not_import_appsync_or_asyncio():
    code = (
        "import sys; import agent_knowledge.runtime.http; "
        "print(sorted(m for m in ('asyncio', 'aws_lambda_powertools.event_handler.appsync') if m in sys.modules))"
    )
    assert _run(code) == "[]"


def test_the_http_surface_imports_only_the_event_classes_the_resolver_uses():
    code = (
        "import sys; import agent_knowledge.runtime.http; "
        "prefix = 'aws_lambda_powertools.utilities.data_classes.'; "
        "print(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix)))"
    )
    loaded = _run(code)
    assert "api_gateway_proxy_event" in loaded
    for other in ("s3_event", "sqs_event", "kinesis_firehose_event", "connect_contact_flow_event", "ses_event"):
        assert other not in loaded


def test_the_data_classes_package_stays_complete_for_other_importers():
    code = (
        "import agent_knowledge.runtime.http\n"
        "from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2, S3Event, event_source\n"
        "from aws_lambda_powertools.utilities import data_classes\n"
        "assert data_classes.APIGatewayProxyEventV2 is APIGatewayProxyEventV2 and data_classes.SQSEvent\n"
        "print(S3Event.__module__, callable(event_source))"
    )
    assert _run(code) == "aws_lambda_powertools.utilities.data_classes.s3_event True"


def test_the_event_handler_package_stays_complete_for_other_importers():
    code = (
        "import agent_knowledge.runtime.http\n"
        "from aws_lambda_powertools.event_handler import AppSyncResolver, APIGatewayHttpResolver, Response\n"
        "from agent_knowledge.runtime import resolver\n"
        "assert APIGatewayHttpResolver is resolver.APIGatewayHttpResolver and Response is resolver.Response\n"
        "print(AppSyncResolver.__name__)"
    )
    assert _run(code) == "AppSyncResolver"


# The functions that never open an index must not pay for tantivy (nor the reader) at cold start.
NO_INDEX = ("capabilities", "read", "complete_run", "ingest")


def test_functions_that_open_no_index_do_not_import_tantivy():
    for name in NO_INDEX:
        code = (
            "import sys\n"
            f"sys.path.insert(0, {str(ROOT / 'functions' / name)!r})\n"
            "import app\n"
            "print(sorted(m for m in ('tantivy', 'agent_knowledge.retrieval.search') if m in sys.modules))"
        )
        assert _run(code) == "[]", name


def test_a_reexported_name_wins_over_its_submodule_imported_first():
    # `event_source` is both a submodule and the decorator `__init__` re-exports from it.
    code = (
        "import agent_knowledge.runtime.http\n"
        "import aws_lambda_powertools.utilities.data_classes.event_source\n"
        "from aws_lambda_powertools.utilities.data_classes import event_source\n"
        "print(callable(event_source), type(event_source).__name__)"
    )
    assert _run(code) == "True function"


def test_a_star_import_and_all_see_the_whole_package():
    full = _run("from aws_lambda_powertools.utilities.data_classes import *; print(sorted(dir()))")
    lazy = _run(
        "import agent_knowledge.runtime.http\n"
        "from aws_lambda_powertools.utilities.data_classes import *\n"
        "print(sorted(name for name in dir() if name != 'agent_knowledge'))"
    )
    assert lazy == full


def test_powertools_own_absolute_imports_of_a_reexported_name_stay_lazy():
    code = (
        "import sys; import agent_knowledge.runtime.http\n"
        "from aws_lambda_powertools.event_handler import Response\n"
        "from agent_knowledge.runtime.resolver import Response as Ours\n"
        "print(Response is Ours, 'asyncio' in sys.modules)"
    )
    assert _run(code) == "True False"


def test_names_resolve_from_several_threads_at_once():
    code = (
        "import threading, agent_knowledge.runtime.http\n"
        "from aws_lambda_powertools.utilities import data_classes\n"
        "names = ['S3Event', 'SQSEvent', 'event_source', 'KafkaEvent', 'SESEvent', 'DynamoDBStreamEvent'] * 3\n"
        "found = []\n"
        "threads = [threading.Thread(target=lambda n=n: found.append(getattr(data_classes, n))) for n in names]\n"
        "[t.start() for t in threads]; [t.join(timeout=60) for t in threads]\n"
        "print(len(found), sum(t.is_alive() for t in threads))"
    )
    assert _run(code) == "18 0"


def test_reexports_reads_relative_absolute_and_aliased_imports():
    from agent_knowledge.runtime.resolver import reexports

    source = (
        "from .alb_event import ALBEvent\n"
        "from pkg.sub.vpc import Lattice as VPCLattice\n"
        "from other.module import Outside\n"
        "import json\n"
    )
    assert reexports("pkg.sub", source) == {"ALBEvent": ("alb_event", "ALBEvent"), "VPCLattice": ("vpc", "Lattice")}
