"""`kbgate export` and `kbgate import`: a workspace's archive out of one gateway and into
another, over their HTTP APIs (`--url` or KBGATE_URL, `--key` or KBGATE_KEY).

`export` streams `GET /v1/orgs/{org}/workspaces/{tenant}/export` into a file (the platform
key, or the workspace's admin key); `import` sends a file to
`POST /v1/orgs/{org}/workspaces/{tenant}/import` (the platform key) and prints the counts
it wrote. Exit status: 0 done, 1 the gateway refused (its problem detail is shown), 2 bad
arguments, an unreadable file, or no gateway to talk to.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from kbgate_client import ProblemError

#: an archive of a large workspace takes a while to build or to import
_TIMEOUT_S = 600.0


def add_transfer_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `export` and `import` on the `kbgate` parser."""
    export = _command(commands, "export", "write a workspace's archive (its knowledge) to a file")
    export.add_argument("--output", "-o", type=Path, required=True, help="the archive to write")
    export.set_defaults(run=_export)
    load = _command(commands, "import", "create a workspace from an archive (platform key)")
    load.add_argument("archive", type=Path, help="an archive written by `kbgate export`")
    load.add_argument("--json", action="store_true", help="print the API's JSON answer")
    load.set_defaults(run=_import)


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("org_id")
    parser.add_argument("tenant_id")
    parser.add_argument("--url", help="the gateway's base URL (KBGATE_URL)")
    parser.add_argument("--key", help="the calling key (KBGATE_KEY)")
    return parser


def _export(args: argparse.Namespace) -> int:
    from kbgate_client import Client, KbgateError, ProblemError

    target = _target(args)
    if target is None:
        return _fail("give --url and --key (or set KBGATE_URL and KBGATE_KEY)")
    partial = args.output.with_name(args.output.name + ".part")
    try:
        with Client(*target, timeout_s=_TIMEOUT_S) as client, partial.open("wb") as out:
            client.export_workspace(args.org_id, args.tenant_id, out)
    except ProblemError as error:
        partial.unlink(missing_ok=True)
        return _refused(error)
    except (KbgateError, OSError) as error:
        partial.unlink(missing_ok=True)
        return _fail(f"export failed: {error}")
    partial.replace(args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes)")  # noqa: T201 — the CLI's own output
    return 0


def _import(args: argparse.Namespace) -> int:
    from kbgate_client import Client, KbgateError, ProblemError

    target = _target(args)
    if target is None:
        return _fail("give --url and --key (or set KBGATE_URL and KBGATE_KEY)")
    try:
        archive = args.archive.read_bytes()
    except OSError as error:
        return _fail(f"cannot read {args.archive}: {error}")
    try:
        with Client(*target, timeout_s=_TIMEOUT_S) as client:
            answer = client.import_workspace(args.org_id, args.tenant_id, archive)
    except ProblemError as error:
        return _refused(error)
    except KbgateError as error:
        return _fail(f"no gateway answered at {target[0]}: {error}")
    counts = msgspec.to_builtins(answer.imported)
    text = f"imported {answer.tenant_id} into {answer.org_id}: " + ", ".join(
        f"{count} {name.replace('_', ' ')}" for name, count in counts.items()
    )
    shown = json.dumps(msgspec.to_builtins(answer), indent=2) if args.json else text
    print(shown)  # noqa: T201 — the CLI's own output
    return 0


def _target(args: argparse.Namespace) -> tuple[str, str] | None:
    url = args.url or os.environ.get("KBGATE_URL")
    key = args.key or os.environ.get("KBGATE_KEY")
    return (url.rstrip("/"), key) if url and key else None


def _refused(error: ProblemError) -> int:
    problem = error.problem
    where = f" ({problem.field})" if problem.field else ""
    message = f"kbgate: refused, {problem.status}: {problem.detail or problem.title}{where}"
    print(message, file=sys.stderr)  # noqa: T201 — the CLI's own output
    return 1


def _fail(message: str) -> int:
    print(f"kbgate: {message}", file=sys.stderr)  # noqa: T201 — the CLI's own output
    return 2
