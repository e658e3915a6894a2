"""The way out of a network namespace that has none: run inside bubblewrap's `--unshare-net`.

`python -I -S netbridge.py --socket PATH [--port P]... -- COMMAND...` listens, on the loopback of
the namespace, on a free port that it passes on to the agent as its HTTP(S)_PROXY, and on each
loopback port P a base URL names (the agent's model server on the host's loopback, which a
namespace of its own cannot see); it starts COMMAND and relays each connection to the egress
proxy (egress.py) listening on the unix socket PATH, bound into the sandbox from outside: the
proxy port as it is, a port P as `CONNECT 127.0.0.1:P`. The proxy decides what gets through. It
exits with COMMAND's status when COMMAND exits.

Standard library only, no specflux import: it runs as a script inside the sandbox.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

NO_PROXY = "localhost,127.0.0.1,::1"


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy between `a` and `b` both ways until both have ended (egress.py relays with it too)."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def _relay(client: socket.socket, path: str, port: int | None) -> None:
    """Relay `client` to the proxy at `path`; for a loopback `port`, through a CONNECT to it."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        if port is not None:
            upstream.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = upstream.recv(1)
                if not chunk:
                    raise OSError("the proxy closed the connection")
                head += chunk
            if head.split(b" ", 2)[1:2] != [b"200"]:
                raise OSError(head.decode("latin-1").splitlines()[0])
    except OSError:
        client.close()
        upstream.close()
        return
    splice(client, upstream)


def _listen(family: int, host: str, port: int) -> socket.socket | None:
    try:
        server = socket.socket(family, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, port))
        server.listen(64)
        return server
    except OSError:
        return None


def _serve(server: socket.socket, path: str, port: int | None) -> None:
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, path, port), daemon=True).start()


def main(args: list[str]) -> int:
    if "--" not in args:
        print("usage: python netbridge.py --socket PATH [--port P]... -- COMMAND [ARG]...", file=sys.stderr)
        return 2
    split = args.index("--")
    options, command = args[:split], args[split + 1:]
    path, ports = "", []
    for flag, value in zip(options[::2], options[1::2]):
        if flag == "--socket":
            path = value
        elif flag == "--port":
            ports.append(int(value))
    # the loopback ports first (a base URL's port is fixed), then a free one for the proxy
    servers = [(s, port) for port in ports for s in (_listen(socket.AF_INET, "127.0.0.1", port),
                                                      _listen(socket.AF_INET6, "::1", port)) if s]
    proxy = _listen(socket.AF_INET, "127.0.0.1", 0)
    if proxy is None or not path:
        print("specflux sandbox: cannot open the network bridge, so the command did not run", file=sys.stderr)
        return 126
    url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY
    child = os.fork()
    if child == 0:
        for server, _ in [*servers, (proxy, None)]:
            server.close()
        try:
            os.execvpe(command[0], command, env)
        except OSError as e:
            print(f"specflux sandbox: {command[0]}: {e.strerror}", file=sys.stderr)
            os._exit(127 if isinstance(e, FileNotFoundError) else 126)
    for server, port in [*servers, (proxy, None)]:
        threading.Thread(target=_serve, args=(server, path, port), daemon=True).start()
    _, status = os.waitpid(child, 0)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
