"""`kbgate orgs|workspaces|keys ...`: provisioning and key lifecycle.

Against a running gateway (`--url`/KBGATE_URL with a platform key, `--key`/KBGATE_KEY) or
the embedded data dir (`gateway.cli.target`). Each prints a short answer, or the API's
JSON with `--json`. A key's secret is printed only when it is issued, once, as the API
returns it. `workspaces create --create-org --issue-key` sets up a workspace to work in
with one command: the organization when it is new, the workspace, and a key with the
admin, ingest and retrieve roles. `orgs delete` and `workspaces delete` erase everything
the organization or workspace holds and need `--yes`.
"""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.gateway_client import Gateway, Refused
from gateway.cli.target import add_command, add_group, runner

WORKSPACE_ROLES = ["admin", "ingest", "retrieve"]


def add_admin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `orgs`, `workspaces` and `keys` on the `kbgate` parser."""
    orgs = add_group(commands, "orgs", "organizations (platform key)")
    create_org = add_command(orgs, "create", "create an organization")
    create_org.add_argument("org_id")
    create_org.set_defaults(run=runner(_create_org))
    delete_org = add_command(
        orgs, "delete", "delete an organization: each of its workspaces, then its collection"
    )
    delete_org.add_argument("org_id")
    _confirm_argument(delete_org)
    delete_org.set_defaults(run=runner(_delete_org))

    workspaces = add_group(commands, "workspaces", "workspaces (platform key)")
    create_ws = add_command(workspaces, "create", "create a workspace in an organization")
    create_ws.add_argument("org_id")
    create_ws.add_argument("tenant_id")
    create_ws.add_argument("--created-at", help="ISO 8601 creation time (default: now)")
    create_ws.add_argument(
        "--create-org", action="store_true", help="create the organization too when it is new"
    )
    create_ws.add_argument(
        "--issue-key",
        action="store_true",
        help="also issue a key with the admin, ingest and retrieve roles (printed once)",
    )
    create_ws.set_defaults(run=runner(_create_workspace))
    delete_ws = add_command(
        workspaces, "delete", "delete a workspace with its KBs, passages, agents, keys and turns"
    )
    delete_ws.add_argument("org_id")
    delete_ws.add_argument("tenant_id")
    _confirm_argument(delete_ws)
    delete_ws.set_defaults(run=runner(_delete_workspace))

    keys = add_group(commands, "keys", "workspace keys: create, list, revoke")
    create_key = add_command(keys, "create", "issue a key (its secret is printed once)")
    create_key.add_argument("--org", required=True, dest="org_id")
    create_key.add_argument("--tenant", required=True, dest="tenant_id")
    create_key.add_argument(
        "--role",
        action="append",
        required=True,
        dest="roles",
        choices=WORKSPACE_ROLES,
        help="a role (repeat for several)",
    )
    create_key.add_argument("--clearance", help="public, internal, confidential or restricted")
    expiry = create_key.add_mutually_exclusive_group()
    expiry.add_argument("--ttl", type=int, dest="ttl_s", help="expire after this many seconds")
    expiry.add_argument("--expires-at", help="expire at this ISO 8601 time")
    create_key.set_defaults(run=runner(_create_key))
    list_keys = add_command(keys, "list", "list keys (metadata only, never a secret)")
    list_keys.add_argument("--org", dest="org_id", help="only this organization's (platform)")
    list_keys.add_argument("--tenant", dest="tenant_id", help="only this workspace's (platform)")
    list_keys.set_defaults(run=runner(_list_keys))
    revoke = add_command(keys, "revoke", "revoke a key: refused from now on")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=runner(_revoke_key))


def _confirm_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes", action="store_true", required=True, help="confirm: nothing can be restored"
    )


async def _create_org(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.create_org(args.org_id)
    return answer, f"created organization {answer['org_id']}"


async def _create_workspace(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    lines = []
    org = None
    if args.create_org:
        try:
            org = await gateway.create_org(args.org_id)
            lines.append(f"created organization {org['org_id']}")
        except Refused as refused:
            if refused.status != 409:  # 409: it exists, which is what was asked for
                raise
    answer = await gateway.create_workspace(args.org_id, args.tenant_id, args.created_at)
    lines.append(f"created workspace {answer['tenant_id']} in {answer['org_id']}")
    if org is not None:
        answer["org"] = org
    if args.issue_key:
        key = await gateway.create_key(
            {"org_id": args.org_id, "tenant_id": args.tenant_id, "roles": WORKSPACE_ROLES}
        )
        answer["key"] = key
        lines.append(_issued(key))
        lines.append(f"use it: export KBGATE_KEY={key['key']}")
    return answer, "\n".join(lines)


async def _delete_workspace(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.delete_workspace(args.org_id, args.tenant_id)
    return answer, (
        f"deleted workspace {answer['tenant_id']} in {answer['org_id']}: "
        + _removed_words(answer["deleted"])
    )


async def _delete_org(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.delete_org(args.org_id)
    dropped = "its collection dropped" if answer["collection_dropped"] else "no collection"
    return answer, (
        f"deleted organization {answer['org_id']} ({answer['workspaces']} workspaces, "
        f"{dropped}): " + _removed_words(answer["deleted"])
    )


def _removed_words(deleted: dict[str, int]) -> str:
    return ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in deleted.items())


async def _create_key(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    body: dict[str, Any] = {"org_id": args.org_id, "tenant_id": args.tenant_id, "roles": args.roles}
    for name in ("clearance", "ttl_s", "expires_at"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    answer = await gateway.create_key(body)
    return answer, _issued(answer)


def _issued(answer: dict[str, Any]) -> str:
    expires = f", expires {answer['expires_at']}" if answer.get("expires_at") else ""
    return (
        f"created {answer['key_id']} ({', '.join(answer['roles'])}; clearance "
        f"{answer['clearance']}{expires}) in {answer['tenant_id']}\n"
        f"key (shown once): {answer['key']}"
    )


async def _list_keys(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.list_keys(args.org_id, args.tenant_id)
    rows = [
        f"{key['key_id']}  {key['org_id'] or '-'}/{key['tenant_id'] or '-'}  "
        f"{','.join(key['roles'])}  {key['clearance']}  created {key['created_at']}  "
        f"last used {key['last_used_at'] or 'never'}  expires {key['expires_at'] or 'never'}"
        for key in answer["keys"]
    ]
    return answer, "\n".join(rows) if rows else "no keys"


async def _revoke_key(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.revoke_key(args.key_id)
    return answer, f"revoked {answer['key_id']}"
