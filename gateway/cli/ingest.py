"""`kbgate ingest`: mirror a directory into a knowledge base, through a running gateway's
HTTP API or straight into an embedded data dir (`gateway.cli.embedded_sink`).

The connector and the gateway's services are imported when the command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.output import fail, say
from ingest.payload import Classification
from ingest.screening import screen
from settings.config import load_config

if TYPE_CHECKING:
    from gateway.cli.gateway_client import Gateway
    from ingest.connector import DocumentSink, HttpSink
    from settings.config import Config

_INGEST_EPILOG = """\
modes:
  --url URL [--key KEY]           a running gateway, over its HTTP API (or KBGATE_URL);
                                  the key (or KBGATE_KEY) needs the ingest role, and
                                  the admin role too with --create-kb or --agent
  [--data-dir DIR] --tenant T     the embedded data dir, no gateway running (Qdrant
                                  Edge locks its shards); KBGATE_QDRANT_URL and
                                  KBGATE_REDIS_URL are honoured when set

--kb names a knowledge base that exists; --create-kb creates it when it does not.
--agent attaches the knowledge base to an agent, created when new, so a question can
be asked at once (`kbgate ask AGENT "..."`). Document ids are the files' paths
relative to DIR.
exit status: 0 all files in step, 1 some files failed (or the run stopped early),
2 bad arguments or setup (unknown label, KB, workspace or key; data dir in use).
"""


def add_ingest_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ingest = commands.add_parser(
        "ingest",
        help=(
            "sync a directory of .txt, .md, .rst, .html, .pdf, .docx and .pptx files into a "
            "knowledge base"
        ),
        description=(
            "Add new files, rewrite changed ones, leave unchanged ones alone and delete "
            "documents whose files are gone."
        ),
        epilog=_INGEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument("directory", type=Path, metavar="DIR", help="the directory to mirror")
    which = ingest.add_mutually_exclusive_group(required=True)
    which.add_argument("--kb", metavar="KB_ID", help="the knowledge base")
    which.add_argument(
        "--create-kb", metavar="KB_ID", help="the knowledge base, created when it does not exist"
    )
    ingest.add_argument(
        "--agent", metavar="AGENT_ID", help="attach the KB to this agent (created when new)"
    )
    ingest.add_argument(
        "--classification",
        required=True,
        type=_classification,
        metavar="LABEL",
        help="access label of every file: public, internal, confidential or restricted",
    )
    ingest.add_argument("--url", help="base URL of a running gateway")
    ingest.add_argument("--key", help="API key with the ingest role (default: KBGATE_KEY)")
    ingest.add_argument("--data-dir", type=Path, help="embedded data dir (KBGATE_DATA_DIR)")
    ingest.add_argument("--tenant", help="workspace id (embedded mode)")
    ingest.add_argument("--org", help="organization id, checked against the workspace's")
    ingest.add_argument(
        "--allow-empty",
        action="store_true",
        help="let an empty DIR delete every document of the KB",
    )
    ingest.add_argument("--json", action="store_true", help="print the summary as JSON")
    ingest.set_defaults(run=run_ingest)


def _classification(raw: str) -> Classification:
    verdict = screen(raw)
    if verdict.classification is None:
        labels = ", ".join(label.value for label in Classification)
        raise argparse.ArgumentTypeError(f"unknown label {raw!r} (choose from {labels})")
    return verdict.classification


def run_ingest(args: argparse.Namespace) -> int:
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # damaged PDFs are reported per file
    if not args.directory.is_dir():
        return fail(f"not a directory: {args.directory}")
    args.kb = args.kb or args.create_kb
    if not args.url and not (args.tenant or args.data_dir or args.org):
        args.url = os.environ.get("KBGATE_URL")
    if args.url:
        sink = _http_sink(args)
        return 2 if sink is None else asyncio.run(_sync_over_http(args, sink))
    if not args.tenant:
        return fail("pass --url URL (a running gateway) or --tenant T (the embedded data dir)")
    config = load_config(os.environ, data_dir=args.data_dir)
    return asyncio.run(_ingest_embedded(args, config))


def _http_sink(args: argparse.Namespace) -> HttpSink | None:
    """The sink for a running gateway, or None after saying what is wrong."""
    from ingest.connector import HttpSink

    if args.tenant or args.data_dir or args.org:
        fail("--url talks to a gateway: --data-dir, --tenant and --org do not apply")
        return None
    key = args.key or os.environ.get("KBGATE_KEY")
    if not key:
        fail("--url needs an API key: pass --key or set KBGATE_KEY")
        return None
    try:
        return HttpSink(args.url, key, args.kb)
    except ValueError as error:
        fail(str(error))
        return None


async def _sync_over_http(args: argparse.Namespace, sink: HttpSink) -> int:
    from gateway.cli.gateway_client import HttpGateway

    key = args.key or os.environ.get("KBGATE_KEY", "")
    async with sink, HttpGateway(args.url, key) as gateway:
        return await _prepare_then_sync(args, gateway, sink)


async def _prepare_then_sync(args: argparse.Namespace, gateway: Gateway, sink: DocumentSink) -> int:
    """Create the KB (--create-kb) and attach it to the agent (--agent), then sync."""
    from gateway.cli.gateway_client import Refused, Unreachable
    from gateway.cli.knowledge import attach_to_agent, create_knowledge_base

    try:
        if args.create_kb and await create_knowledge_base(gateway, args.kb, {"name": args.kb}):
            progress(f"kbgate ingest: created knowledge base {args.kb}")
        if args.agent:
            progress(f"kbgate ingest: {await attach_to_agent(gateway, args.agent, args.kb)}")
    except Refused as refused:
        return fail(refused.render())
    except Unreachable as error:
        return fail(str(error))
    return await _run_sync(args, sink)


def progress(message: str) -> None:
    """A line about the run on stderr, apart from the summary on stdout."""
    print(message, file=sys.stderr, flush=True)  # noqa: T201 — the CLI's own output


async def _run_sync(args: argparse.Namespace, sink: DocumentSink) -> int:
    from gateway.cli.progress import ingest_progress
    from ingest.connector import SinkUnavailableError, sync_directory

    reporter = ingest_progress(sys.stderr)
    try:
        summary = await sync_directory(
            args.directory,
            sink,
            args.classification,
            progress=reporter,
            allow_empty=args.allow_empty,
        )
    except SinkUnavailableError as error:
        return fail(str(error))
    finally:
        reporter.close()
    if args.json:
        say(json.dumps(summary.as_dict(), indent=2))
    else:
        say(f"kbgate ingest: {summary.render()}")
    return 0 if summary.ok else 1


async def _ingest_embedded(args: argparse.Namespace, config: Config) -> int:
    from gateway.access.auth import Principal
    from gateway.cli.embedded_sink import EmbeddedSink, engine_message
    from gateway.cli.gateway_client import EmbeddedGateway
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir
    from gateway.runtime.services import build_services
    from gateway.telemetry import Telemetry, build_logger
    from ingest.index import IndexUnavailableError
    from settings.records import Role

    if not (config.redis_url and config.qdrant_url) and not config.data_dir.is_dir():
        return fail(f"no data dir at {config.data_dir} (pass --data-dir or KBGATE_DATA_DIR)")
    try:
        data_dir_lock = hold_data_dir(config, "ingest")
    except DataDirInUseError as error:
        return fail(str(error))
    services = await build_services(config, Telemetry(build_logger("WARNING", sys.stderr)))
    try:
        workspace = await services.store.get_workspace(args.tenant)
        if workspace is None:
            return fail(f"no workspace {args.tenant!r} in {config.data_dir}")
        if args.org and args.org != workspace.org_id:
            return fail(f"workspace {args.tenant!r} belongs to another organization")
        principal = Principal(
            key_id="cli",
            roles=frozenset({Role.INGEST}),
            org_id=workspace.org_id,
            tenant_id=workspace.tenant_id,
            clearance=Classification.RESTRICTED,
        )
        sink = EmbeddedSink(services.documents, services.index, principal, args.kb, config.data_dir)
        admin = dataclasses.replace(principal, roles=frozenset({Role.ADMIN, Role.INGEST}))
        gateway = EmbeddedGateway(
            knowledge=services.knowledge,
            planning=services.planning,
            retrieval=services.retrieval,
            workspaces=services.workspaces,
            deletions=services.deletions,
            workspace=admin,
        )
        status = await _prepare_then_sync(args, gateway, sink)
        # No gateway serves this data dir now: index what was written, as a start would.
        try:
            await services.index.optimize()
        except IndexUnavailableError as error:  # searched exactly meanwhile: still served
            reason = engine_message(error, config.data_dir)
            progress(f"kbgate ingest: the search indexes were not built: {reason}")
        return status
    finally:
        await services.close()
        if data_dir_lock is not None:
            data_dir_lock.release()
        close = getattr(services.embedder, "close", None)
        if callable(close):
            close()
