"""`kbgate backfill-org`: set orgId on a workspace's legacy passages, with no gateway on
the data dir."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.output import fail, say
from settings.config import load_config

if TYPE_CHECKING:
    from settings.config import Config


def add_backfill_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    backfill.set_defaults(run=run_backfill)


def run_backfill(args: argparse.Namespace) -> int:
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir

    config = load_config(os.environ, data_dir=args.data_dir)
    if not (config.redis_url and config.qdrant_url) and not config.data_dir.is_dir():
        return fail(f"no data dir at {config.data_dir} (pass --data-dir or KBGATE_DATA_DIR)")
    try:
        data_dir_lock = hold_data_dir(config, "backfill-org")
    except DataDirInUseError as error:
        return fail(str(error))
    try:
        return asyncio.run(_backfill_org(args, config))
    finally:
        if data_dir_lock is not None:
            data_dir_lock.release()


async def _backfill_org(args: argparse.Namespace, config: Config) -> int:
    from gateway.cli.embedded_sink import engine_message
    from gateway.runtime.services import build_index, build_store
    from ingest.index import SHARED_COLLECTION, IndexUnavailableError, org_collection
    from ingest.payload import Classification, Scope

    store, _ = await build_store(config)
    try:
        workspace = await store.get_workspace(args.tenant)
        if workspace is None:
            return fail(f"no workspace {args.tenant!r}")
        if workspace.org_id != args.org:
            return fail(f"workspace {args.tenant!r} does not belong to organization {args.org!r}")
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
        index, _ = await build_index(config)
        try:
            for collection in counts:
                counts[collection] = await index.backfill_org(collection, scope)
        except IndexUnavailableError as error:
            return fail(engine_message(error, config.data_dir))
        finally:
            await index.close()
    total = sum(counts.values())
    if args.json:
        say(json.dumps({"updated": total, "collections": counts, "knowledge_bases": kb_ids}))
    else:
        where = ", ".join(f"{name}: {count}" for name, count in counts.items())
        say(
            f"kbgate backfill-org: set orgId on {total} legacy points of workspace "
            f"{args.tenant!r} across {len(kb_ids)} knowledge bases ({where})"
        )
    return 0
