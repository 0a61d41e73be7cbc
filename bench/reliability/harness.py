"""The local API (gateway + handlers) on a moto server this process controls, for fault drills and
load runs.

`agent-knowledge serve` owns its moto server privately; drills need to take storage away while the
API keeps running. Run as a subprocess so the environment it sets (AWS_ENDPOINT_URL, table names)
never leaks into the caller:

    python -m bench.reliability.harness [--port 0]

It prints `ready <api url> <demo bearer>` and then obeys one command per line on stdin:

    stop-storage   stop the moto server: connections are refused        → "storage stopped"
    hang-storage   a listener on moto's port that accepts and never answers → "storage hanging"
    quit           stop everything                                      → exits 0
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Harness:
    port: int = 0
    api: Any = None
    stack: Any = None  # agent_knowledge_dev.stacks.MotoServerStack
    _stack_context: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _black_hole: socket.socket | None = None
    _held: list[socket.socket] = field(default_factory=list)

    def start(self) -> str:
        from agent_knowledge_dev.functions import FunctionInvoker
        from agent_knowledge_dev.gateway import Gateway
        from agent_knowledge_dev.server import ApiServer
        from agent_knowledge_dev.stacks import moto_server_stack
        from agent_knowledge_dev.template import function_routes

        self.stack = self._stack_context.enter_context(moto_server_stack())
        self.api = ApiServer(("127.0.0.1", self.port), Gateway(function_routes(), FunctionInvoker()), quiet=True)
        threading.Thread(target=self.api.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return self.api.base_url

    def stop_storage(self) -> None:
        self.stack.stop_moto()

    def hang_storage(self) -> None:
        """Storage that accepts connections and never answers: every call waits out its read timeout."""
        port = self.stack.port
        self.stack.stop_moto()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        self._black_hole = listener

        def accept_and_hold() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                self._held.append(connection)

        threading.Thread(target=accept_and_hold, daemon=True).start()

    def close(self) -> None:
        if self.api is not None:
            self.api.shutdown()
            self.api.server_close()
        if self._black_hole is not None:
            self._black_hole.close()
        self._stack_context.close()


def main(argv: list[str] | None = None) -> int:
    from agent_knowledge_dev.demo import DEMO_TOKEN

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args(argv)
    # stdout is the control channel. The functions print too (Powertools writes EMF metrics to stdout,
    # as CloudWatch expects): send that to stderr, or a full pipe nobody reads blocks a handler forever.
    control = sys.stdout
    sys.stdout = sys.stderr
    harness = Harness(port=arguments.port)

    def reply(text: str) -> None:
        print(text, file=control, flush=True)

    reply(f"ready {harness.start()} {DEMO_TOKEN}")
    for line in sys.stdin:
        command = line.strip()
        if command == "stop-storage":
            harness.stop_storage()
            reply("storage stopped")
        elif command == "hang-storage":
            harness.hang_storage()
            reply("storage hanging")
        elif command == "quit":
            break
        elif command:
            reply(f"unknown command {command!r}")
    harness.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
