"""Bulk ingest into the local stack, and `serve` start-up time.

    .venv/bin/python -m bench.ingest_local [--documents 3000] [--megabytes 25] [--workers 4] [--serve-runs 3]
    .venv/bin/python -m bench.ingest_local --folder man --documents 300 3000   # the folder journey (below)

`--folder man|synthetic` measures what issue 24 asks of the local stack, once per `--documents`
count, each on a fresh `serve`: `doc put KB --dir DIR --wait` of that many documents (this
machine's manual pages rendered to text, `bench/man_corpus.py`, or the synthetic corpus below) —
wall time, documents/s, the CPU of the serve process and of the CLI per document — while a
separate client (threads of this process, the bench KB's own route and session) asks
capabilities, search and read over and over: their p50/p95/max and every answer that is not 2xx.
The serve log is searched for tracebacks, and the dead-letter queues are counted after the run.

The CPU figures are of lexical indexing: each folder run's `serve` runs with
`--embedding-provider none` unless `--embedding-provider local` is given (the default of `make
serve`, where the indexer also embeds every chunk with the local model, in the same process, after
each lexical generation). The embedding model's own CPU is measured beside, not counted: the
folder's documents are chunked as the ingestor chunks them (`prepare_document`), a seeded sample of
`--embedding-sample` chunks is embedded with the local model in this process (batches of the
indexer's size, weights loaded first and not counted), and its `time.process_time()` per chunk
times the folder's chunk count gives the model's CPU per document.

1. `serve` start-to-ready: start `agent-knowledge serve` on a free port (own state dir), wall time
   from process start until the banner with the bearer token is printed (what a person waits for;
   includes interpreter start, imports, moto, the stack from template.yaml and the demo seed with
   its 12 documents). Repeated `--serve-runs` times. Target: < 5 s.
2. Bulk ingest: write a synthetic corpus to a temporary folder, then run exactly what a user runs
   against that server — `agent-knowledge kb create` and `agent-knowledge doc put KB --dir DIR` in a
   subprocess (threads, one index rebuild at the end) — and time it. Then the same command again on
   the unchanged folder (everything skipped). Target for the first run: < 60 s.

The corpus is synthetic but built from real text: English documents are paragraphs of real
sentences from the Python documentation shipped with CPython (`pydoc_data`), Chinese documents are
sentences of the Chinese sample documents; Markdown with headings, ~10 % HTML and ~10 % plain text,
sizes log-normally distributed (a few long documents, many short ones), 20 % Chinese, scaled so the
whole corpus is `--megabytes` of UTF-8. Reproducible from `--seed`.
"""

from __future__ import annotations

import argparse
import functools
import html
import itertools
import json
import math
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.local_api import LocalApiClient, Reply, ServedApi, start_server

ROOT = Path(__file__).resolve().parents[1]
ZH_SAMPLES = ROOT / "local" / "agent_knowledge_dev" / "sample_docs" / "zh"


def _english_sentences() -> list[str]:
    import pydoc_data.topics

    text = " ".join(pydoc_data.topics.topics[key] for key in sorted(pydoc_data.topics.topics))
    text = re.sub(r"\s+", " ", text)
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if 40 <= len(s.strip()) <= 400]


def _chinese_sentences() -> list[str]:
    text = " ".join(path.read_text(encoding="utf-8") for path in sorted(ZH_SAMPLES.glob("*")))
    text = re.sub(r"^[#\-\d.\s*]+", "", text, flags=re.MULTILINE)
    return [s.strip() + "。" for s in re.split(r"[。！？]", text) if len(s.strip()) >= 8]


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.english = _english_sentences()
        self.chinese = _chinese_sentences()

    def _paragraph(self, chinese: bool) -> str:
        pool = self.chinese if chinese else self.english
        separator = "" if chinese else " "
        return separator.join(self.rng.choice(pool) for _ in range(self.rng.randint(2, 7)))

    def _title(self, chinese: bool) -> str:
        if chinese:
            return self.rng.choice(self.chinese)[:16].rstrip("，。")
        words = re.findall(r"[A-Za-z]{4,}", self.rng.choice(self.english))
        return " ".join(words[:5]).capitalize() or "Notes"

    def document(self, number: int, target_bytes: int) -> tuple[str, str]:
        """(relative path, text) of one document of about `target_bytes` UTF-8 bytes."""
        chinese = self.rng.random() < 0.2
        kind = self.rng.choices(["md", "html", "txt"], weights=[8, 1, 1])[0]
        title = f"{self._title(chinese)} {number}"
        sections: list[tuple[str, list[str]]] = []
        size = 0
        while size < target_bytes:
            paragraphs = []
            for _ in range(self.rng.randint(1, 5)):
                paragraph = self._paragraph(chinese)
                paragraphs.append(paragraph)
                size += len(paragraph.encode("utf-8")) + 2
                if size >= target_bytes:
                    break
            sections.append((self._title(chinese), paragraphs))
        folder = f"team-{number % 17:02d}/{'zh' if chinese else 'en'}"
        if kind == "md":
            body = "\n\n".join(f"## {heading}\n\n" + "\n\n".join(ps) for heading, ps in sections)
            return f"{folder}/doc-{number:05d}.md", f"# {title}\n\n{body}\n"
        if kind == "html":
            body = "".join(
                f"<h2>{html.escape(heading)}</h2>" + "".join(f"<p>{html.escape(p)}</p>\n" for p in ps)
                for heading, ps in sections
            )
            page = f"<html><head><title>{html.escape(title)}</title></head><body><h1>{html.escape(title)}</h1>\n"
            return f"{folder}/doc-{number:05d}.html", page + body + "</body></html>\n"
        body = "\n\n".join(f"{heading}\n\n" + "\n\n".join(ps) for heading, ps in sections)
        return f"{folder}/doc-{number:05d}.txt", f"{title}\n\n{body}\n"


def write_corpus(folder: Path, documents: int, megabytes: float, seed: int) -> int:
    """Write the corpus; returns its total size in bytes."""
    corpus = Corpus(seed)
    rng = random.Random(seed + 1)
    raw = [rng.lognormvariate(0, 0.9) for _ in range(documents)]
    scale = megabytes * 1_000_000 / sum(raw)
    total = 0
    for number, weight in enumerate(raw):
        relative, text = corpus.document(number, max(400, int(weight * scale)))
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    return total


class Server:
    """`agent-knowledge serve` in a subprocess with its own state dir (`agent_knowledge_dev.stacks`),
    timed to its ready banner, with the CPU time of it and of each CLI run."""

    def __init__(self, state_dir: Path, embedding_provider: str = "local") -> None:
        self.state_dir = state_dir
        self.embedding_provider = embedding_provider
        self.output = state_dir.parent / f"{state_dir.name}.out"
        self.api: ServedApi | None = None
        self.last_cli_cpu = 0.0

    def start(self) -> float:
        """Seconds from process start to the ready banner."""
        started = time.perf_counter()
        self.api = start_server(
            self.state_dir,
            self.output,
            quiet=True,
            poll_seconds=0.01,
            serve_options=("--embedding-provider", self.embedding_provider),
        )
        return time.perf_counter() - started

    def cpu_seconds(self) -> float:
        """CPU time of the serve process (it runs the moto server), from /proc."""
        assert self.api is not None and self.api.process is not None
        fields = Path(f"/proc/{self.api.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        assert self.api is not None
        self.api.stop(timeout=60)

    def cli(self, *arguments: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        assert self.api is not None
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = self.api.cli(*arguments, timeout=3600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.last_cli_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return time.perf_counter() - started, result

    def create_kb(self, kb_id: str) -> None:
        _, created = self.cli("kb", "create", kb_id)
        if created.returncode:
            raise RuntimeError(created.stderr)

    def put_folder(self, kb_id: str, folder: Path, workers: int) -> tuple[float, subprocess.CompletedProcess[str]]:
        """`agent-knowledge doc put KB --dir FOLDER --wait`, as a user runs it: uploaded to the sources
        bucket, then waited for until every document is searchable (wall seconds, the run)."""
        return self.cli(
            "doc",
            "put",
            kb_id,
            "--dir",
            str(folder),
            "--workers",
            str(workers),
            "--no-progress",
            "--wait",
            "--timeout",
            "3600",
        )


PROBE_QUERIES = ("configuration file", "command line options", "network interface", "print the version")
PROBE_PAUSE_SECONDS = 0.2


@dataclass
class Probe:
    """A separate client asking capabilities, search and read in turn while a load runs: latency
    and status of every answer."""

    client: LocalApiClient
    route: str
    samples: dict[str, list[float]] = field(default_factory=lambda: {"capabilities": [], "search": [], "read": []})
    failures: list[dict[str, object]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _ask(self, name: str, call: Callable[[], Reply]) -> Reply | None:
        try:
            reply = call()
        except OSError as exc:  # no answer at all counts as a failure too
            self.failures.append({"endpoint": name, "status": None, "error": type(exc).__name__})
            return None
        self.samples[name].append(reply.seconds)
        if not 200 <= reply.status < 300:
            body = reply.body[:200].decode("utf-8", "replace")
            self.failures.append({"endpoint": name, "status": reply.status, "body": body})
        return reply

    def _run(self) -> None:
        for round_number in itertools.count():
            if self._stop.is_set():
                return
            self._ask("capabilities", lambda: self.client.capabilities(self.route))
            query = PROBE_QUERIES[round_number % len(PROBE_QUERIES)]
            found = self._ask("search", functools.partial(self.client.search, {"query": query}, self.route))
            hints = found.json().get("hints", []) if found is not None and found.status == 200 else []
            if hints:
                body = {"ref": hints[0]["ref"], "max_bytes": 4096}
                self._ask("read", functools.partial(self.client.read, body, self.route))
            self._stop.wait(PROBE_PAUSE_SECONDS)

    def summary(self) -> dict[str, object]:
        result: dict[str, object] = {}
        for name, seconds in self.samples.items():
            ordered = sorted(seconds)
            result[name] = (
                {
                    "n": len(ordered),
                    "p50_ms": round(1000 * statistics.median(ordered), 1),
                    "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
                    "max_ms": round(1000 * ordered[-1], 1),
                }
                if ordered
                else {"n": 0}
            )
        result["non_2xx"] = len(self.failures)
        result["failures"] = self.failures[:10]
        return result


def _json(completed: subprocess.CompletedProcess[str], what: str) -> Any:
    if completed.returncode:
        raise SystemExit(f"{what} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout)


def _dead_letters(server: Server) -> dict[str, int]:
    """Messages left in the dead-letter queues (moto, through the serve's endpoint)."""
    import botocore.session

    assert server.api is not None
    moto = json.loads((server.state_dir / "serve.json").read_text())["moto_endpoint"]
    sqs = botocore.session.get_session().create_client(
        "sqs", region_name="us-east-1", endpoint_url=moto, aws_access_key_id="x", aws_secret_access_key="x"
    )
    counts = {}
    for name in ("SourceDeadLetterQueue", "IndexDeadLetterQueue.fifo"):
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        counts[name] = int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )
    return counts


def embedding_cpu(folder: Path, sample_size: int, seed: int) -> dict[str, Any]:
    """The local embedding model's own CPU for the folder (module doc): chunks as the ingestor cuts
    them, CPU per chunk measured on a seeded sample, per document for all of them."""
    from agent_knowledge.embedding.local import LocalEmbedder
    from agent_knowledge.indexer.vector_generation import EMBED_BATCH
    from agent_knowledge.ingest.content import prepare_document
    from agent_knowledge.ingest.source_files import media_type_of

    texts: list[str] = []
    documents = 0
    for path in sorted(path for path in folder.rglob("*") if path.is_file()):
        media_type = media_type_of(path.name)
        if media_type is None:  # `doc put` does not take it either
            continue
        prepared = prepare_document(None, path.read_bytes(), media_type, path.name)
        documents += 1
        texts.extend(chunk.text for chunk in prepared.chunks)
    sample = random.Random(seed).sample(texts, min(sample_size, len(texts)))
    embedder = LocalEmbedder()
    embedder.embed_documents(sample[:1])  # loads the weights (~2 s, once per process): not counted
    started = time.process_time()
    for start in range(0, len(sample), EMBED_BATCH):
        embedder.embed_documents(sample[start : start + EMBED_BATCH])
    per_chunk = (time.process_time() - started) / len(sample)
    return {
        "model": embedder.model_id,
        "chunks": len(texts),
        "chunks_per_document": round(len(texts) / documents, 2),
        "sample_chunks": len(sample),
        "cpu_ms_per_chunk": round(1000 * per_chunk, 1),
        "cpu_ms_per_document": round(1000 * per_chunk * len(texts) / documents, 1),
    }


def folder_run(
    folder: Path,
    documents: int,
    work: Path,
    workers: int,
    timeout: float = 3600,
    probe_on: bool = True,
    embedding_provider: str = "none",
) -> dict[str, Any]:
    """One fresh `serve --embedding-provider EMBEDDING_PROVIDER`; `doc put bench --dir FOLDER
    --wait`, under the probe when `probe_on` (module doc). The probe's own requests cost the serve
    process CPU too: the CPU per document is best read from a run without it."""
    label = f"{documents}-{'probed' if probe_on else 'quiet'}-{embedding_provider}"
    server = Server(work / f"state-folder-{label}", embedding_provider)
    server.start()
    assert server.api is not None
    try:
        server.create_kb("bench")
        for command in (
            ("route", "put", "bench", "--kb", "bench"),
            ("client", "put", "bench-agent", "--route", "bench"),
        ):
            _json(server.cli(*command)[1], " ".join(command))
        session = _json(server.cli("session", "issue", "--client", "bench-agent", "--route", "bench")[1], "session")
        probe = Probe(LocalApiClient("127.0.0.1", server.api.port, session["access_token"]), "bench")
        load_before = os.getloadavg()
        serve_cpu = server.cpu_seconds()
        if probe_on:
            probe.start()
        try:
            seconds, result = server.cli(
                "doc", "put", "bench", "--dir", str(folder), "--workers", str(workers), "--wait",
                "--timeout", str(timeout), "--no-progress",
            )  # fmt: skip
        finally:
            probe.stop()
        serve_seconds = server.cpu_seconds() - serve_cpu
        load_after = os.getloadavg()
        summary = json.loads(result.stdout) if result.stdout.strip() else {"error": result.stderr[-2000:]}
        dead = _dead_letters(server)
    finally:
        server.stop()
    log = server.output.read_text(encoding="utf-8", errors="replace")
    ready = int(summary.get("ready", 0))
    return {
        "documents": documents,
        "embedding_provider": embedding_provider,
        "exit_status": result.returncode,
        "ready": ready,
        "failed": summary.get("failed"),
        "pending": len(summary.get("pending", [])),
        "not_uploaded": len(summary.get("not_uploaded", [])),
        "ignored": len(summary.get("ignored", [])),
        "index_generation": summary.get("index_generation"),
        "wall_seconds": round(seconds, 1),
        "phase_seconds": summary.get("seconds"),
        "documents_per_second": round(ready / seconds, 1),
        "serve_cpu_seconds": round(serve_seconds, 1),
        "cli_cpu_seconds": round(server.last_cli_cpu, 1),
        "serve_cpu_ms_per_document": round(1000 * serve_seconds / documents, 1),
        "cli_cpu_ms_per_document": round(1000 * server.last_cli_cpu / documents, 1),
        "cpu_ms_per_document": round(1000 * (serve_seconds + server.last_cli_cpu) / documents, 1),
        "probe": probe.summary() if probe_on else None,
        "serve_log": {"lines": len(log.splitlines()), "tracebacks": log.count("Traceback (most recent call last)")},
        "dead_letters": dead,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
    }


def _commit() -> str:
    """The commit measured, `+dirty` when the work tree has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+dirty" if dirty.strip() else head


def folder_benchmark(
    corpus: str,
    counts: list[int],
    workers: int,
    seed: int,
    timeout: float = 3600,
    probe: str = "both",
    embedding_provider: str = "none",
    embedding_sample: int = 256,
) -> dict[str, Any]:
    """`folder_run` for each count (`probe`: `off`, `on`, or `both`: a quiet run for the CPU
    figures, then a probed one), and the embedding model's CPU on the folder beside (when
    `embedding_sample`); CPU per document of the largest against the smallest (quiet runs when
    there are any)."""
    from bench import man_corpus

    results: dict[str, Any] = {
        "corpus": corpus,
        "commit": _commit(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-folder-") as scratch:
        work = Path(scratch)
        for count in counts:
            folder = work / f"corpus-{count}"
            if corpus == "man":
                total = man_corpus.write_folder(folder, count)
            else:
                total = write_corpus(folder, count, megabytes=count * 0.005, seed=seed)
            model = embedding_cpu(folder, embedding_sample, seed) if embedding_sample else None
            for probe_on in {"off": [False], "on": [True], "both": [False, True]}[probe]:
                run = folder_run(folder, count, work, workers, timeout, probe_on, embedding_provider)
                run["bytes"] = total
                run["embedding_model_cpu"] = model
                runs.append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
    results["runs"] = runs
    quiet = [run for run in runs if run["probe"] is None] or runs
    if len(quiet) > 1:
        small, large = quiet[0], quiet[-1]
        results["cpu_per_document_ratio_largest_smallest"] = round(
            large["cpu_ms_per_document"] / max(small["cpu_ms_per_document"], 1e-9), 2
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, nargs="+", default=[3000])
    parser.add_argument("--megabytes", type=float, default=25.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--serve-runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--folder", choices=("man", "synthetic"), help="the folder journey under a probing client (module doc)"
    )
    parser.add_argument("--probe", choices=("off", "on", "both"), default="both", help="with --folder")
    parser.add_argument("--timeout", type=float, default=3600, help="with --folder: doc put's --timeout")
    parser.add_argument(
        "--embedding-provider",
        choices=("none", "local"),
        default="none",
        help="with --folder: serve's embedding provider (none: the lexical figures; module doc)",
    )
    parser.add_argument(
        "--embedding-sample",
        type=int,
        default=256,
        help="with --folder: chunks embedded to measure the local model's CPU per chunk (0: not measured)",
    )
    arguments = parser.parse_args()
    if arguments.folder:
        measured = folder_benchmark(
            arguments.folder,
            arguments.documents,
            arguments.workers,
            arguments.seed,
            arguments.timeout,
            arguments.probe,
            arguments.embedding_provider,
            arguments.embedding_sample,
        )
        print(json.dumps(measured, indent=2))
        return
    arguments.documents = arguments.documents[0]

    results: dict[str, object] = {"cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as scratch:
        work = Path(scratch)
        starts = []
        for run in range(arguments.serve_runs):
            server = Server(work / f"state-{run}")
            starts.append(server.start())
            server.stop()
        results["serve_ready_seconds"] = [round(s, 2) for s in starts]
        results["serve_ready_median_seconds"] = round(statistics.median(starts), 2)

        corpus = work / "corpus"
        started = time.perf_counter()
        total = write_corpus(corpus, arguments.documents, arguments.megabytes, arguments.seed)
        results["corpus"] = {
            "documents": arguments.documents,
            "bytes": total,
            "generation_seconds": round(time.perf_counter() - started, 1),
        }

        server = Server(work / "state-ingest")
        server.start()
        try:
            server.create_kb("bench")
            for label in ("first_ingest", "unchanged_reingest"):
                serve_cpu = server.cpu_seconds()
                seconds, result = server.put_folder("bench", corpus, arguments.workers)
                if result.returncode:
                    raise SystemExit(f"{label} failed:\n{result.stderr[-2000:]}")
                summary = json.loads(result.stdout)
                results[label] = {
                    "wall_seconds": round(seconds, 1),
                    "documents_per_second": round(arguments.documents / seconds, 1),
                    "megabytes_per_second": round(total / 1_000_000 / seconds, 2),
                    "summary": {k: summary[k] for k in ("created", "updated", "skipped", "failed", "index_generation")},
                    "phase_seconds": summary["seconds"],
                    "serve_process_cpu_seconds": round(server.cpu_seconds() - serve_cpu, 1),
                    "cli_process_cpu_seconds": round(server.last_cli_cpu, 1),
                    "load_average_after": os.getloadavg()[0],
                }
        finally:
            server.stop()
    results["targets"] = {
        "serve_ready_under_5_s": results["serve_ready_median_seconds"] < 5,  # type: ignore[operator]
        "ingest_under_60_s": results["first_ingest"]["wall_seconds"] < 60,  # type: ignore[index]
    }
    print(json.dumps(results, indent=2))
    if not math.isfinite(float(results["serve_ready_median_seconds"])):  # type: ignore[arg-type]
        raise SystemExit(1)


if __name__ == "__main__":
    main()
