"""One place for the scaffolding the tests, the benchmarks and the local runtime share.

- `environment`: the dummy AWS environment (set it before anything imports boto3 or Powertools);
- `stacks`: the template's stack on in-process moto or on a moto server, caches reset around it;
- `functions`: function and sample-event loading, and one handler call as Lambda makes it;
- `lambda_context`: the Lambda context object;
- `local_api`: an HTTP client of the local API, and `agent-knowledge serve` in a subprocess;
- `fakes`: in-memory repositories and a clock moved by hand.

Names are imported on first use, so that importing one helper costs only its own module: the
environment must be set before boto3 or Powertools are imported, and bench/memory_child.py
measures what loading a handler costs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name → the submodule that defines it
_EXPORTS = {
    "DUMMY_AWS": "environment",
    "REAL_AWS_VARIABLES": "environment",
    "dummy_environment": "environment",
    "environment_without_aws": "environment",
    "use_dummy_environment": "environment",
    "FakeClock": "fakes",
    "MemoryBodies": "fakes",
    "MemoryDocuments": "fakes",
    "MemoryKnowledgeBases": "fakes",
    "MemoryRepositories": "fakes",
    "EVENTS": "functions",
    "PROJECT_ROOT": "functions",
    "FUNCTIONS": "functions",
    "HttpResult": "functions",
    "invoke_function": "functions",
    "load_event": "functions",
    "load_function": "functions",
    "load_module": "functions",
    "with_changes": "functions",
    "LambdaContext": "lambda_context",
    "LocalApiClient": "local_api",
    "Reply": "local_api",
    "ServedApi": "local_api",
    "cli_environment": "local_api",
    "free_port": "local_api",
    "start_server": "local_api",
    "InProcessStack": "stacks",
    "MotoServerStack": "stacks",
    "in_process_stack": "stacks",
    "moto_server_stack": "stacks",
    "reset_caches": "stacks",
}
__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from agent_knowledge_dev.testing.environment import DUMMY_AWS as DUMMY_AWS
    from agent_knowledge_dev.testing.environment import REAL_AWS_VARIABLES as REAL_AWS_VARIABLES
    from agent_knowledge_dev.testing.environment import dummy_environment as dummy_environment
    from agent_knowledge_dev.testing.environment import environment_without_aws as environment_without_aws
    from agent_knowledge_dev.testing.environment import use_dummy_environment as use_dummy_environment
    from agent_knowledge_dev.testing.fakes import FakeClock as FakeClock
    from agent_knowledge_dev.testing.fakes import MemoryBodies as MemoryBodies
    from agent_knowledge_dev.testing.fakes import MemoryDocuments as MemoryDocuments
    from agent_knowledge_dev.testing.fakes import MemoryKnowledgeBases as MemoryKnowledgeBases
    from agent_knowledge_dev.testing.fakes import MemoryRepositories as MemoryRepositories
    from agent_knowledge_dev.testing.functions import EVENTS as EVENTS
    from agent_knowledge_dev.testing.functions import FUNCTIONS as FUNCTIONS
    from agent_knowledge_dev.testing.functions import PROJECT_ROOT as PROJECT_ROOT
    from agent_knowledge_dev.testing.functions import HttpResult as HttpResult
    from agent_knowledge_dev.testing.functions import invoke_function as invoke_function
    from agent_knowledge_dev.testing.functions import load_event as load_event
    from agent_knowledge_dev.testing.functions import load_function as load_function
    from agent_knowledge_dev.testing.functions import load_module as load_module
    from agent_knowledge_dev.testing.functions import with_changes as with_changes
    from agent_knowledge_dev.testing.lambda_context import LambdaContext as LambdaContext
    from agent_knowledge_dev.testing.local_api import LocalApiClient as LocalApiClient
    from agent_knowledge_dev.testing.local_api import Reply as Reply
    from agent_knowledge_dev.testing.local_api import ServedApi as ServedApi
    from agent_knowledge_dev.testing.local_api import cli_environment as cli_environment
    from agent_knowledge_dev.testing.local_api import free_port as free_port
    from agent_knowledge_dev.testing.local_api import start_server as start_server
    from agent_knowledge_dev.testing.stacks import InProcessStack as InProcessStack
    from agent_knowledge_dev.testing.stacks import MotoServerStack as MotoServerStack
    from agent_knowledge_dev.testing.stacks import in_process_stack as in_process_stack
    from agent_knowledge_dev.testing.stacks import moto_server_stack as moto_server_stack
    from agent_knowledge_dev.testing.stacks import reset_caches as reset_caches


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
