"""PDF, DOCX and PPTX files are parsed in a separate process with hard limits, so that no document
can take the ingest function down: a bomb fails its own document, with its reason, and nothing else.

Why: PDFium cannot be interrupted inside one page, and one page of a few dozen kilobytes can ask
for gigabytes of memory and many seconds of CPU (millions of text operators). The document's CPU
budget (`check`, between pages) cannot stop that; a process limit can.

How: a parser process (`python -m agent_knowledge.ingest.parse_process`, started on the first
binary document a process prepares, with subprocess pipes — no `multiprocessing`, whose pools and
queues need /dev/shm, which AWS Lambda does not have) loads the parsers once and then reads one
document after another from its standard input. Before each it sets its own limits: address
space `ParseLimits.memory_bytes` (RLIMIT_AS), CPU its time so far plus the document's budget
rounded up plus a second (RLIMIT_CPU: SIGXCPU ends it), no core files. It writes where it is (the
page, slide or part) and then the result to its standard output. The caller waits with a wall
deadline; a parser that dies or misses it is killed with its process group and replaced, and the
document fails with the reason (`_stopped_reason`). A memory failure in a parser that had read
other documents before is tried once more in a fresh one, so that what an earlier document left
in the heap never fails a later one.

A parser serves many documents: forking a child per document cost 25-35 ms of CPU per document
here (a fresh address space faults in every page PDFium touches), 16 % of the CPU of the PDFs of
bench/README.md's corpus. One process per calling thread (the CLI prepares files in threads).

The memory limit: the ingest function has 1,024 MB (template.yaml) for all its processes. The
parser's address space is capped at 640 MiB (671 MB), which leaves ~350 MB to the function's own
process (runtime, clients, the object's bytes, the extracted text and its chunks). The largest
real PDF measured, LilyPond's 27 MiB, 930-page Notation Reference, peaks at 324 MiB of address
space: the limit leaves it twice its needs (docs/SECURITY.md, bench/README.md).
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
# The parser's address space (RLIMIT_AS), see the module doc.
MAX_PARSE_MEMORY_BYTES = 640 * MiB
# RLIMIT_CPU counts whole seconds: a document's limit is the first whole second of the parser's
# CPU time at least this far past its budget, so the budget's own check between pages speaks first
# when it can (the limit lands 0.5-1.5 s past the budget).
CPU_LIMIT_MARGIN_SECONDS = 0.5
# Wall time of one document, as a multiple of its CPU limit: a parser is never idle while it
# reads, so this only catches one that waits on something it should not, with room for a loaded
# machine (on AWS, 1,024 MB is ~0.6 of a vCPU: 11 s of CPU take ~19 s, under 33).
PARSE_WALL_FACTOR = 3.0
# Caller → parser: (header length, content length), the JSON header, the content.
_REQUEST = struct.Struct(">IQ")
# Parser → caller: (kind, length), then the data. Kinds: b"p" where the parser is ("page\tpage 3
# of the PDF"), b"r" the result's JSON, then b"t" the text (UTF-8) unless refused.
_FRAME = struct.Struct(">cQ")


class ParseLimitBroken(DocumentRejected):
    """The parser process was stopped by a limit: `limit` is memory, cpu or wall (its document fails
    with the message, as for any DocumentRejected); what the parser used is kept for log lines and
    the benchmark."""

    context_fields = ("limit", "cpu_seconds", "peak_rss_bytes")
    limit: str | None
    cpu_seconds: float | None
    peak_rss_bytes: int | None


@dataclass(frozen=True)
class ParseLimits:
    """A document's limits in the parser. `cpu_seconds` is its CPU budget (`content.MAX_PREPARE_CPU_SECONDS`)."""

    cpu_seconds: float
    memory_bytes: int = field(default_factory=lambda: MAX_PARSE_MEMORY_BYTES)
    wall_factor: float = PARSE_WALL_FACTOR

    @property
    def wall_seconds(self) -> float:
        return (self.cpu_seconds + CPU_LIMIT_MARGIN_SECONDS + 1) * self.wall_factor


@dataclass(frozen=True)
class ParsedDocument:
    text: str
    title: str | None
    cpu_seconds: float  # the parser's for this document, user + system
    peak_rss_bytes: int  # the parser's peak resident memory while it read this document (0: unknown)


def over_cpu_budget(seconds: float) -> str:
    """The reason of a document that took more than its CPU budget (checked between pages or by the
    parser's CPU limit inside one)."""
    return (
        f"over the CPU budget: the document took more than {seconds:g} s of CPU to prepare; "
        "split it into smaller documents"
    )


# --- the caller's side ---------------------------------------------------------------------------


def parse_isolated(content: bytes, media_type: str, max_text_bytes: int, limits: ParseLimits) -> ParsedDocument:
    """`binary_formats.extract_document` in the parser process under `limits`; DocumentRejected
    with the reason when the document is refused or breaks a limit."""
    from agent_knowledge.ingest import binary_formats

    header = {
        "format_limits": {name: getattr(binary_formats, name) for name in binary_formats.FORMAT_LIMITS},
        "media_type": media_type,
        "max_text_bytes": max_text_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "memory_bytes": limits.memory_bytes,
    }
    while True:
        parser = _POOL.take()
        used = parser.documents
        try:
            answer, text = parser.ask(header, content, limits.wall_seconds)
        except _ParserStopped as stopped:
            if stopped.limit == "memory" and used:  # maybe what earlier documents left: once more, fresh
                continue
            raise ParseLimitBroken(
                _stopped_reason(stopped.limit, stopped.where, stopped.detail, limits),
                limit=stopped.limit,
                cpu_seconds=stopped.cpu_seconds,
                peak_rss_bytes=stopped.peak_rss_bytes,
            ) from None
        _POOL.give(parser)
        if answer.get("rejected") is not None:
            raise DocumentRejected(str(answer["rejected"]))
        return ParsedDocument(
            text=text.decode("utf-8", "surrogatepass"),
            title=answer.get("title"),
            cpu_seconds=float(answer["cpu_seconds"]),
            peak_rss_bytes=int(answer["peak_rss_bytes"]),
        )


def _stopped_reason(limit: str, where: str | None, detail: str, limits: ParseLimits) -> str:
    unit, _, place = (where or "\t").partition("\t")
    unit, place = unit or "part", place or "the document"
    if limit == "memory":
        return (
            f"too much memory for one {unit}: reading {place} needed more than "
            f"{limits.memory_bytes // MiB} MiB; simplify the document or split it into smaller ones"
        )
    if limit == "cpu":
        return (
            f"over the CPU budget: reading {place} took more than {limits.cpu_seconds:g} s of CPU; "
            "simplify the document or split it into smaller ones"
        )
    if limit == "wall":
        return f"over the time limit: reading {place} took more than {limits.wall_seconds:g} s"
    return f"the document parser stopped while reading {place} ({detail}); the file may be damaged"


class _ParserStopped(Exception):
    """The parser died or was killed while reading a document (it has been reaped)."""

    def __init__(self, limit: str, where: str | None, detail: str, cpu_seconds: float, peak_rss_bytes: int) -> None:
        super().__init__(limit)
        self.limit, self.where, self.detail = limit, where, detail
        self.cpu_seconds, self.peak_rss_bytes = cpu_seconds, peak_rss_bytes


class _Parser:
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
            start_new_session=True,  # its own process group: `_kill` ends whatever it may have started
        )
        self.documents = 0  # read to the end
        self.cpu_before = 0.0  # the parser's CPU time when its last document ended
        self.status = 0  # once reaped: the exit status, or minus the signal that ended it
        self.usage: Any = None  # once reaped: its resource usage (wait4)

    def ask(self, header: dict[str, Any], content: bytes, timeout: float) -> tuple[dict[str, Any], bytes]:
        """Sends the document; the result and the text. _ParserStopped if the parser dies or
        misses `timeout` (then it is killed and reaped: the caller drops it)."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        encoded = json.dumps(header).encode("utf-8")
        deadline = time.monotonic() + timeout
        where: str | None = None
        try:
            stdin.write(_REQUEST.pack(len(encoded), len(content)))
            stdin.write(encoded)
            stdin.write(content)
            stdin.flush()
            with selectors.DefaultSelector() as selector:
                selector.register(stdout, selectors.EVENT_READ)
                while True:
                    kind, data = _read_frame(stdout.fileno(), selector, deadline)
                    if kind == b"p":
                        where = data.decode("utf-8", "replace")
                        continue
                    answer = json.loads(data)
                    text = b""
                    if answer.get("rejected") is None:
                        kind, text = _read_frame(stdout.fileno(), selector, deadline)
                    self.documents += 1
                    self.cpu_before = float(answer["cpu_total_seconds"])
                    return answer, text
        except _Timeout:
            self._kill()
            raise self._stopped("wall", where) from None
        except (OSError, ValueError, _Ended):  # a broken pipe, the end of its output, a cut frame
            self._kill()
            raise self._stopped(None, where) from None

    def _stopped(self, limit: str | None, where: str | None) -> _ParserStopped:
        status, usage = self.status, self.usage
        cpu = usage.ru_utime + usage.ru_stime - self.cpu_before if usage else 0.0
        # At least the parser's peak: ru_maxrss keeps the caller's resident size at the exec that
        # started the parser when that was larger (measure bombs from a small caller).
        peak = usage.ru_maxrss * 1024 if usage else 0  # KiB on Linux
        detail = ""
        if limit is None:
            number = -status if status < 0 else 0
            if number == signal.SIGXCPU:
                limit = "cpu"
            elif number == signal.SIGABRT:  # PDFium and CPython abort when an allocation fails
                limit = "memory"
            elif status == _OUT_OF_MEMORY:  # a MemoryError the parser caught
                limit = "memory"
            else:
                limit = "crash"
                detail = f"signal {signal.Signals(number).name}" if number else f"exit status {status}"
        return _ParserStopped(limit, where, detail, cpu, peak)

    def _kill(self) -> None:
        """Kills the parser (and its process group) and reaps it, keeping its status and usage."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._reap()

    def _reap(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            _, status, self.usage = os.wait4(self.process.pid, 0)
            self.status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        except ChildProcessError:  # reaped already
            self.status = self.process.returncode or 0
        self.process.returncode = self.status  # Popen must not wait for it again

    def close(self) -> None:
        """Ends an idle parser: it exits when its standard input ends."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            return
        if self.process.stdout is not None:
            self.process.stdout.close()


class _Timeout(Exception):
    pass


class _Ended(Exception):
    pass


def _read_frame(fd: int, selector: selectors.BaseSelector, deadline: float) -> tuple[bytes, bytes]:
    kind, size = _FRAME.unpack(_read_exactly(fd, _FRAME.size, selector, deadline))
    return kind, _read_exactly(fd, size, selector, deadline)


def _read_exactly(fd: int, size: int, selector: selectors.BaseSelector, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            raise _Timeout()
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            raise _Ended()
        data += chunk
    return bytes(data)


class _Pool:
    """Idle parsers, one per thread that parses at once (the ingest function, one document at a
    time, keeps one)."""

    def __init__(self) -> None:
        self._idle: list[_Parser] = []
        self._lock = threading.Lock()

    def take(self) -> _Parser:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Parser()

    def give(self, parser: _Parser) -> None:
        with self._lock:
            self._idle.append(parser)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for parser in idle:
            parser.close()


_POOL = _Pool()


def close_workers() -> None:
    """Ends this process's idle parsers (at exit; the benchmark, to count their CPU time); the next
    binary document starts a new one."""
    _POOL.close()


atexit.register(close_workers)


# --- the parser's side ---------------------------------------------------------------------------

_OUT_OF_MEMORY = 75  # the parser's exit status after a MemoryError


def _serve() -> None:
    """The parser: one document at a time from standard input, its frames to standard output."""
    import resource

    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.dup(1)
    os.dup2(2, 1)  # a stray print goes to standard error, never into the answers
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _warm_up()

    def send(kind: bytes, data: bytes) -> None:
        _write_all(answers, _FRAME.pack(kind, len(data)))
        _write_all(answers, data)

    while True:
        head = _read_stream(requests, _REQUEST.size)
        if head is None:
            return  # the caller closed its end, or is gone
        header_bytes, content_bytes = _REQUEST.unpack(head)
        header = json.loads(_read_stream(requests, header_bytes) or b"{}")
        content = _read_stream(requests, content_bytes) or b""
        if not _parse_one(header, content, send):
            os._exit(_OUT_OF_MEMORY)
        del content


def _peak_rss(reset: bool = False) -> int:
    """This process's peak resident memory since the last reset (Linux: VmHWM, reset through
    /proc/self/clear_refs); 0 where that is not available. Not getrusage: its ru_maxrss keeps the
    caller's peak across the exec that started this process."""
    try:
        if reset:
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
            return 0
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _parse_one(header: dict[str, Any], content: bytes, send: Any) -> bool:
    """Reads one document under its limits and sends its frames; False after a MemoryError (the
    parser's heap cannot be trusted: it exits)."""
    import resource

    from agent_knowledge.ingest import binary_formats

    for name, value in header["format_limits"].items():  # the caller's, as it has them
        if name in binary_formats.FORMAT_LIMITS:
            setattr(binary_formats, name, value)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spent = usage.ru_utime + usage.ru_stime
    # SIGXCPU (which ends the process) once this document has used its budget and the margin; the
    # hard limit stays where it is, so that the next document can be given its own.
    cpu_seconds = float(header["cpu_seconds"])
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(spent + cpu_seconds + CPU_LIMIT_MARGIN_SECONDS)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    memory = int(header["memory_bytes"])
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, resource.getrlimit(resource.RLIMIT_AS)[1]))
    except (ValueError, OSError):
        if sys.platform.startswith("linux"):
            raise
        # macOS and the BSDs enforce no RLIMIT_AS: the CPU and wall limits still hold.
    _peak_rss(reset=True)
    started = time.process_time()
    limit = started + cpu_seconds

    def check() -> None:
        if time.process_time() > limit:
            raise DocumentRejected(over_cpu_budget(cpu_seconds))

    def progress(unit: str, where: str) -> None:
        send(b"p", f"{unit}\t{where}".encode())

    text = b""
    try:
        extracted = binary_formats.extract_document(
            content, str(header["media_type"]), check, int(header["max_text_bytes"]), progress
        )
        result: dict[str, Any] = {"title": extracted.title}
        text = extracted.text.encode("utf-8", "surrogatepass")
        del extracted
    except DocumentRejected as exc:
        result = {"rejected": exc.message}
    except MemoryError:
        return False
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_seconds"] = time.process_time() - started
    result["cpu_total_seconds"] = usage.ru_utime + usage.ru_stime
    result["peak_rss_bytes"] = _peak_rss()
    send(b"r", json.dumps(result).encode("utf-8"))
    if result.get("rejected") is None:
        send(b"t", text)
    return True


def _warm_up() -> None:
    """What the first document would otherwise load: the parsers' modules and PDFium's fonts (a
    page of text), so that no document's CPU pays for them."""
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


if __name__ == "__main__":
    _serve()
