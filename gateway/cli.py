"""The `kbgate` command."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from gateway.auth import PLATFORM_KEY_ID, hash_key, new_secret
from settings.config import Config, ConfigError, load_config
from settings.records import ApiKey, Role
from settings.store import AlreadyExistsError


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
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app

    config = load_config(os.environ, host=args.host, port=args.port, data_dir=args.data_dir)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    generated = asyncio.run(_ensure_platform_key(config))
    if generated:
        _say(
            "kbgate: generated the platform key (shown once; set KBGATE_PLATFORM_KEY to choose "
            f"your own):\n  {generated}"
        )
    _say(f"kbgate: serving on http://{config.host}:{config.port} (API schema at /schema)")
    uvicorn.run(
        create_app(config),
        host=config.host,
        port=config.port,
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )
    return 0


async def _ensure_platform_key(config: Config) -> str | None:
    """Generate and store (hashed) a platform key on first start, unless one is configured."""
    if config.platform_key is not None:
        return None
    from gateway.services import build_store

    store, _ = await build_store(config)
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
