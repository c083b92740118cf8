"""The `kbgate` command: serve, ingest, ask, backfill-org, eval, probe, mcp, and the admin commands.

Each command's module registers its arguments here and imports what it needs only when it
runs, so `kbgate serve` never loads the operator tools.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gateway.blas import single_threaded_blas
from gateway.cli.admin import add_admin_commands
from gateway.cli.backfill import add_backfill_command
from gateway.cli.ingest import add_ingest_command
from gateway.cli.knowledge import add_knowledge_commands
from gateway.cli.mcp import add_mcp_command
from gateway.cli.model import add_model_commands
from gateway.cli.pii import add_pii_command
from gateway.cli.serve import add_serve_command
from gateway.cli.transfer import add_transfer_commands
from gateway.cli.workspace_settings import add_settings_commands
from gateway.tools.evaluation.command import add_eval_command
from gateway.tools.probe.command import add_probe_command
from settings.config import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    single_threaded_blas()  # before any command imports numpy
    parser = _parser()
    args, passed_on = parser.parse_known_args(argv)
    if passed_on and not getattr(args, "passes_arguments_on", False):
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    args.passed_on = passed_on
    try:
        return int(args.run(args))
    except ConfigError as error:
        print(f"kbgate: configuration error: {error}", file=sys.stderr)  # noqa: T201 — the CLI's own output
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbgate", description="The `kbgate` command: serve, ingest, backfill-org, eval, probe."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    add_serve_command(commands)
    add_model_commands(commands)
    add_ingest_command(commands)
    add_backfill_command(commands)
    add_pii_command(commands)
    add_eval_command(commands)
    add_probe_command(commands)
    add_admin_commands(commands)
    add_transfer_commands(commands)
    add_mcp_command(commands)
    add_knowledge_commands(commands)
    add_settings_commands(commands)
    return parser
