"""`kbgate settings show|set|history`: a workspace's own settings (admin key).

`set` sends only the settings it is given, as `PATCH /v1/workspace/settings` does (`--reset
NAME` returns one to its default); every change is recorded in the history with the key
that made it (`cli` on the embedded data dir).
"""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.gateway_client import Gateway, Refused
from gateway.cli.setting_options import (
    add_reset_argument,
    refuse_set_and_reset,
    settings_given,
    shown,
)
from gateway.cli.target import Commands, add_command, add_group, runner

#: the workspace settings, as the API names them
SETTINGS = (
    "strict_rag_isolation",
    "rag_pii_redaction",
    "max_knowledge_bases_per_agent",
    "pii_entities",
    "pii_allow_list",
    "pii_operators",
    "turn_retention_s",
)


def add_settings_commands(commands: Commands) -> None:
    """Register `settings show|set|history` on the `kbgate` parser."""
    settings = add_group(commands, "settings", "the workspace's own settings (admin key)")
    show = add_command(settings, "show", "the settings in force and who set them", workspace=True)
    show.set_defaults(run=runner(_show, workspace=True))

    change = add_command(
        settings, "set", "change some settings, the rest kept (recorded)", workspace=True
    )
    change.add_argument(
        "--strict-rag-isolation",
        choices=("on", "off"),
        help="every search also bound to the organization",
    )
    change.add_argument(
        "--rag-pii-redaction", choices=("on", "off"), help="redact PII in returned passages"
    )
    change.add_argument(
        "--max-knowledge-bases-per-agent", type=int, metavar="N", help="KBs a turn queries"
    )
    change.add_argument(
        "--pii-entities",
        type=_names,
        metavar="TYPE,...",
        help="the PII types redacted, e.g. PERSON,EMAIL_ADDRESS",
    )
    change.add_argument(
        "--pii-allow-list",
        action="append",
        metavar="VALUE",
        help="a value, CIDR range or re: pattern redaction keeps (repeat; replaces the list)",
    )
    change.add_argument(
        "--pii-operators",
        type=_operators,
        metavar="TYPE=OPERATOR,...",
        help="how values are replaced, per type: replace (<PERSON>, the default), mask (every "
        "character *) or pseudonym (<PERSON_7f3a12>); e.g. PERSON=pseudonym,EMAIL_ADDRESS=mask "
        "(replaces the mapping)",
    )
    change.add_argument(
        "--turn-retention-s", type=int, metavar="SECONDS", help="how long turn records are kept"
    )
    add_reset_argument(change, SETTINGS)
    change.set_defaults(run=runner(_set, workspace=True))

    history = add_command(
        settings, "history", "every settings change: when, by which key, old and new",
        workspace=True,
    )  # fmt: skip
    history.set_defaults(run=runner(_history, workspace=True))


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def _operators(value: str) -> dict[str, str]:
    """`PERSON=pseudonym,EMAIL_ADDRESS=mask` as a mapping (the API checks the names)."""
    pairs = [pair.partition("=") for pair in _names(value)]
    if any(not sep or not name.strip() for name, sep, _ in pairs):
        raise argparse.ArgumentTypeError(f"expected TYPE=OPERATOR,..., got {value!r}")
    return {name.strip(): operator.strip() for name, _, operator in pairs}


async def _show(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.workspace_settings()
    return answer, _settings_text(answer)


async def _set(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    given = settings_given(args, SETTINGS)
    refuse_set_and_reset(given, args.reset)
    if not given and not args.reset:
        raise Refused(422, {"detail": "nothing to change: give a setting or --reset NAME"})
    answer = await gateway.change_workspace_settings(given | dict.fromkeys(args.reset))
    return answer, "updated\n" + _settings_text(answer)


async def _history(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.settings_history()
    lines = [
        f"{change['at']}  {change['key_id']}  {_where(change)}{change['setting']}: "
        f"{shown(change['old'])} -> {shown(change['new'])}"
        for change in answer["changes"]
    ]
    return answer, "\n".join(lines) or "no changes yet"


def _where(change: dict[str, Any]) -> str:
    kb_id = change.get("knowledge_base_id")
    return f"knowledge base {kb_id}: " if kb_id else ""


def _settings_text(answer: dict[str, Any]) -> str:
    lines = [f"workspace {answer['tenant_id']} in {answer['org_id']}"]
    for name, value in answer["effective"].items():
        clamped = ", clamped" if value.get("clamped") else ""
        lines.append(f"  {name}: {shown(value['value'])} (set by {value['source']}{clamped})")
    return "\n".join(lines)
