"""The client's address behind trusted proxies (`gateway.http.forwarding`) and the
`KBGATE_TRUSTED_PROXIES` variable."""

from __future__ import annotations

import pytest

from gateway.http.forwarding import TrustedProxies
from settings.config import ConfigError, load_config


def test_no_proxy_is_trusted_by_default() -> None:
    proxies = TrustedProxies(load_config({}).trusted_proxies)
    assert not proxies
    assert proxies.client("127.0.0.1", ["198.51.100.1"]) == "127.0.0.1"


def test_the_right_most_untrusted_address_is_the_client() -> None:
    proxies = TrustedProxies(["192.0.2.10/32", "10.1.0.0/16"])
    assert proxies.client("192.0.2.10", ["1.2.3.4, 203.0.113.5, 10.1.9.9"]) == "203.0.113.5"
    # several header lines read as one list, in order
    assert proxies.client("192.0.2.10", ["1.2.3.4", "203.0.113.5"]) == "203.0.113.5"
    assert proxies.client("192.0.2.10", ["203.0.113.5:4711"]) == "203.0.113.5"
    assert proxies.client("192.0.2.10", ["[2001:db8::7]:4711"]) == "2001:db8::7"
    # every hop trusted: the left-most of them; no header: the proxy itself
    assert proxies.client("192.0.2.10", ["10.1.0.1, 10.1.0.2"]) == "10.1.0.1"
    assert proxies.client("192.0.2.10", []) == "192.0.2.10"
    # an entry that is no address ends the walk: nothing left of it is believed
    assert proxies.client("192.0.2.10", ["203.0.113.5, bogus"]) == "192.0.2.10"
    # an untrusted peer's header is ignored
    assert proxies.client("198.51.100.9", ["203.0.113.5"]) == "198.51.100.9"
    assert proxies.trusts("::ffff:192.0.2.10")


def test_trusted_proxies_are_read_and_checked() -> None:
    config = load_config({"KBGATE_TRUSTED_PROXIES": " 172.30.80.10, 10.0.0.0/8 ,fd00::/8"})
    assert config.trusted_proxies == ("172.30.80.10/32", "10.0.0.0/8", "fd00::/8")
    with pytest.raises(ConfigError, match="KBGATE_TRUSTED_PROXIES"):
        load_config({"KBGATE_TRUSTED_PROXIES": "proxy"})
