"""The client's address behind proxies the operator names, and only those.

`X-Forwarded-For` is believed only from a peer in `KBGATE_TRUSTED_PROXIES` (IP addresses
or CIDR ranges; none by default). From such a peer the client is the right-most address
of the header that is not itself a trusted proxy: every proxy appends the address it was
reached from, so the entries left of the last trusted hop are whatever the client chose
to send and are never taken. From any other peer the headers are ignored and the peer
is the client. `X-Forwarded-Proto` (`http` or `https`) is taken on the same condition.

`ForwardedClientMiddleware` writes the result into the ASGI scope (`client`, `scheme`),
so everything downstream (the failed-authentication limit, the console's cookies) sees
the same client. The HTTP server's own proxy-header handling is turned off
(`gateway.cli.serve`): uvicorn's default would trust any peer on loopback.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(text: str) -> IPAddress | None:
    """An IP address from one forwarded entry: bare, `host:port` or `[v6]:port`."""
    value = text.strip()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:
        value = value.partition(":")[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The proxies whose forwarding headers are believed."""

    def __init__(self, networks: Iterable[str]) -> None:
        self._networks: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(network, strict=False) for network in networks
        )

    def __bool__(self) -> bool:
        return bool(self._networks)

    def trusts(self, host: str) -> bool:
        address = _address(host)
        return address is not None and self._holds(address)

    def _holds(self, address: IPAddress) -> bool:
        return any(address.version == n.version and address in n for n in self._networks)

    def client(self, peer: str, forwarded_for: Iterable[str]) -> str:
        """The client's address: `peer` unless it is trusted, else the right-most
        untrusted entry of `forwarded_for` (its header lines, in order).

        An entry that is no IP address ends the walk at the peer: a trusted proxy writes
        addresses, so such an entry was never vouched for.
        """
        if not self.trusts(peer):
            return peer
        hops = [hop for line in forwarded_for for hop in line.split(",") if hop.strip()]
        client = peer
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                return client
            client = str(address)
            if not self._holds(address):
                return client
        return client  # every hop a trusted proxy: the left-most of them


class ForwardedClientMiddleware:
    """Sets the scope's `client` (and `scheme`) from forwarding headers a trusted proxy sent."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if self.proxies and client and scope["type"] in {ScopeType.HTTP, ScopeType.WEBSOCKET}:
            peer = client[0]
            if self.proxies.trusts(peer):
                forwarded: list[str] = []
                proto: str | None = None
                for name, value in scope["headers"]:
                    if name == b"x-forwarded-for":
                        forwarded.append(value.decode("latin-1"))
                    elif name == b"x-forwarded-proto":
                        proto = value.decode("latin-1").strip().lower()
                host = self.proxies.client(peer, forwarded)
                if host != peer:
                    scope["client"] = (host, 0)
                if proto in {"http", "https"} and scope["type"] == ScopeType.HTTP:
                    scope["scheme"] = proto
        await self.app(scope, receive, send)
