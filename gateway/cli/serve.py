"""`kbgate serve`: the gateway's HTTP server on the configured data dir and engines.

Everything the server needs is imported when the command runs, not when `kbgate` starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.output import fail, say
from settings.config import load_config

if TYPE_CHECKING:
    from settings.config import Config

#: How long a thread runs before another thread waiting for the GIL may take it (Python's
#: default is 5 ms). One workspace's CPU-heavy work (PII analysis, chunking, fusion) then
#: holds another's turn for a millisecond at a time, not five: under the fairness bench's
#: floods B's retrieve stays within 1.5x idle (docs/decisions/expensive-work-pool.md).
GIL_SWITCH_INTERVAL_S = 0.001


def add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve", help="run the gateway (embedded defaults unless configured)"
    )
    serve.add_argument("--host", help="bind address (KBGATE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (KBGATE_PORT, default 8080)")
    serve.add_argument("--data-dir", type=Path, help="data directory (KBGATE_DATA_DIR)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.http.app import create_app
    from gateway.http.shutdown import Drain, GracefulServer
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir
    from gateway.runtime.memory import bound_allocator
    from gateway.runtime.services import check_index_server
    from ingest.index import IncompatibleServerError

    bound_allocator()  # before any thread allocates: see gateway/runtime/memory.py
    share_the_gil()
    config = load_config(os.environ, host=args.host, port=args.port, data_dir=args.data_dir)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        data_dir_lock = hold_data_dir(config, "serve")  # held until the process exits
        asyncio.run(check_index_server(config))
    except (DataDirInUseError, IncompatibleServerError) as error:
        return fail(str(error))
    generated = asyncio.run(_ensure_platform_key(config))
    if generated:
        say(
            "kbgate: generated the platform key (shown once; set KBGATE_PLATFORM_KEY to choose "
            f"your own):\n  {generated}"
        )
    say("kbgate: starting (loading the models and opening the indexes)")
    drain = Drain()
    server_config = uvicorn.Config(
        create_app(config, drain=drain),
        host=config.host,
        port=config.port,
        access_log=False,
        log_level="warning",
        loop="asyncio",  # not uvloop: docs/decisions/http-server.md
        http="httptools",
        # Forwarding headers are the app's to judge (KBGATE_TRUSTED_PROXIES,
        # gateway.http.forwarding): uvicorn's default trusts any peer on loopback.
        proxy_headers=False,
        timeout_graceful_shutdown=1,  # after the drain: idle connections only
    )
    try:
        GracefulServer(
            server_config, drain, config.shutdown_timeout_s, on_listening=lambda: _listening(config)
        ).run()
    finally:
        if data_dir_lock is not None:
            data_dir_lock.release()
    return 0


def share_the_gil() -> None:
    """This process's threads take turns on the GIL every `GIL_SWITCH_INTERVAL_S`."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def _listening(config: Config) -> None:
    say(f"kbgate: serving on http://{config.host}:{config.port} (API schema at /schema)")
    say(f"kbgate: admin console at http://{config.host}:{config.port}/console")


async def _ensure_platform_key(config: Config) -> str | None:
    """Generate and store (hashed) a platform key on first start, unless one is configured;
    a configured one retires (deletes) a generated key stored earlier."""
    from gateway.access.auth import PLATFORM_KEY_ID, hash_key, new_secret
    from gateway.admin.provisioning import retire_generated_platform_key
    from gateway.runtime.services import build_store
    from settings.records import ApiKey, Role
    from settings.store import AlreadyExistsError

    store, _ = await build_store(config)
    if config.platform_key is not None:
        try:
            if await retire_generated_platform_key(store):
                say("kbgate: retired the generated platform key (KBGATE_PLATFORM_KEY is set)")
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
