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
import re
import shutil
import signal
import socket
import sys
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from agent_knowledge_dev.console import CliError
from agent_knowledge_dev.gateway import (
    MAX_REQUEST_BYTES,
    Gateway,
    HttpRequest,
    HttpResponse,
    json_error,
    loopback_origins,
)
from agent_knowledge_dev.localstate import AlreadyRunning, ServeLock, ServerInfo
from agent_knowledge_dev.oauth_issuer import LocalIssuer

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
        if self.request_version == "HTTP/0.9":  # `GET /path` alone: its answer would have no status line
            self.send_error(HTTPStatus.BAD_REQUEST)
            return
        started = time.perf_counter()
        self._send(self._read_and_handle(), started)

    def __getattr__(self, name: str) -> Any:
        # http.server looks up `do_<METHOD>`: every method, known or not, goes to the gateway, which
        # answers 404 or 405 as JSON like any other answer (never http.server's HTML 501 page).
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line, a line over 64 KiB, more than 100
        headers, an unsupported HTTP version) as JSON with no-store, like every other answer, and
        with a fixed message that echoes nothing of the request."""
        started = time.perf_counter()
        status = HTTPStatus(code)
        error = "invalid_request" if status is HTTPStatus.BAD_REQUEST else _snake_case(status.phrase)
        self.close_connection = True
        # Before it understands a request line, http.server assumes HTTP/0.9: no status line, no headers.
        self.request_version = self.protocol_version
        self._send(json_error(code, error, _REFUSALS.get(code, status.phrase)), started)

    def _send(self, response: HttpResponse, started: float) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:  # a refused request's unread bytes must not be taken for the next one
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
        if not self.server.quiet:
            elapsed = (time.perf_counter() - started) * 1000
            target = _loggable_path(getattr(self, "path", "")) or "-"
            print(f"{self.command or '-'} {target} → {response.status} ({elapsed:.0f} ms)", file=sys.stderr, flush=True)

    def _read_and_handle(self) -> HttpResponse:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return json_error(411, "length_required", "send the body with a Content-Length")
        # Two different lengths are how a request is smuggled past a proxy that reads the other one.
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        if len(lengths) > 1:
            self.close_connection = True
            return json_error(400, "invalid_request", "conflicting Content-Length headers")
        length = lengths.pop() if lengths else "0"
        if not _DIGITS.fullmatch(length):  # int() would also take "+5", "1_0" and " 5"
            self.close_connection = True
            return json_error(400, "invalid_request", "invalid Content-Length")
        size = int(length)
        if size > MAX_REQUEST_BYTES:
            # Never read it: answer and drop the connection, as API Gateway does.
            self.close_connection = True
            return json_error(413, "payload_too_large", "request body is larger than 6 MiB")
        body = self.rfile.read(size) if size else b""
        request = HttpRequest(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
            protocol=self.request_version,
        )
        return self.server.gateway.handle(request)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        """Requests are logged by `_send`; keep http.server's own lines out."""


_DIGITS = re.compile(r"[0-9]+")
# The messages of http.server's refusals (`send_error`); its own would quote the request line.
_REFUSALS = {
    400: "malformed HTTP request",
    414: "request line longer than 65536 bytes",
    431: "request headers too large: at most 100 headers of at most 65536 bytes each",
    505: "HTTP version not supported; use HTTP/1.1",
}
# C0 and C1 controls: in a logged path they could rewrite the terminal or forge a log line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _snake_case(phrase: str) -> str:
    """`Request-URI Too Long` → `request_uri_too_long`."""
    return re.sub(r"[^a-z0-9]+", "_", phrase.lower()).strip("_")


def _loggable_path(target: str) -> str:
    """The path of a request target, for the access log: never the query string (it can carry a
    credential, e.g. `?access_token=`), control characters escaped."""
    path = target.partition("?")[0].partition("#")[0]
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", path)


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    # Lets a restarted serve rebind past TIME_WAIT; a port with a live listener still fails.
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], gateway: Gateway, quiet: bool = False) -> None:
        self.gateway = gateway
        self.quiet = quiet
        super().__init__(address, _RequestHandler)
        gateway.port = self.port  # the Host of every request must name it (port 0 binds a free one)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


def _stop_on_signals() -> None:
    """Ctrl-C (SIGINT) and SIGTERM stop the server. SIGINT explicitly too: a shell starts a
    background job (`agent-knowledge serve &` in a script, a CI step) with SIGINT ignored, and
    Python then installs no KeyboardInterrupt handler of its own."""

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _bind(host: str, port: int, gateway: Gateway, quiet: bool) -> ApiServer:
    try:
        return ApiServer((host, port), gateway, quiet)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} on {host} is already in use; choose another with --port") from None
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def cli_command(argv0: str | None = None, cwd: Path | None = None) -> str:
    """How to run `agent-knowledge` as this process was run: the bare name when that is what PATH
    finds, else the script's path (relative to the working directory when below it, as
    `.venv/bin/agent-knowledge` after `make serve`), else `python -m agent_knowledge_dev.cli`."""
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    here = cwd or Path.cwd()
    if script.name != "agent-knowledge":
        return f"{_shown(Path(sys.executable), here)} -m agent_knowledge_dev.cli"
    found = shutil.which("agent-knowledge")
    if found and os.path.realpath(found) == os.path.realpath(script):
        return "agent-knowledge"
    return _shown(script, here)


def _shown(path: Path, cwd: Path) -> str:
    absolute = Path(os.path.abspath(cwd / path))
    try:
        return str(absolute.relative_to(cwd))
    except ValueError:
        return str(absolute)


def _banner(base_url: str, elapsed: float, documents: int, moto_endpoint: str) -> str:
    from agent_knowledge_dev.demo import DEMO_ROUTE, DEMO_TOKEN
    from agent_knowledge_dev.stack import SOURCES_BUCKET

    workspace = f"{base_url}/agent-api/v1/workspaces/{DEMO_ROUTE}/knowledge"
    cli = cli_command()
    auth = f"-H 'Authorization: Bearer {DEMO_TOKEN}'"
    post = f"-X POST {auth} -H 'Content-Type: application/json'"
    return "\n".join(
        [
            f"agent-knowledge local API ready in {elapsed:.1f} s",
            f"  API base URL : {base_url}",
            f"  workspace    : {workspace}",
            f"  MCP endpoint : {base_url}/agent-api/v1/workspaces/{DEMO_ROUTE}/mcp (Streamable HTTP, same bearer)",
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
            f"Admin commands (another terminal) target this server: {cli} kb create ..., {cli} doc put ...",
            "Press Ctrl-C to stop.",
        ]
    )


def serve(host: str, port: int, quiet: bool = False, embedding_provider: str = "local", oauth: bool = False) -> int:
    started = time.perf_counter()
    lock = ServeLock()
    try:
        lock.acquire()
    except AlreadyRunning as running:
        where = f" (pid {running.info.pid}, {running.info.api_url})" if running.info else ""
        raise CliError(f"agent-knowledge serve is already running{where}; stop it with Ctrl-C first") from None
    try:
        from agent_knowledge_dev.functions import FunctionInvoker
        from agent_knowledge_dev.stacks import moto_server_stack
        from agent_knowledge_dev.template import function_routes

        gateway = Gateway(function_routes(), FunctionInvoker())
        api = _bind(host, port, gateway, quiet)
        # The functions fetch the issuer's keys from this server: by a loopback address it listens on.
        loopback = "[::1]" if host == "::1" else "127.0.0.1"
        issuer = _start_issuer(gateway, f"http://{loopback}:{api.port}") if oauth else None
        try:
            origins = ",".join(loopback_origins(api.port))
            with moto_server_stack(
                in_process=True,
                embedding_provider=embedding_provider,
                mcp_allowed_origins=origins,
                environment=issuer.environment() if issuer is not None else None,
            ) as stack:
                lock.publish(ServerInfo(os.getpid(), api.base_url, stack.endpoint, stack.environment, time.time()))
                _stop_on_signals()
                print(
                    _banner(api.base_url, time.perf_counter() - started, stack.documents, stack.endpoint),
                    flush=True,
                )
                if issuer is not None:
                    print(_oauth_banner(issuer), flush=True)
                if host not in {"127.0.0.1", "localhost", "::1"}:
                    print(
                        f"warning: listening on {host}; the demo bearer token is public (requests must still"
                        " name localhost, 127.0.0.1 or [::1] with this port in Host: others are refused)",
                        file=sys.stderr,
                        flush=True,
                    )
                try:
                    api.serve_forever(poll_interval=0.2)
                except KeyboardInterrupt:
                    print("stopping", file=sys.stderr, flush=True)
        finally:
            api.server_close()
            if issuer is not None:
                from agent_knowledge_dev.localstate import state_dir
                from agent_knowledge_dev.oauth_issuer import remove_key

                remove_key(state_dir())
    finally:
        lock.release()
    return 0


def _start_issuer(gateway: Gateway, base_url: str) -> LocalIssuer:
    """`serve --oauth`: a signing key for this run, its discovery document and JWKS served by the
    gateway, the key in the state dir for `token issue` (agent_knowledge_dev.oauth_issuer)."""
    from agent_knowledge_dev.localstate import state_dir
    from agent_knowledge_dev.oauth_issuer import DISCOVERY_PATH, JWKS_PATH, LocalIssuer

    issuer = LocalIssuer.generate(base_url)
    issuer.save(state_dir())
    gateway.add_documents({DISCOVERY_PATH: issuer.discovery, JWKS_PATH: issuer.jwks})
    return issuer


def _oauth_banner(issuer: LocalIssuer) -> str:
    cli = cli_command()
    return "\n".join(
        [
            "OAuth resource-server mode (--oauth): JWT access tokens of the local test issuer are accepted",
            f"  issuer       : {issuer.issuer} (signing key generated for this run)",
            f"  audience     : {issuer.audience}",
            f"  a token      : {cli} token issue --principal-id alice --role member",
        ]
    )
