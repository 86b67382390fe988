"""Where the web remote listens (the command line's --web) and who needs the token: the
endpoint parsed and its host resolved while the command line is read, loopback told apart
from the network, and this machine's addresses for the printed link. Any thread.
"""

from __future__ import annotations

import ipaddress
import re
import socket

import ifaddr

DEFAULT_HOST = "127.0.0.1"  # this machine only, unless told otherwise


def parse_endpoint(text: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPV6]:PORT` (the command line's --web) -> (host, port);
    ValueError says why. No host: 127.0.0.1, this machine only. Pure: see resolve_endpoint."""
    text = text.strip()
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        if not port.startswith(":"):
            raise ValueError(f"--web {text!r}: expected [IPV6]:PORT, e.g. [::1]:8080")
        port = port[1:]
    else:
        host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--web {text!r}: expected PORT or HOST:PORT, e.g. 8080 or "
                         "0.0.0.0:8080") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"--web {text!r}: the port must be 1-65535")
    if host and not re.fullmatch(r"[A-Za-z0-9.:_-]{1,253}", host):
        raise ValueError(f"--web {text!r}: not a host name or address")
    return (host or DEFAULT_HOST), number


def resolve_endpoint(text: str) -> tuple[str, int]:
    """parse_endpoint, and the host looked up as the server will look it up (a name the
    resolver does not know is refused here, before the show starts, not after)."""
    host, port = parse_endpoint(text)
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"--web {text!r}: the host {host!r} cannot be resolved ({reason}); "
                         "give one of this machine's addresses or names, or 0.0.0.0:PORT "
                         "for every network") from None
    return host, port


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, localhost): the one
    case that needs no token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def local_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback and link-local (what a phone on the
    same network types), read from the interfaces without sending anything (ifaddr: Linux,
    macOS and Windows alike); [] when none can be read."""
    found: list[str] = []
    try:
        adapters = ifaddr.get_adapters()
    except OSError:
        return found
    for adapter in adapters:
        for ip in adapter.ips:
            if not isinstance(ip.ip, str):  # IPv6 addresses come as (address, flow, scope)
                continue
            address = ipaddress.ip_address(ip.ip)
            if not (address.is_loopback or address.is_link_local) and ip.ip not in found:
                found.append(ip.ip)
    return found
