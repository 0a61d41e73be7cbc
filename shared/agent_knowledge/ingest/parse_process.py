"""PDF, DOCX and PPTX files are parsed in a child process with hard limits, so that no document can
take the ingest function down: a bomb fails its own document, with its reason, and nothing else.

Why: PDFium cannot be interrupted inside one page, and one page of a few dozen kilobytes can ask
for gigabytes of memory and many seconds of CPU (millions of text operators). The document's CPU
budget (`check`, between pages) cannot stop that; a process limit can.

How: a worker process (`python -m agent_knowledge.ingest.parse_process`, started on the first
binary document a process prepares and kept) imports the parsers once, then forks one child per
document. The child lowers its own limits — address space `ParseLimits.memory_bytes`
(RLIMIT_AS), CPU the document's budget rounded up plus a second (RLIMIT_CPU: SIGXCPU, then
SIGKILL), no core files — parses (`binary_formats.extract_document`), writes where it is (the
page, slide or part) and then its result to a pipe, and exits. The worker reads that pipe with a
wall deadline (the child is killed on breach), reaps the child with `wait4` (its CPU time and peak
resident memory) and answers. The parent waits for the answer with its own deadline; a worker
that misses it is killed with its process group and replaced.

Plain pipes and `os.fork`: `multiprocessing`'s pools and queues need /dev/shm, which AWS Lambda
does not have. The fork happens in the worker, never in the caller: the caller has threads (a
fork copies none of them and may copy a lock held by one), the worker has one. A fork of the
worker costs about a millisecond; starting an interpreter with PDFium costs about 100 ms, paid
once per process (bench/README.md, "isolation").

The memory limit: the ingest function has 1,024 MB (template.yaml) for all its processes. The
child's address space is capped at 640 MiB (671 MB); the worker holds ~25 MB of its own (the
document's bytes it reads are shared with the child, which forked from it); that leaves ~330 MB
to the function's own process (runtime, clients, the object's bytes, the extracted text and its
chunks). The largest real PDF measured, LilyPond's 27 MiB, 930-page Notation Reference, peaks at
324 MiB of address space: the limit leaves it twice its needs (docs/SECURITY.md, bench/README.md).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from agent_knowledge.errors import DocumentRejected

MiB = 1024 * 1024
# The child's address space (RLIMIT_AS), see the module doc.
MAX_PARSE_MEMORY_BYTES = 640 * MiB
# Wall time of one document's parse, as a multiple of its CPU limit: a child is never idle, so
# this only catches a child that waits on something it should not, with room for a loaded machine
# (on AWS, 1,024 MB is ~0.6 of a vCPU: 11 s of CPU take ~19 s, under 33). The parent gives the
# worker `WORKER_GRACE_SECONDS` more before replacing it.
PARSE_WALL_FACTOR = 3.0
WORKER_GRACE_SECONDS = 5.0
# Frames: (header length, payload length), then the JSON header, then the payload.
_FRAME = struct.Struct(">IQ")
# Child → worker: (kind, length), then the data. Kinds: b"p" where the child is ("page\tpage 3 of
# the PDF"), b"r" the result's JSON, b"t" the text (UTF-8).
_CHILD_FRAME = struct.Struct(">cI")
# What a child may write beyond the text limit (frames, progress lines, the JSON): more is a defect.
CHILD_OUTPUT_SLACK_BYTES = 4 * MiB


class ParseLimitBroken(DocumentRejected):
    """The parser child was stopped by a limit: `limit` is memory, cpu or wall (its document fails
    with the message, as for any DocumentRejected); what the child used is kept for log lines and
    the benchmark."""

    context_fields = ("limit", "cpu_seconds", "peak_rss_bytes")
    limit: str | None
    cpu_seconds: float | None
    peak_rss_bytes: int | None


@dataclass(frozen=True)
class ParseLimits:
    """A child's limits. `cpu_seconds` is the document's CPU budget (`content.MAX_PREPARE_CPU_SECONDS`)."""

    cpu_seconds: float
    memory_bytes: int = field(default_factory=lambda: MAX_PARSE_MEMORY_BYTES)
    wall_factor: float = PARSE_WALL_FACTOR

    @property
    def cpu_limit_seconds(self) -> int:
        """The child's RLIMIT_CPU (whole seconds): past the budget, so the budget's own check
        between pages speaks first when it can."""
        return max(1, math.ceil(self.cpu_seconds) + 1)

    @property
    def wall_seconds(self) -> float:
        return self.cpu_limit_seconds * self.wall_factor


@dataclass(frozen=True)
class ParsedDocument:
    text: str
    title: str | None
    cpu_seconds: float  # the child's, user + system
    peak_rss_bytes: int  # the child's peak resident memory (pages it shares with the worker included)


def over_cpu_budget(seconds: float) -> str:
    """The reason of a document that took more than its CPU budget (checked between pages or by the
    child's CPU limit inside one)."""
    return (
        f"over the CPU budget: the document took more than {seconds:g} s of CPU to prepare; "
        "split it into smaller documents"
    )


# --- the caller's side ---------------------------------------------------------------------------


def parse_isolated(content: bytes, media_type: str, max_text_bytes: int, limits: ParseLimits) -> ParsedDocument:
    """`binary_formats.extract_document` in a child process under `limits`; DocumentRejected with
    the reason when the document is refused or breaks a limit."""
    from agent_knowledge.ingest import binary_formats

    header = {
        "format_limits": {name: getattr(binary_formats, name) for name in binary_formats.FORMAT_LIMITS},
        "media_type": media_type,
        "max_text_bytes": max_text_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "cpu_limit_seconds": limits.cpu_limit_seconds,
        "memory_bytes": limits.memory_bytes,
        "wall_seconds": limits.wall_seconds,
    }
    worker = _POOL.take()
    try:
        answer, payload = worker.ask(header, content, limits.wall_seconds + WORKER_GRACE_SECONDS)
    except _WorkerLost as exc:
        worker.stop()
        if exc.timed_out:
            raise ParseLimitBroken(_stopped_reason({"stopped": "wall"}, limits), limit="wall") from None
        raise RuntimeError(f"the document parser process failed: {exc}") from None
    _POOL.give(worker)
    if answer.get("rejected"):
        raise DocumentRejected(str(answer["rejected"]))
    if answer.get("stopped"):
        raise ParseLimitBroken(
            _stopped_reason(answer, limits),
            limit=answer["stopped"],
            cpu_seconds=answer["cpu_seconds"],
            peak_rss_bytes=answer["peak_rss_bytes"],
        )
    return ParsedDocument(
        text=payload.decode("utf-8", "surrogatepass"),
        title=answer.get("title"),
        cpu_seconds=float(answer["cpu_seconds"]),
        peak_rss_bytes=int(answer["peak_rss_bytes"]),
    )


def _stopped_reason(answer: dict[str, Any], limits: ParseLimits) -> str:
    unit, _, where = str(answer.get("where") or "\t").partition("\t")
    unit, where = unit or "part", where or "the document"
    stopped = answer["stopped"]
    if stopped == "memory":
        return (
            f"too much memory for one {unit}: reading {where} needed more than "
            f"{limits.memory_bytes // MiB} MiB; simplify the document or split it into smaller ones"
        )
    if stopped == "cpu":
        return (
            f"over the CPU budget: reading {where} took more than {limits.cpu_seconds:g} s of CPU; "
            "simplify the document or split it into smaller ones"
        )
    if stopped == "wall":
        return f"over the time limit: reading {where} took more than {limits.wall_seconds:g} s"
    return f"the document parser stopped while reading {where} ({answer.get('detail')}); the file may be damaged"


class _WorkerLost(Exception):
    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class _Worker:
    def __init__(self) -> None:
        if not sys.executable:
            raise RuntimeError("cannot start the document parser process: sys.executable is unknown")
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)  # the caller's imports
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent_knowledge.ingest.parse_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            close_fds=True,
            start_new_session=True,  # its own process group: `stop` kills the worker and its child
        )

    def ask(self, header: dict[str, Any], content: bytes, timeout: float) -> tuple[dict[str, Any], bytes]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        encoded = json.dumps(header).encode("utf-8")
        try:
            stdin.write(_FRAME.pack(len(encoded), len(content)))
            stdin.write(encoded)
            stdin.write(content)
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _WorkerLost(f"cannot send the document ({exc})") from None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            head = _read_exactly(stdout.fileno(), _FRAME.size, selector, deadline)
            header_bytes, payload_bytes = _FRAME.unpack(head)
            answer = json.loads(_read_exactly(stdout.fileno(), header_bytes, selector, deadline))
            payload = _read_exactly(stdout.fileno(), payload_bytes, selector, deadline)
        return answer, payload

    def stop(self) -> None:
        """Kills the worker and whatever child it has, and reaps it."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.process.wait()

    def close(self) -> None:
        """Ends an idle worker: it exits when its standard input ends."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=WORKER_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _read_exactly(fd: int, size: int, selector: selectors.BaseSelector, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            raise _WorkerLost("no answer in time", timed_out=True)
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            raise _WorkerLost("the worker exited")
        data += chunk
    return bytes(data)


class _Pool:
    """Idle workers, one per thread that parses at once (the CLI prepares files in threads; the
    ingest function, one document at a time, keeps one)."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Worker()

    def give(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def close(self) -> None:
        """Ends the idle workers (at exit; the benchmark, to count their CPU time)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_POOL = _Pool()


def close_workers() -> None:
    """Ends this process's idle parser workers; the next binary document starts a new one."""
    _POOL.close()


atexit.register(close_workers)


# --- the worker's side ---------------------------------------------------------------------------


def _serve() -> None:
    """The worker: one request at a time from standard input, its answer to standard output."""
    _warm_up()

    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a stray print goes to standard error, never into the answers
    while True:
        head = _read_stream(requests, _FRAME.size)
        if head is None:
            return  # the caller closed its end, or is gone
        header_bytes, content_bytes = _FRAME.unpack(head)
        header = json.loads(_read_stream(requests, header_bytes) or b"{}")
        content = _read_stream(requests, content_bytes) or b""
        answer, payload = _parse_in_child(header, content, (requests.fileno(), answers.fileno()))
        del content
        encoded = json.dumps(answer).encode("utf-8")
        answers.write(_FRAME.pack(len(encoded), len(payload)) + encoded)
        answers.write(payload)


def _warm_up() -> None:
    """Everything a child would otherwise load afresh for every document, loaded once before any
    fork: the parsers' modules, PDFium's fonts (a page of text), and a frozen heap (`gc.freeze`:
    a child's collections never touch, and so never copy, the worker's objects)."""
    import gc
    import resource  # noqa: F401
    import zipfile  # noqa: F401
    from xml.etree import ElementTree  # noqa: F401

    import defusedxml.ElementTree  # noqa: F401
    import pypdfium2  # noqa: F401

    from agent_knowledge.ingest import binary_formats

    for content, media_type in _samples():
        try:
            binary_formats.extract_document(content, media_type, lambda: None, 1 << 20)
        except DocumentRejected:
            pass
    gc.collect()
    gc.freeze()


def _samples() -> list[tuple[bytes, str]]:
    """A one-page PDF with a line of text in a standard font, and a one-paragraph DOCX and PPTX."""
    import io
    import zipfile

    from agent_knowledge.ingest.binary_formats import DOCX, PDF, PPTX

    stream = b"BT /F1 12 Tf 72 720 Td (Warm up) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(pdf)
    pdf += b"xref\n0 6\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    package = "http://schemas.openxmlformats.org/package/2006/relationships"

    def office(main: str, body: str, extra: dict[str, str]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("[Content_Types].xml", "<Types/>")
            archive.writestr(
                "_rels/.rels",
                f'<Relationships xmlns="{package}"><Relationship Id="rId1" '
                f'Type="{relationships}/officeDocument" Target="{main}"/></Relationships>',
            )
            archive.writestr(main, body)
            for name, data in extra.items():
                archive.writestr(name, data)
        return out.getvalue()

    word = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    docx = office(
        "word/document.xml",
        f'<w:document xmlns:w="{word}"><w:body><w:p><w:r><w:t>Warm up</w:t></w:r></w:p></w:body></w:document>',
        {},
    )
    slides = "http://schemas.openxmlformats.org/presentationml/2006/main"
    drawing = "http://schemas.openxmlformats.org/drawingml/2006/main"
    pptx = office(
        "ppt/presentation.xml",
        f'<p:presentation xmlns:p="{slides}" xmlns:r="{relationships}"><p:sldIdLst>'
        '<p:sldId id="256" r:id="rId1"/></p:sldIdLst></p:presentation>',
        {
            "ppt/_rels/presentation.xml.rels": f'<Relationships xmlns="{package}"><Relationship Id="rId1" '
            f'Type="{relationships}/slide" Target="slides/slide1.xml"/></Relationships>',
            "ppt/slides/slide1.xml": f'<p:sld xmlns:p="{slides}" xmlns:a="{drawing}"><p:cSld><p:spTree><p:sp>'
            "<p:txBody><a:p><a:r><a:t>Warm up</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>",
        },
    )
    return [(bytes(pdf), PDF), (docx, DOCX), (pptx, PPTX)]


def _read_stream(stream: IO[bytes], size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _parse_in_child(header: dict[str, Any], content: bytes, inherited: tuple[int, int]) -> tuple[dict[str, Any], bytes]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 70
        try:
            os.close(read_end)
            for fd in inherited:
                os.close(fd)
            status = _child(header, content, write_end)
        finally:
            os._exit(status)
    os.close(write_end)
    output, timed_out, overflow = _collect(read_end, pid, header)
    _, status, usage = os.wait4(pid, 0)
    os.close(read_end)
    facts: dict[str, Any] = {
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,  # KiB on Linux
    }
    frames = _frames(output)
    where = next((data.decode("utf-8", "replace") for kind, data in reversed(frames) if kind == b"p"), None)
    result = next((json.loads(data) for kind, data in frames if kind == b"r"), None)
    text = b"".join(data for kind, data in frames if kind == b"t")
    facts["where"] = where
    if timed_out:
        return {**facts, "stopped": "wall"}, b""
    if overflow:
        return {**facts, "stopped": "crash", "detail": "it wrote more than its text limit"}, b""
    if os.WIFSIGNALED(status) or result is None:
        return {**facts, **_verdict(status, facts, header)}, b""
    if result.get("memory"):
        return {**facts, "stopped": "memory"}, b""
    if result.get("rejected") is not None:
        return {**facts, "rejected": result["rejected"]}, b""
    return {**facts, "title": result.get("title")}, text


def _verdict(status: int, facts: dict[str, Any], header: dict[str, Any]) -> dict[str, Any]:
    """Why a child died without a result: its CPU limit (SIGXCPU, or SIGKILL at the hard limit),
    its memory limit (PDFium and CPython abort when an allocation fails), or a defect."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        at_cpu_limit = facts["cpu_seconds"] >= header["cpu_limit_seconds"]
        if number == signal.SIGXCPU or (number == signal.SIGKILL and at_cpu_limit):
            return {"stopped": "cpu"}
        if number == signal.SIGABRT or facts["peak_rss_bytes"] >= header["memory_bytes"] * 0.9:
            return {"stopped": "memory"}
        return {"stopped": "crash", "detail": f"signal {signal.Signals(number).name}"}
    return {"stopped": "crash", "detail": f"exit status {os.WEXITSTATUS(status)}"}


def _collect(fd: int, pid: int, header: dict[str, Any]) -> tuple[bytes, bool, bool]:
    """The child's output until it closes the pipe; killed at the wall deadline or if it writes
    more than it may."""
    deadline = time.monotonic() + float(header["wall_seconds"])
    allowed = int(header["max_text_bytes"]) + CHILD_OUTPUT_SLACK_BYTES
    output = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                os.kill(pid, signal.SIGKILL)
                return bytes(output), True, False
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(output), False, False
            output += chunk
            if len(output) > allowed:
                os.kill(pid, signal.SIGKILL)
                return bytes(output), False, True


def _frames(output: bytes) -> list[tuple[bytes, bytes]]:
    """The complete frames of a child's output (a killed child may leave the last one cut)."""
    frames, at = [], 0
    while at + _CHILD_FRAME.size <= len(output):
        kind, size = _CHILD_FRAME.unpack_from(output, at)
        end = at + _CHILD_FRAME.size + size
        if end > len(output):
            break
        frames.append((kind, output[at + _CHILD_FRAME.size : end]))
        at = end
    return frames


def _child(header: dict[str, Any], content: bytes, fd: int) -> int:
    import resource

    from agent_knowledge.ingest import binary_formats

    for name, value in header["format_limits"].items():  # the caller's, as it has them
        if name in binary_formats.FORMAT_LIMITS:
            setattr(binary_formats, name, value)
    cpu_seconds = float(header["cpu_seconds"])
    cpu_limit = int(header["cpu_limit_seconds"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 1))  # SIGXCPU, then SIGKILL
    memory = int(header["memory_bytes"])
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ValueError, OSError):
        if sys.platform.startswith("linux"):
            raise
        # macOS and the BSDs have no enforceable RLIMIT_AS: the CPU and wall limits still hold.

    def send(kind: bytes, data: bytes) -> None:
        view = memoryview(_CHILD_FRAME.pack(kind, len(data)) + data)
        while view:
            view = view[os.write(fd, view) :]

    def progress(unit: str, where: str) -> None:
        send(b"p", f"{unit}\t{where}".encode())

    limit = time.process_time() + cpu_seconds  # a forked child's CPU time starts at zero

    def check() -> None:
        if time.process_time() > limit:
            raise DocumentRejected(over_cpu_budget(cpu_seconds))

    text = b""
    try:
        extracted = binary_formats.extract_document(
            content, str(header["media_type"]), check, int(header["max_text_bytes"]), progress
        )
        result: dict[str, Any] = {"title": extracted.title}
        text = extracted.text.encode("utf-8", "surrogatepass")
    except DocumentRejected as exc:
        result = {"rejected": exc.message}
    except MemoryError:
        result = {"memory": True}
    send(b"r", json.dumps(result).encode("utf-8"))
    if text:
        send(b"t", text)
    os.close(fd)
    return 0


if __name__ == "__main__":
    _serve()
