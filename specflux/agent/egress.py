"""The egress proxy: the one way out of a confined agent's network, to the hosts its preset needs.

A confined agent CLI has no network of its own (bubblewrap: an empty network namespace; Landlock:
TCP connections only to this proxy's port and the loopback ports its preset names). Its
HTTP_PROXY and HTTPS_PROXY name this proxy, which specflux runs outside the sandbox for the
session: an HTTP proxy (`CONNECT host:port` for HTTPS, absolute URIs for plain HTTP) that lets
through only the hosts of its `Allowlist` and answers anything else `403`, naming the host. Each
refusal is kept (`refused`) for the session to report.

`Allowlist.for_preset` says what a preset reaches: its `hosts` on port 443 (its model's API), the
host and port of every URL among the user's variables it is handed (a base URL:
`ANTHROPIC_BASE_URL=http://127.0.0.1:8080` lets it reach that port of loopback and nothing else
there), and the `host:port`s of `SPECFLUX_AGENT_HOSTS` (comma-separated: a local model server
named in a CLI's own config file). Never the team's git remote, unless a user names it there.

Under bubblewrap the proxy listens on a unix socket bound into the sandbox (`netbridge.py` bridges
it to a loopback port inside); under Landlock on a loopback TCP port.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from specflux.agent.netbridge import splice  # (one copy: the relay in a namespace runs it alone)
from specflux.base.records import record

HOSTS_ENV = "SPECFLUX_AGENT_HOSTS"
HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 15
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@record(frozen=True)
class Allowlist:
    """Hosts an agent may reach: (`host`, `port`) pairs, a host `*.domain` for any below it,
    a port None for any port of that host."""

    entries: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def for_preset(cls, hosts: Iterable[str], env: Mapping[str, str]) -> "Allowlist":
        """What an agent with a preset's `hosts` reaches, given the environment it runs with
        (`env`: the URLs among its values, proxies and SPECFLUX_* aside, and SPECFLUX_AGENT_HOSTS)."""
        from specflux.agent.environment import PROXY

        entries = {(host.lower(), 443) for host in hosts}
        for name, value in env.items():
            if name not in PROXY and not name.startswith("SPECFLUX_") and value.startswith(("http://", "https://")):
                entry = _url_entry(value)
                if entry:
                    entries.add(entry)
        for item in env.get(HOSTS_ENV, "").split(","):
            entry = _host_entry(item.strip())
            if entry:
                entries.add(entry)
        return cls(frozenset(entries))

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        for pattern, allowed_port in self.entries:
            if allowed_port is not None and allowed_port != port:
                continue
            if host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
                return True
        return False

    def loopback_ports(self) -> list[int]:
        """The loopback ports it names: what a namespace without a network must bridge."""
        return sorted({port for host, port in self.entries if host in LOOPBACK and port})

    def describe(self) -> str:
        shown = sorted(f"{h}:{p}" if p else h for h, p in self.entries)
        return ", ".join(shown) if shown else "none"


def _url_entry(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return (parts.hostname.lower(), port) if parts.hostname else None


def _host_entry(item: str) -> tuple[str, int | None] | None:
    if not item:
        return None
    if "://" in item:
        return _url_entry(item)
    host, _, port = item.rpartition(":") if item.count(":") == 1 or item.startswith("[") else ("", "", "")
    if host and port.isdigit():
        return host.lower().strip("[]"), int(port)
    return item.lower().strip("[]"), None


class EgressProxy:
    """The proxy of one session; `start` it on a unix socket path or a loopback TCP port, `close`
    it after. `refused`: the `host:port`s it refused, in order."""

    def __init__(self, allowlist: Allowlist):
        self.allowlist = allowlist
        self.refused: list[str] = []
        self._server: socket.socket | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.port = 0
        self.path = ""

    def start(self, path: str | os.PathLike | None = None) -> "EgressProxy":
        """Listen on unix socket `path`, or on a free port of 127.0.0.1 (`port`) without one."""
        if path is not None:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(os.fspath(path))
            self.path = os.fspath(path)
        else:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.bind(("127.0.0.1", 0))
            self.port = server.getsockname()[1]
        server.listen(64)
        self._server = server
        threading.Thread(target=self._serve, name="specflux-egress", daemon=True).start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def __enter__(self) -> "EgressProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with contextlib.closing(client):
            head = _read_head(client)
            if head is None:
                return
            line, _, rest = head.partition(b"\r\n")
            try:
                method, target, version = line.decode("latin-1").split(" ", 2)
            except ValueError:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                return
            if method.upper() == "CONNECT":
                host, port, forward = *_split_host_port(target, 443), b""
            else:
                parts = urlsplit(target)
                if parts.scheme != "http" or not parts.hostname:
                    client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    return
                host, port = parts.hostname, parts.port or 80
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                forward = f"{method} {path} {version}\r\n".encode("latin-1") + _without_proxy_headers(rest)
            if not host or not self.allowlist.allows(host, port):
                with self._lock:
                    self.refused.append(f"{host}:{port}")
                body = (f"specflux: {host}:{port} is not among the hosts this agent may reach "
                        f"({self.allowlist.describe()})\n").encode()
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                return
            try:
                upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
            except OSError as e:
                client.sendall(f"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\nspecflux: {e}\n".encode())
                return
            with contextlib.closing(upstream):
                upstream.settimeout(None)
                if method.upper() == "CONNECT":
                    client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                else:
                    upstream.sendall(forward)
                splice(client, upstream)


def _read_head(sock: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(4096)
        except OSError:
            return None
        if not chunk or len(data) > HEAD_LIMIT:
            return None
        data += chunk
    return data


def _split_host_port(target: str, default: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, port = target[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = target.rpartition(":") if ":" in target else (target, "", "")
    return host, int(port) if port.isdigit() else default


def _without_proxy_headers(rest: bytes) -> bytes:
    lines = rest.split(b"\r\n")
    kept = [ln for ln in lines if not ln.lower().startswith((b"proxy-connection:", b"proxy-authorization:"))]
    return b"\r\n".join(kept)
