"""`kbgate analyse-pii`: store a current PII analysis on every passage of an org's
workspaces that lacks one, with no gateway on the data dir.

Passages written before PII analysis at ingest, or analysed by an older analyzer (another
recognizer revision, presidio, phonenumbers or NER pipeline version), are otherwise
analysed when a turn first returns them. The command pages through them per knowledge
base and writes each page's analyses before reading the next, so it can be stopped at any
point and run again: a second run finds nothing left (0).
"""

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
    from gateway.safety.redaction import Redactor
    from ingest.index import Index
    from ingest.payload import Scope
    from settings.config import Config

#: Passages analysed and written per page.
PAGE = 64


def add_pii_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "analyse-pii",
        help="analyse passages stored without a current PII analysis (resumable)",
        description=(
            "Store the current analyzer's PII spans on every passage of the organization's "
            "workspaces (or one workspace) whose stored analysis is missing or another "
            "analyzer's. Resumable: stop it at any point and run it again; a run with "
            "nothing left changes 0. Run it with no gateway on an embedded data dir."
        ),
    )
    command.add_argument("--org", required=True, help="the organization id")
    command.add_argument("--tenant", help="one workspace of it (default: all of them)")
    command.add_argument("--data-dir", type=Path, help="embedded data dir (KBGATE_DATA_DIR)")
    command.add_argument("--json", action="store_true", help="print the counts as JSON")
    command.set_defaults(run=run_analyse_pii)


def run_analyse_pii(args: argparse.Namespace) -> int:
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir

    config = load_config(os.environ, data_dir=args.data_dir)
    if not (config.redis_url and config.qdrant_url) and not config.data_dir.is_dir():
        return fail(f"no data dir at {config.data_dir} (pass --data-dir or KBGATE_DATA_DIR)")
    try:
        data_dir_lock = hold_data_dir(config, "analyse-pii")
    except DataDirInUseError as error:
        return fail(str(error))
    try:
        return asyncio.run(_analyse_org(args, config))
    finally:
        if data_dir_lock is not None:
            data_dir_lock.release()


async def _analyse_org(args: argparse.Namespace, config: Config) -> int:
    from gateway.cli.embedded_sink import engine_message
    from gateway.runtime.services import build_index, build_store
    from gateway.safety.redaction import Redactor
    from ingest.index import IndexUnavailableError
    from ingest.sync import Target

    store, _ = await build_store(config)
    try:
        workspaces = await store.list_workspaces(args.org)
        if args.tenant is not None:
            workspaces = [w for w in workspaces if w.tenant_id == args.tenant]
            if not workspaces:
                return fail(f"no workspace {args.tenant!r} in organization {args.org!r}")
        targets = [
            Target(org_id=kb.org_id, tenant_id=kb.tenant_id, kb_id=kb.kb_id, storage=kb.storage)
            for workspace in workspaces
            for kb in await store.list_knowledge_bases(workspace.tenant_id)
        ]
    finally:
        await store.close()
    redactor = await asyncio.to_thread(Redactor.build)
    index, _ = await build_index(config)
    analysed = 0
    try:
        for target in targets:
            analysed += await analyse_stale(
                index, redactor, target.collection, target.write_scope()
            )
    except IndexUnavailableError as error:
        return fail(engine_message(error, config.data_dir))
    finally:
        await index.close()
    report = {
        "analysed": analysed,
        "knowledge_bases": len(targets),
        "workspaces": len(workspaces),
        "analyzer": redactor.analyzer_version,
        "ner_model": redactor.ner_model,
    }
    if args.json:
        say(json.dumps(report))
    else:
        say(
            f"kbgate analyse-pii: analysed {analysed} passages in {len(targets)} knowledge "
            f"bases of {len(workspaces)} workspaces (analyzer {redactor.analyzer_version}, "
            f"NER {redactor.ner_model or 'none'})"
        )
    return 0


async def analyse_stale(index: Index, redactor: Redactor, collection: str, scope: Scope) -> int:
    """Analyse and store, page by page, every passage inside the scope whose analysis is
    missing or another analyzer's; returns how many were written."""
    from ingest.payload import analysed_strings, analysis_of

    version = redactor.analyzer_version
    written, offset = 0, None
    while True:
        page, offset = await index.stale_pii_page(collection, scope, version, offset, PAGE)
        if page:
            strings = list(dict.fromkeys(s for p in page for s in analysed_strings(p.payload)))
            spans = await asyncio.to_thread(redactor.analyze_texts, strings)
            found = dict(zip(strings, spans, strict=True))
            analyses = {p.point_id: analysis_of(version, p.payload, found) for p in page}
            written += await index.set_pii(collection, scope, analyses)
        if offset is None:
            return written
