"""A workspace's PII allow-list: values the recognizers find that the workspace keeps.

Each entry is a string, one of:

- `re:<pattern>` — a Python regular expression the whole detected value must match
  (`fullmatch`, case-insensitive). It must compile and must not match the empty string.
  Values longer than `MAX_VALUE_CHARS` are never matched against patterns.
- an IP network in CIDR notation (`127.0.0.0/8`, `2001:db8::/32`) — every detected
  value that is an IP address inside it.
- anything else — an exact value, compared case-insensitively with surrounding spaces
  trimmed; an IP address (`::1`) matches that address however it is written.

The list applies to every entity type: it says which values are not personal data for this
workspace (its loopback and documentation addresses, example domains, its own support
address), whatever a recognizer took them for.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PATTERN_PREFIX = "re:"
MAX_ENTRIES = 100
MAX_ENTRY_CHARS = 200
#: Detected values longer than this are never matched against an entry's pattern.
MAX_VALUE_CHARS = 256

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def allow_list_entry(value: str) -> str:
    """The entry that keeps exactly `value`: the value itself, or an escaped pattern where
    the value would read as a pattern or a network (`re:…`, `10.0.0.0/8`)."""
    value = value.strip()
    if not value or len(value) > MAX_ENTRY_CHARS:
        return ""
    if value.startswith(PATTERN_PREFIX) or "/" in value:
        return PATTERN_PREFIX + re.escape(value)
    return value


class AllowListError(ValueError):
    """An allow-list entry that cannot be used; `index` is its position in the list."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"entry {index}: {message}")
        self.index = index


@dataclass(frozen=True, slots=True)
class AllowList:
    """Parsed entries: exact values (folded), IP networks and compiled patterns."""

    values: frozenset[str] = frozenset()
    networks: tuple[IpNetwork, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.values or self.networks or self.patterns)

    def allows(self, value: str) -> bool:
        """Whether a detected value is one the workspace keeps."""
        folded = value.strip().casefold()
        if folded in self.values:
            return True
        if self.networks:
            address = _ip_address(folded)
            if address is not None and any(
                address.version == network.version and address in network
                for network in self.networks
            ):
                return True
        return len(value) <= MAX_VALUE_CHARS and any(
            pattern.fullmatch(value) for pattern in self.patterns
        )


NO_ALLOW_LIST = AllowList()


def parse_allow_list(entries: Sequence[Any]) -> AllowList:
    """The entries as an AllowList; AllowListError naming the first unusable entry."""
    if len(entries) > MAX_ENTRIES:
        raise AllowListError(MAX_ENTRIES, f"at most {MAX_ENTRIES} entries")
    values: set[str] = set()
    networks: list[IpNetwork] = []
    patterns: list[re.Pattern[str]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, str) or not entry.strip() or len(entry) > MAX_ENTRY_CHARS:
            raise AllowListError(index, f"must be a string of 1..{MAX_ENTRY_CHARS} characters")
        if entry.startswith(PATTERN_PREFIX):
            patterns.append(_pattern(index, entry.removeprefix(PATTERN_PREFIX)))
        elif "/" in entry and (network := _ip_network(entry.strip())) is not None:
            networks.append(network)
        elif (address := _ip_address(entry.strip())) is not None:
            networks.append(ipaddress.ip_network(address))
        else:
            values.add(entry.strip().casefold())
    return AllowList(frozenset(values), tuple(networks), tuple(patterns))


def is_allow_list(value: Any) -> bool:
    """A list of entries `parse_allow_list` accepts (empty allowed: nothing is kept)."""
    if not isinstance(value, list | tuple):
        return False
    try:
        parse_allow_list(value)
    except AllowListError:
        return False
    return True


def _pattern(index: int, source: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(source, re.IGNORECASE)
    except re.error as error:
        raise AllowListError(index, f"not a regular expression: {error}") from None
    if pattern.fullmatch(""):
        raise AllowListError(index, "a pattern must not match the empty string")
    return pattern


def _ip_network(text: str) -> IpNetwork | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
