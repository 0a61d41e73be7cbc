"""Call paths (issue 37): how many of the project's modules one document change and one search
cross, and how often control passes from one module to another on the way.

`python -m bench.call_paths [--list] [--output FILE]`

The stack: in-process moto from template.yaml (`bench.environment.local_stack`, the stack the tests
and the other benchmarks use, with its default local embedding model), the demo workspace (route,
client, session, KB `handbook`), DOCUMENTS synthetic documents put into the sources bucket and
carried through the pipeline the local runner drives (`agent_knowledge_dev.event_sources`: S3 event
→ source queue → ingest function → indexing queue → indexer function), so the KB has a published
generation with vectors. Then each path is run once to warm up and once measured:

1. A document change: an existing object of the sources bucket is overwritten (outside the
   measurement); measured is the local runner's `run_until_idle()`, which hands the S3 event to the
   ingest function's handler as an SQS event, then the indexing queue's messages the ingest sent to
   the indexer function's handler, which publishes the next generation (lexical, then its vectors).
2. A search: the search function's `lambda_handler` with the API Gateway event of
   `events/search-english-query.json` (as the tests invoke it) and a known-item query, warm (the
   same request was answered just before).

How it counts: a profile function (`sys.setprofile` for the measuring thread, `threading.setprofile`
for every thread started after the benchmark began, so the thread pools' workers too) sees Python's
call and return events. Only frames whose code is the project's own are kept: a file of the layer
package (shared/agent_knowledge, named by its import name, `agent_knowledge.indexer.writer`) or a
function's handler (functions/<name>/app.py, named `functions.<name>.app`). For each kept event the
"caller" is the nearest kept frame below it on its thread's stack (botocore, moto, the standard
library and the local runner in between are looked through). Per path:

- modules: the distinct project modules any kept frame ran in;
- module-to-module calls: call events whose module differs from their caller's (a generator's
  resumption is a call event, so iterating another module's generator counts each step);
- module-to-module returns: return events back into a different module — the matching returns
  (a yield is a return event; an exception propagating out is one too), so they equal the calls
  unless a frame is left by other means;
- function calls: new frames of project code, not counting generator resumptions, nor
  comprehension and generator-expression frames (3.11 gives them frames, 3.12 inlines
  comprehensions; their module is their enclosing function's, so they never change module);
  lambdas count, and a lambda called from another module is a module-to-module call;
- entries: calls into project code with no project frame below them on their thread: the handler
  called by the runner or the test harness, and work run on a thread pool's worker (which is not
  counted as a module-to-module call, since no project frame on that thread made it).

Each path runs once after its warm-up; the figures are the same on every run (the documents, the
changed object and the query come from fixed seeds). `--list` prints each path's module-to-module
calls in order, indented by nesting, for reading.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

KB = "handbook"  # the demo workspace's KB, which its route and session search
DOCUMENTS = 6
DOCUMENT_CHARS = 2500
PATHS = ("document_change", "search")
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
EXPRESSION_FRAMES = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


class ProjectModules:
    """The project module a code object belongs to, or None for everyone else's code."""

    def __init__(self) -> None:
        import agent_knowledge
        from agent_knowledge_dev.handlers import FUNCTIONS

        package = Path(agent_knowledge.__file__).resolve().parent
        self._package_root = str(package.parent) + os.sep
        self._package_prefix = str(package) + os.sep
        self._functions_prefix = str(FUNCTIONS.resolve()) + os.sep
        self._known: dict[CodeType, str | None] = {}

    def of(self, code: CodeType) -> str | None:
        try:
            return self._known[code]
        except KeyError:
            module = self._known[code] = self._name(code.co_filename)
            return module

    def _name(self, filename: str) -> str | None:
        if filename.startswith(self._package_prefix) and filename.endswith(".py"):
            dotted = filename[len(self._package_root) : -len(".py")].replace(os.sep, ".")
            return dotted.removesuffix(".__init__")
        if filename.startswith(self._functions_prefix) and filename.endswith(os.sep + "app.py"):
            return "functions." + filename[len(self._functions_prefix) : -len(".py")].replace(os.sep, ".")
        return None


@dataclass(frozen=True)
class Event:
    thread: int
    kind: str  # "call" or "return"
    module: str
    caller: str | None  # the nearest project frame's module below it; None: an entry
    function: str
    new_frame: bool  # a call that starts a frame (not a generator's resumption)

    @property
    def crosses_modules(self) -> bool:
        return self.caller is not None and self.caller != self.module

    @property
    def starts_a_function(self) -> bool:
        return self.kind == "call" and self.new_frame and self.function.rsplit(".", 1)[-1] not in EXPRESSION_FRAMES


@dataclass
class PathCount:
    modules: list[str]
    module_calls: int
    module_returns: int
    function_calls: int
    entries: int
    entered_from_other_modules: dict[str, int]
    sequence: list[str] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        return {
            "modules": len(self.modules),
            "module_to_module_calls": self.module_calls,
            "module_to_module_returns": self.module_returns,
            "function_calls": self.function_calls,
            "entries": self.entries,
            "module_list": self.modules,
            "entered_from_other_modules": self.entered_from_other_modules,
        }


def count(events: list[Event]) -> PathCount:
    crossings = [event for event in events if event.kind == "call" and event.crosses_modules]
    return PathCount(
        modules=sorted({event.module for event in events}),
        module_calls=len(crossings),
        module_returns=sum(1 for event in events if event.kind == "return" and event.crosses_modules),
        function_calls=sum(1 for event in events if event.starts_a_function),
        entries=sum(1 for event in events if event.kind == "call" and event.caller is None),
        entered_from_other_modules=dict(Counter(event.module for event in crossings).most_common()),
        sequence=_sequence(events),
    )


def _sequence(events: list[Event]) -> list[str]:
    """Entries and module-to-module calls in order, indented by how many of them are open."""
    lines: list[str] = []
    depth: dict[int, int] = {}
    for event in events:
        if event.caller == event.module:
            continue
        level = depth.get(event.thread, 0)
        if event.kind == "return":
            depth[event.thread] = level - 1
            continue
        origin = "entry" if event.caller is None else f"from {event.caller}"
        thread = "" if event.thread == threading.main_thread().ident else f"  [thread {event.thread}]"
        lines.append(f"{'  ' * level}{event.module}:{event.function}  ({origin}){thread}")
        depth[event.thread] = level + 1
    return lines


class CallRecorder:
    """Python call and return events of project code, on every thread, while `recording()` is open."""

    def __init__(self) -> None:
        self._modules = ProjectModules()
        self._events: list[Event] = []
        self._suspended: dict[int, FrameType] = {}  # generator frames seen; held so ids stay unique
        self._on = False

    def install(self) -> None:
        """Before any thread the measured paths use is started: a thread takes its profile function
        when it starts, and Python 3.11 cannot give one to a running thread."""
        threading.setprofile(self._profile)

    def uninstall(self) -> None:
        threading.setprofile(None)

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[Event]]:
        self._events, self._on = [], True
        sys.setprofile(self._profile)
        try:
            yield self._events
        finally:
            sys.setprofile(None)
            self._on = False
            self._suspended.clear()

    def _profile(self, frame: FrameType, event: str, _: Any) -> None:
        if not self._on or event.startswith("c_"):
            return
        code = frame.f_code
        module = self._modules.of(code)
        if module is None:
            return
        new_frame = True
        if event == "call" and code.co_flags & GENERATOR_FLAGS:
            new_frame = self._suspended.get(id(frame)) is not frame
            self._suspended[id(frame)] = frame
        # list.append is atomic: the pools' threads record into the same list.
        self._events.append(
            Event(threading.get_ident(), event, module, self._caller(frame), code.co_qualname, new_frame)
        )

    def _caller(self, frame: FrameType) -> str | None:
        below = frame.f_back
        while below is not None:
            module = self._modules.of(below.f_code)
            if module is not None:
                return module
            below = below.f_back
        return None


@dataclass
class Workspace:
    repositories: Any
    pipeline: Any  # tests.support.pipeline.Pipeline: the sources bucket and the local runner
    documents: list[Any]
    query: str


def _populate(repositories: Any, environment: dict[str, str]) -> Workspace:
    from tests.support.pipeline import start_pipeline

    from bench.corpus import documents, known_item_queries
    from bench.workspace import seed_demo_workspace

    seed_demo_workspace(repositories)
    pipeline = start_pipeline(environment)
    docs = list(documents("en", DOCUMENTS, DOCUMENT_CHARS, seed=37))
    for doc in docs:
        pipeline.put(f"{KB}/{doc.source_key}", doc.body)
    pipeline.run()
    (query,) = known_item_queries([docs[0].body], 1, seed=37)
    return Workspace(repositories, pipeline, docs, query)


def _change(workspace: Workspace, number: int, revision: str) -> None:
    """Overwrite the sources bucket's object of document `number` (its S3 event is queued)."""
    doc = workspace.documents[number]
    workspace.pipeline.put(f"{KB}/{doc.source_key}", f"{doc.body}\n\nRevision {revision}.\n")


def _search(query: str) -> None:
    from bench import handlers

    status, body = handlers.invoke("search", handlers.event("search", {"query": query}))
    if status != 200:
        raise RuntimeError(f"search answered {status}: {body}")


def measure() -> dict[str, PathCount]:
    """Both paths on a fresh stack, each once after its warm-up. The figures are a fresh process's
    (`main`): a thread pool whose workers started before `install()` is not seen."""
    from agent_knowledge_dev.stacks import in_process_stack
    from bench.environment import SERVER_TOKEN, quiet

    recorder = CallRecorder()
    recorder.install()
    try:
        with in_process_stack(server_token=SERVER_TOKEN) as stack, quiet():
            workspace = _populate(stack.repositories, stack.environment)
            _change(workspace, 1, "warm-up")
            workspace.pipeline.run()
            _change(workspace, 2, "measured")
            generation = stack.repositories.knowledge_bases.get(KB).generation
            with recorder.recording() as change_events:
                workspace.pipeline.run()
            if stack.repositories.knowledge_bases.get(KB).generation <= generation:
                raise RuntimeError("the measured change published no generation")
            _search(workspace.query)
            with recorder.recording() as search_events:
                _search(workspace.query)
    finally:
        recorder.uninstall()
    return {"document_change": count(change_events), "search": count(search_events)}


def table(counts: dict[str, PathCount]) -> str:
    rows = [
        "| path | modules | module-to-module calls | module-to-module returns | function calls | entries |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, path in counts.items():
        rows.append(
            f"| {name} | {len(path.modules)} | {path.module_calls} | {path.module_returns} | "
            f"{path.function_calls} | {path.entries} |"
        )
    return "\n".join(rows)


def main() -> None:
    from bench.environment import configure

    configure()  # before anything imports boto3 or Powertools (measure() imports them)
    parser = argparse.ArgumentParser(prog="python -m bench.call_paths", description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each path's module-to-module calls in order")
    parser.add_argument("--output", type=Path, help="write the JSON summary here too")
    arguments = parser.parse_args()
    from bench.report import commit

    counts = measure()
    if arguments.list:
        for name, path in counts.items():
            print(f"## {name}\n" + "\n".join(path.sequence) + "\n")
    result = {
        "commit": commit(),  # "+dirty": the tree held uncommitted changes
        "python": platform.python_version(),
        "paths": {name: path.summary() for name, path in counts.items()},
    }
    text = json.dumps(result, indent=2)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)
    print(table(counts))


if __name__ == "__main__":
    main()
