"""`doc put` (one file or a whole folder) and `doc delete`, through the ingest API."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from agent_knowledge_dev.arguments import bounded_int
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import CliError, print_json
from agent_knowledge_dev.target import add_target_arguments, connect

# More workers than the AWS clients' 32 pooled connections would only wait for one.
MAX_WORKERS = 32


def _put_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("source_key", metavar="SOURCE_KEY", nargs="?", help="the document's key (with --file)")
    parser.add_argument("--title", help="title (default: the first heading, else the file name)")
    parser.add_argument("--file", type=Path, metavar="PATH", help="the document (.md, .txt or .html)")
    parser.add_argument("--dir", type=Path, metavar="DIR", help="ingest every .md/.txt/.html file below DIR")
    parser.add_argument(
        "--workers",
        type=bounded_int(1, MAX_WORKERS),
        default=4,
        help=f"parallel uploads with --dir, 1-{MAX_WORKERS} (default 4)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    add_target_arguments(parser)


def _ingestor(arguments: argparse.Namespace, kb_id: str) -> Any:
    from agent_knowledge.ingest.documents import Ingestor
    from agent_knowledge_dev.admin import require_knowledge_base

    repositories = connect(arguments)
    require_knowledge_base(repositories, kb_id)
    return Ingestor(repositories, clock=time.time)


def _put(arguments: argparse.Namespace) -> int:
    if (arguments.file is None) == (arguments.dir is None):
        raise CliError("give either SOURCE_KEY --file PATH (one document) or --dir DIR (a folder)")
    if arguments.dir is not None:
        if arguments.source_key or arguments.title:
            raise CliError("--dir takes neither SOURCE_KEY nor --title (keys are relative paths, titles headings)")
        return _put_directory(arguments)
    if not arguments.source_key:
        raise CliError("--file needs a SOURCE_KEY, e.g. `doc put handbook guides/leave.md --file leave.md`")
    return _put_file(arguments)


def _put_file(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.bulk import SourceFile, media_type_of, put_file

    path: Path = arguments.file
    if not path.is_file():
        raise CliError(f"file not found: {path}")
    media_type = media_type_of(path)
    if media_type is None:
        raise CliError(f"{path}: only .md, .txt and .html files can be ingested")
    ingestor = _ingestor(arguments, arguments.kb_id)
    try:
        result = put_file(
            ingestor,
            arguments.kb_id,
            SourceFile(path, arguments.source_key, media_type),
            title=arguments.title,
            rebuild_index=True,
        )
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    print_json({"outcome": result.outcome, "document": _document(result.document)})
    return 0


def _document(record: Any) -> dict[str, Any]:
    """What an operator wants to see of a document record (not the chunk digests and offsets)."""
    fields = ("kb_id", "doc_id", "source_key", "title", "status", "error_reason", "revision", "body_bytes")
    values = record.model_dump(mode="json")
    return {name: values.get(name) for name in fields} | {"chunks": values.get("chunk_count")}


def _put_directory(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.bulk import ingest_directory
    from agent_knowledge_dev.progress import ProgressBar

    root: Path = arguments.dir
    if not root.is_dir():
        raise CliError(f"folder not found: {root}")
    ingestor = _ingestor(arguments, arguments.kb_id)
    bar: ProgressBar | None = None
    started = time.perf_counter()

    def start(total: int) -> None:
        nonlocal bar
        bar = ProgressBar(total, enabled=arguments.progress)

    def follow(source: Any, outcome: str, error: str | None) -> None:
        assert bar is not None
        if error is not None:
            bar.message(f"failed: {source.source_key}: {error}")
        bar.advance(source.source_key)

    try:
        summary = ingest_directory(
            ingestor, arguments.kb_id, root, workers=arguments.workers, on_start=start, on_result=follow
        )
    finally:
        if bar is not None:
            bar.close()
    result = summary.as_dict()
    result["seconds"]["total"] = round(time.perf_counter() - started, 2)
    print_json(result)
    return 1 if summary.failed else 0


def _delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("source_key", metavar="SOURCE_KEY")
    add_target_arguments(parser)


def _delete(arguments: argparse.Namespace) -> int:
    ingestor = _ingestor(arguments, arguments.kb_id)
    if not ingestor.delete(arguments.kb_id, arguments.source_key, rebuild_index=True):
        raise CliError(f"no document {arguments.source_key!r} in knowledge base {arguments.kb_id!r}")
    print_json({"kb_id": arguments.kb_id, "source_key": arguments.source_key, "deleted": True})
    return 0


COMMAND = Command(
    "doc",
    "documents of a knowledge base",
    subcommands=[
        Command("put", "add or update one document (--file) or a whole folder (--dir)", _put_arguments, _put),
        Command("delete", "delete a document", _delete_arguments, _delete),
    ],
)
