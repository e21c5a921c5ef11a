"""Which local addresses listen on a TCP port, read from /proc/net/tcp and tcp6 (Linux)."""

from __future__ import annotations

import ipaddress
import socket
import struct

LISTEN = "0A"


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = struct.unpack("<4I", raw)  # four host-order 32-bit words
    return str(ipaddress.IPv6Address(struct.pack(">4I", *words)))


def listening(port: int) -> set[str]:
    """The addresses (`0.0.0.0` and `::` for every interface) with a socket listening on
    `port`, in any process of this machine's network namespace."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            ip, _, hex_port = cols[1].partition(":")
            if cols[3] == LISTEN and int(hex_port, 16) == port:
                out.add(_address(ip))
    return out
