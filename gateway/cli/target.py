"""Which gateway an administration command talks to, and how it answers.

`--url URL` (or KBGATE_URL) with `--key` (or KBGATE_KEY): a running gateway over HTTP.
Otherwise, or with `--data-dir`: the embedded data dir in this process (KBGATE_DATA_DIR,
default `./kbgate-data`), which no gateway may be serving; workspace commands then name
their workspace with `--tenant`. A command prints a short answer for people, or the API's
JSON with `--json`. Exit status: 0 done, 1 refused (the problem detail is printed), 2 bad
arguments or no gateway to talk to.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

from gateway.cli.gateway_client import (
    Gateway,
    HttpGateway,
    Refused,
    Unreachable,
    embedded_gateway,
)
from gateway.cli.output import fail, say

#: the `kbgate` parser's subcommands, which each command module registers on
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: a command: the gateway and the arguments -> (the API's JSON, the text for people)
Action = Callable[[Gateway, argparse.Namespace], Awaitable[tuple[Any, str]]]

MODES = """\
where:
  --url URL [--key KEY]     a running gateway (or KBGATE_URL, KBGATE_KEY)
  [--data-dir DIR]          the embedded data dir, no gateway serving it (KBGATE_DATA_DIR)
"""
#: MODES for a workspace command, which names its workspace in the embedded data dir
WORKSPACE_MODES = MODES.replace("(KBGATE_DATA_DIR)", "(KBGATE_DATA_DIR) with --tenant T")


def add_target_arguments(parser: argparse.ArgumentParser, *, workspace: bool) -> None:
    """--url, --key, --data-dir, --json, and with `workspace` --tenant."""
    parser.add_argument("--url", help="a running gateway's base URL (KBGATE_URL)")
    parser.add_argument("--key", help="the calling key (KBGATE_KEY)")
    parser.add_argument("--data-dir", type=Path, help="embedded data dir (KBGATE_DATA_DIR)")
    if workspace:
        parser.add_argument("--tenant", help="the workspace to act in (embedded data dir only)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")


def add_group(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """A command group, `kbgate NAME ACTION ...`, whose action is required."""
    parser = commands.add_parser(name, help=help_text)
    return parser.add_subparsers(required=True, metavar="ACTION")


def add_command(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    *,
    workspace: bool = False,
) -> argparse.ArgumentParser:
    """An action of a group, with the target arguments and where they point as its epilog."""
    parser = group.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=WORKSPACE_MODES if workspace else MODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser, workspace=workspace)
    return parser


def runner(action: Action, *, workspace: bool = False) -> Callable[[argparse.Namespace], int]:
    """The `run` of a command: reach the gateway, do `action`, print, exit status."""

    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(_run(action, args, workspace=workspace))
        except Unreachable as error:
            return fail(str(error))

    return run


async def _run(action: Action, args: argparse.Namespace, *, workspace: bool) -> int:
    async with reach(args, workspace=workspace) as gateway:
        try:
            answer, text = await action(gateway, args)
        except Refused as refused:
            return fail_refused(refused)
    say(json.dumps(answer, indent=2) if args.json else text)
    return 0


def fail_refused(refused: Refused) -> int:
    """Print the gateway's refusal on stderr; exit status 1."""
    fail(refused.render())
    return 1


@asynccontextmanager
async def reach(args: argparse.Namespace, *, workspace: bool) -> AsyncIterator[Gateway]:
    """The gateway the arguments name (see the module docstring); Unreachable otherwise."""
    url = args.url or (None if args.data_dir else os.environ.get("KBGATE_URL"))
    tenant = getattr(args, "tenant", None)
    if url:
        if args.data_dir or tenant:
            raise Unreachable(
                "--url talks to a running gateway: --data-dir and --tenant do not apply"
            )
        key = args.key or os.environ.get("KBGATE_KEY")
        if not key:
            raise Unreachable("--url needs a key: pass --key or set KBGATE_KEY")
        async with HttpGateway(url, key) as gateway:
            yield gateway
        return
    if workspace and not tenant:
        raise Unreachable(
            "name the gateway (--url URL, or KBGATE_URL) or, for the embedded data dir, "
            "the workspace (--tenant)"
        )
    async with embedded_gateway(args.data_dir, tenant, "admin") as gateway:
        yield gateway
