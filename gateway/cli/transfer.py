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
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

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


def _path(args: argparse.Namespace, action: str) -> str:
    org, tenant = (urllib.parse.quote(value, safe="") for value in (args.org_id, args.tenant_id))
    return f"/v1/orgs/{org}/workspaces/{tenant}/{action}"


def _export(args: argparse.Namespace) -> int:
    target = _target(args)
    if target is None:
        return _fail("give --url and --key (or set KBGATE_URL and KBGATE_KEY)")
    url, key = target
    request = urllib.request.Request(  # noqa: S310 — the URL is the operator's own gateway
        url + _path(args, "export"), headers={"Authorization": f"Bearer {key}"}
    )
    partial = args.output.with_name(args.output.name + ".part")
    try:
        with (
            urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response,  # noqa: S310 — as above
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(response, out)
    except urllib.error.HTTPError as error:
        return _refused(error)
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        return _fail(f"export failed: {error}")
    partial.replace(args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes)")  # noqa: T201 — the CLI's own output
    return 0


def _import(args: argparse.Namespace) -> int:
    target = _target(args)
    if target is None:
        return _fail("give --url and --key (or set KBGATE_URL and KBGATE_KEY)")
    url, key = target
    try:
        size = args.archive.stat().st_size
        archive = args.archive.open("rb")
    except OSError as error:
        return _fail(f"cannot read {args.archive}: {error}")
    request = urllib.request.Request(  # noqa: S310 — the URL is the operator's own gateway
        url + _path(args, "import"),
        data=archive,
        method="POST",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/gzip",
            "Content-Length": str(size),
        },
    )
    try:
        with archive, urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310 — as above
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as error:
        return _refused(error)
    except (urllib.error.URLError, OSError) as error:
        return _fail(f"no gateway answered at {url}: {error}")
    counts = answer["imported"]
    text = f"imported {answer['tenant_id']} into {answer['org_id']}: " + ", ".join(
        f"{count} {name.replace('_', ' ')}" for name, count in counts.items()
    )
    print(json.dumps(answer, indent=2) if args.json else text)  # noqa: T201 — the CLI's own output
    return 0


def _target(args: argparse.Namespace) -> tuple[str, str] | None:
    url = args.url or os.environ.get("KBGATE_URL")
    key = args.key or os.environ.get("KBGATE_KEY")
    return (url.rstrip("/"), key) if url and key else None


def _refused(error: urllib.error.HTTPError) -> int:
    try:
        parsed = json.loads(error.read())
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    detail = body.get("detail") or body.get("title") or ""
    field = body.get("field")
    where = f" ({field})" if field else ""
    print(f"kbgate: refused, {error.code}: {detail}{where}", file=sys.stderr)  # noqa: T201 — the CLI's own output
    return 1


def _fail(message: str) -> int:
    print(f"kbgate: {message}", file=sys.stderr)  # noqa: T201 — the CLI's own output
    return 2
