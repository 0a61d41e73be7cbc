"""`agent-knowledge serve`: moto on loopback, the template's stack, the demo, and the HTTP API.

Start-up order is chosen so that mistakes fail fast and clearly: take the serve lock (another
`serve` running?), bind the API port (in use?), and only then start moto, create the stack and seed.

State lives in the memory of the moto server inside this process: it is fresh on every start (the
demo is seeded each time) and gone on exit. `serve.json` in the state dir tells the admin commands
and `invoke` where that moto server is.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from agent_knowledge_dev.console import CliError
from agent_knowledge_dev.gateway import MAX_REQUEST_BYTES, Gateway, HttpRequest, HttpResponse, json_error
from agent_knowledge_dev.localstate import AlreadyRunning, ServeLock, ServerInfo

log = logging.getLogger(__name__)


class _RequestHandler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"
    server_version = "agent-knowledge-local"
    # An idle keep-alive connection must not hold a thread forever.
    timeout = 30

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every request on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _dispatch(self) -> None:
        started = time.perf_counter()
        response = self._read_and_handle()
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
        if not self.server.quiet:
            elapsed = (time.perf_counter() - started) * 1000
            print(f"{self.command} {self.path} → {response.status} ({elapsed:.0f} ms)", file=sys.stderr, flush=True)

    def _read_and_handle(self) -> HttpResponse:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return json_error(411, "length_required", "send the body with a Content-Length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            return json_error(400, "invalid_request", "invalid Content-Length")
        if length > MAX_REQUEST_BYTES:
            # Never read it: answer and drop the connection, as API Gateway does.
            self.close_connection = True
            return json_error(413, "payload_too_large", "request body is larger than 6 MiB")
        body = self.rfile.read(length) if length else b""
        request = HttpRequest(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
            protocol=self.request_version,
        )
        return self.server.gateway.handle(request)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = _dispatch

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        """Requests are logged by `_dispatch`; keep http.server's own lines out."""


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    # Lets a restarted serve rebind past TIME_WAIT; a port with a live listener still fails.
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], gateway: Gateway, quiet: bool = False) -> None:
        self.gateway = gateway
        self.quiet = quiet
        super().__init__(address, _RequestHandler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


def _stop_on_sigterm() -> None:
    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, raise_interrupt)


def _bind(host: str, port: int, gateway: Gateway, quiet: bool) -> ApiServer:
    try:
        return ApiServer((host, port), gateway, quiet)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} on {host} is already in use; choose another with --port") from None
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _start_moto() -> Any:
    from moto.server import ThreadedMotoServer

    from agent_knowledge_dev import moto_speedups

    moto_speedups.install()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    return moto


def _banner(base_url: str, elapsed: float, documents: int, moto_endpoint: str) -> str:
    from agent_knowledge_dev.demo import DEMO_ROUTE, DEMO_TOKEN
    from agent_knowledge_dev.stack import SOURCES_BUCKET

    workspace = f"{base_url}/agent-api/v1/workspaces/{DEMO_ROUTE}/knowledge"
    auth = f"-H 'Authorization: Bearer {DEMO_TOKEN}'"
    post = f"-X POST {auth} -H 'Content-Type: application/json'"
    return "\n".join(
        [
            f"agent-knowledge local API ready in {elapsed:.1f} s",
            f"  API base URL : {base_url}",
            f"  workspace    : {workspace}",
            f"  demo bearer  : {DEMO_TOKEN}",
            f"  demo content : {documents} sample documents in knowledge base 'handbook' (English and Chinese)",
            f"  sources      : s3://{SOURCES_BUCKET}/<kb_id>/<source_key> is ingested and indexed",
            f"                 (aws s3 sync DIR s3://{SOURCES_BUCKET}/handbook/ --endpoint-url {moto_endpoint})",
            "  state        : in memory, fresh on every start, gone when serve stops",
            "",
            "Try:",
            f"  curl -s {auth} {workspace}/capabilities",
            f'  curl -s {post} -d \'{{"query": "vacation policy"}}\' {workspace}/search',
            f'  curl -s {post} -d \'{{"ref": "<a ref from search>"}}\' {workspace}/read',
            "",
            "Admin commands (another terminal) target this server: agent-knowledge kb create ..., doc put ...",
            "Press Ctrl-C to stop.",
        ]
    )


def serve(host: str, port: int, quiet: bool = False) -> int:
    started = time.perf_counter()
    lock = ServeLock()
    try:
        lock.acquire()
    except AlreadyRunning as running:
        where = f" (pid {running.info.pid}, {running.info.api_url})" if running.info else ""
        raise CliError(f"agent-knowledge serve is already running{where}; stop it with Ctrl-C first") from None
    try:
        from agent_knowledge_dev.functions import FunctionInvoker
        from agent_knowledge_dev.template import function_routes

        api = _bind(host, port, Gateway(function_routes(), FunctionInvoker()), quiet)
        try:
            with local_stack() as stack:
                lock.publish(ServerInfo(os.getpid(), api.base_url, stack.moto_endpoint, stack.environment, time.time()))
                _stop_on_sigterm()
                print(
                    _banner(api.base_url, time.perf_counter() - started, stack.documents, stack.moto_endpoint),
                    flush=True,
                )
                if host not in {"127.0.0.1", "localhost", "::1"}:
                    print(f"warning: listening on {host}; the demo bearer token is public", file=sys.stderr, flush=True)
                try:
                    api.serve_forever(poll_interval=0.2)
                except KeyboardInterrupt:
                    print("stopping", file=sys.stderr, flush=True)
        finally:
            api.server_close()
    finally:
        lock.release()
    return 0


@dataclass(frozen=True)
class LocalStack:
    moto_endpoint: str
    environment: dict[str, str]
    documents: int


@contextmanager
def local_stack(seed: bool = True, pipeline: bool = True) -> Iterator[LocalStack]:
    """A moto server on loopback with the template's stack (and the demo), this process pointed at
    it, and (`pipeline`) the ingestion pipeline running: objects put in the sources bucket are
    ingested and indexed as on AWS (agent_knowledge_dev.event_sources)."""
    from agent_knowledge.repositories import aws, default_repositories
    from agent_knowledge_dev.demo import seed_demo, seed_sample_documents
    from agent_knowledge_dev.functions import function_logs_to_stderr
    from agent_knowledge_dev.runtime import use_local_backend, use_stack_environment
    from agent_knowledge_dev.stack import create_stack

    moto = _start_moto()
    try:
        moto_host, moto_port = moto.get_host_and_port()
        moto_endpoint = f"http://{moto_host}:{moto_port}"
        use_local_backend(moto_endpoint)
        environment = create_stack(aws.client)
        use_stack_environment(environment)
        function_logs_to_stderr()  # after the environment: Powertools names its logger from it
        documents = 0
        if seed:
            seed_demo(default_repositories())
            documents = seed_sample_documents(default_repositories())
        with local_pipeline(enabled=pipeline):
            yield LocalStack(moto_endpoint, environment, documents)
    finally:
        moto.stop()


@contextmanager
def local_pipeline(enabled: bool = True) -> Iterator[None]:
    from agent_knowledge_dev.event_sources import start_local_pipeline

    runner = start_local_pipeline() if enabled else None
    try:
        yield
    finally:
        if runner is not None:
            runner.stop()
