"""`kbgate probe` on the command line. Light to import: the campaign loads when the
command runs."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gateway.tools.probe.world import PHASES

if TYPE_CHECKING:
    from gateway.tools.probe.report import Report

_EPILOG = """\
The probe provisions its own throwaway organizations and workspaces (ids start with
probe-<random>), plants canary documents, and tries every endpoint as every one of its
keys to get another workspace's canaries, counts or ids back. It touches only what it
created, deletes its documents when done and lists what the API cannot delete. Its last
phase, `archive`, exports a workspace of its own and imports tampered copies (raw PII
under an emptied analysis, an oversized passage, a NaN vector, an out-of-bound setting,
a decompression bomb): no raw PII may come back, and each of the others is refused.

exit status: 0 no leak; 1 a leak was found; 2 bad arguments or provisioning failed;
3 no leak, but some probes could not vouch (unexpected answers, e.g. errors).
"""


def add_probe_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `kbgate probe --url URL --platform-key KEY`."""
    parser = subparsers.add_parser(
        "probe",
        help="probe a live deployment for cross-tenant leaks (isolation test)",
        description="Run the cross-tenant isolation probes against a running gateway.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_probe_command)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", required=True, help="the gateway's base URL, e.g. http://host:8080"
    )
    parser.add_argument(
        "--platform-key",
        default=None,
        help="the platform key (default: the KBGATE_PLATFORM_KEY environment variable)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        dest="json_path",
        help="also write the report as JSON here",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default 60)"
    )
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated phases to run, in order (default: all of {','.join(PHASES)})",
    )


def run_probe_command(args: argparse.Namespace) -> int:
    key = args.platform_key or os.environ.get("KBGATE_PLATFORM_KEY")
    if not key:
        sys.stderr.write("kbgate probe: give --platform-key or set KBGATE_PLATFORM_KEY\n")
        return 2
    phases = [name.strip() for name in str(args.phases).split(",") if name.strip()]
    unknown = [name for name in phases if name not in PHASES]
    if len(set(phases)) != len(phases):
        unknown.append("(a phase twice)")
    if unknown or not phases:
        sys.stderr.write(f"kbgate probe: unknown phases {unknown}; choose from {list(PHASES)}\n")
        return 2
    return probe(
        args.url,
        key,
        json_path=args.json_path,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        phases=phases,
    )


def probe(
    url: str,
    platform_key: str,
    *,
    json_path: Path | None = None,
    concurrency: int = 4,
    timeout_s: float = 60.0,
    phases: Sequence[str] = PHASES,
    out: TextIO | None = None,
) -> int:
    """Run the whole campaign against `url` over HTTP; print the report; return the exit code."""
    from gateway.tools.probe.campaign import run_campaign
    from gateway.tools.probe.client import ClientTransport

    stream = out or sys.stdout
    try:
        transport = ClientTransport.at(url, timeout_s)
    except ValueError as error:
        stream.write(f"kbgate probe: {error}\n")
        return 2

    def say(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    async def campaign() -> Report:
        async with transport.client:
            return await run_campaign(
                transport,
                platform_key,
                target=url,
                phases=phases,
                concurrency=concurrency,
                progress=say,
            )

    report = asyncio.run(campaign())
    stream.write(report.render())
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gateway.tools.probe.command --url URL [--platform-key KEY]`."""
    parser = argparse.ArgumentParser(
        prog="kbgate probe",
        description="Run the cross-tenant isolation probes against a running gateway.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    return run_probe_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
