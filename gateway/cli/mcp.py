"""`kbgate mcp`: kbgate_client's MCP server (`kbgate_client.mcp_server`) for one
workspace's key, over stdio or streamable HTTP; its arguments pass through."""

from __future__ import annotations

import argparse
import sys


def add_mcp_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_text = (
        "an MCP server of retrieval, citation checks and grounding for one workspace's key "
        "(KBGATE_URL, KBGATE_KEY, KBGATE_AGENT; --transport stdio|streamable-http)"
    )
    parser = commands.add_parser("mcp", help=help_text, description=help_text, add_help=False)
    # every argument goes to the server's own parser (`kbgate mcp --help` shows them)
    parser.set_defaults(run=_run, passes_arguments_on=True)


def _run(args: argparse.Namespace) -> int:
    try:
        from kbgate_client.mcp_server import main
    except ImportError as error:
        print(f"kbgate mcp: needs kbgate-client[mcp] ({error})", file=sys.stderr)  # noqa: T201 — the CLI's own output
        return 2
    return main(args.passed_on)
