"""`kbgate orgs|workspaces|keys ...`: provisioning and key lifecycle against a running gateway.

Each command calls the gateway's HTTP API (`--url` or KBGATE_URL, `--key` or
KBGATE_KEY) and prints a short human-readable answer, or the API's JSON with
`--json`. Exit status: 0 done, 1 the gateway refused (its problem detail is shown),
2 bad arguments or no gateway to talk to. A key's secret is printed only by
`keys create`, once, as the API returns it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

_TIMEOUT_S = 30.0


class _Refused(Exception):
    """The gateway answered with an error status."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class _Unreachable(Exception):
    """No gateway answered at the URL."""


def add_admin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `orgs`, `workspaces` and `keys` on the `kbgate` parser."""
    orgs = _group(commands, "orgs", "organizations (platform key)")
    create_org = _command(orgs, "create", "create an organization")
    create_org.add_argument("org_id")
    create_org.set_defaults(run=_run(_create_org))

    workspaces = _group(commands, "workspaces", "workspaces (platform key)")
    create_ws = _command(workspaces, "create", "create a workspace in an organization")
    create_ws.add_argument("org_id")
    create_ws.add_argument("tenant_id")
    create_ws.add_argument("--created-at", help="ISO 8601 creation time (default: now)")
    create_ws.set_defaults(run=_run(_create_workspace))

    keys = _group(commands, "keys", "workspace keys: create, list, revoke")
    create_key = _command(keys, "create", "issue a key (its secret is printed once)")
    create_key.add_argument("--org", required=True, dest="org_id")
    create_key.add_argument("--tenant", required=True, dest="tenant_id")
    create_key.add_argument(
        "--role",
        action="append",
        required=True,
        dest="roles",
        choices=("admin", "ingest", "retrieve"),
        help="a role (repeat for several)",
    )
    create_key.add_argument("--clearance", help="public, internal, confidential or restricted")
    expiry = create_key.add_mutually_exclusive_group()
    expiry.add_argument("--ttl", type=int, dest="ttl_s", help="expire after this many seconds")
    expiry.add_argument("--expires-at", help="expire at this ISO 8601 time")
    create_key.set_defaults(run=_run(_create_key))
    list_keys = _command(keys, "list", "list keys (metadata only, never a secret)")
    list_keys.add_argument("--org", dest="org_id", help="only this organization's (platform)")
    list_keys.add_argument("--tenant", dest="tenant_id", help="only this workspace's (platform)")
    list_keys.set_defaults(run=_run(_list_keys))
    revoke = _command(keys, "revoke", "revoke a key: refused from now on")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=_run(_revoke_key))


def _group(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    parser = commands.add_parser(name, help=help_text)
    return parser.add_subparsers(required=True, metavar="ACTION")


def _command(
    group: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("--url", help="the gateway's base URL (KBGATE_URL)")
    parser.add_argument("--key", help="the calling key (KBGATE_KEY)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
    return parser


def _run(action: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        url = args.url or os.environ.get("KBGATE_URL")
        key = args.key or os.environ.get("KBGATE_KEY")
        if not url or not key:
            return _fail("give --url and --key (or set KBGATE_URL and KBGATE_KEY)")
        try:
            answer, text = action(_Api(url, key), args)
        except _Refused as refused:
            detail = refused.body.get("detail") or refused.body.get("title") or ""
            field = refused.body.get("field")
            where = f" ({field})" if field else ""
            print(f"kbgate: refused, {refused.status}: {detail}{where}", file=sys.stderr)  # noqa: T201 — the CLI's own output
            return 1
        except _Unreachable as error:
            return _fail(str(error))
        print(json.dumps(answer, indent=2) if args.json else text)  # noqa: T201 — the CLI's own output
        return 0

    return run


def _fail(message: str) -> int:
    print(f"kbgate: {message}", file=sys.stderr)  # noqa: T201 — the CLI's own output
    return 2


class _Api:
    def __init__(self, url: str, key: str) -> None:
        self._url = url.rstrip("/")
        self._key = key

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(  # noqa: S310 — the URL is the operator's own gateway
            self._url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310 — as above
                return dict(json.loads(response.read() or b"{}"))
        except urllib.error.HTTPError as error:
            raise _Refused(error.code, _problem(error.read())) from None
        except (urllib.error.URLError, OSError) as error:
            raise _Unreachable(f"no gateway answered at {self._url}: {error}") from None


def _problem(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _query(**values: str | None) -> str:
    chosen = {name: value for name, value in values.items() if value}
    return "?" + urllib.parse.urlencode(chosen) if chosen else ""


def _create_org(api: _Api, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    answer = api.call("POST", "/v1/orgs", {"org_id": args.org_id})
    return answer, f"created organization {answer['org_id']}"


def _create_workspace(api: _Api, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    body: dict[str, Any] = {"tenant_id": args.tenant_id}
    if args.created_at:
        body["created_at"] = args.created_at
    path = f"/v1/orgs/{urllib.parse.quote(args.org_id, safe='')}/workspaces"
    answer = api.call("POST", path, body)
    return answer, f"created workspace {answer['tenant_id']} in {answer['org_id']}"


def _create_key(api: _Api, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    body: dict[str, Any] = {"org_id": args.org_id, "tenant_id": args.tenant_id, "roles": args.roles}
    for name in ("clearance", "ttl_s", "expires_at"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    answer = api.call("POST", "/v1/keys", body)
    expires = f", expires {answer['expires_at']}" if answer.get("expires_at") else ""
    text = (
        f"created {answer['key_id']} ({', '.join(answer['roles'])}; clearance "
        f"{answer['clearance']}{expires}) in {answer['tenant_id']}\n"
        f"key (shown once): {answer['key']}"
    )
    return answer, text


def _list_keys(api: _Api, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    answer = api.call("GET", "/v1/keys" + _query(org_id=args.org_id, tenant_id=args.tenant_id))
    rows = [
        f"{key['key_id']}  {key['org_id'] or '-'}/{key['tenant_id'] or '-'}  "
        f"{','.join(key['roles'])}  {key['clearance']}  created {key['created_at']}  "
        f"last used {key['last_used_at'] or 'never'}  expires {key['expires_at'] or 'never'}"
        for key in answer["keys"]
    ]
    return answer, "\n".join(rows) if rows else "no keys"


def _revoke_key(api: _Api, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    answer = api.call("DELETE", f"/v1/keys/{urllib.parse.quote(args.key_id, safe='')}")
    return answer, f"revoked {answer['key_id']}"
