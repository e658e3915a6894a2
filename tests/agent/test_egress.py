"""The egress proxy and its allowlist (agent/egress.py), and the environment allowlist
(agent/environment.py), each on its own: what a preset reaches and gets."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from specflux.agent.egress import Allowlist, EgressProxy
from specflux.agent.environment import agent_env
from specflux.agent.presets import CLAUDE, CODEX


def test_a_preset_reaches_its_api_hosts_and_its_base_url_only():
    env = agent_env({"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080/v1", "HTTPS_PROXY": "http://corp:3128",
                     "GITHUB_URL": "https://github.com"}, CLAUDE.passes)
    allowlist = Allowlist.for_preset(CLAUDE.hosts, env)
    assert allowlist.allows("api.anthropic.com", 443) and allowlist.allows("127.0.0.1", 8080)
    assert not allowlist.allows("api.anthropic.com", 22) and not allowlist.allows("127.0.0.1", 9418)
    assert not allowlist.allows("github.com", 443) and not allowlist.allows("corp", 3128)
    assert allowlist.loopback_ports() == [8080]
    wildcard = Allowlist.for_preset(["*.aiplatform.googleapis.com"], {"SPECFLUX_AGENT_HOSTS": "localhost:9000, models.dev"})
    assert wildcard.allows("us-central1.aiplatform.googleapis.com", 443)
    assert not wildcard.allows("evil-aiplatform.googleapis.com", 443)
    assert wildcard.allows("localhost", 9000) and wildcard.allows("models.dev", 80)


def test_the_environment_allowlist_keeps_secrets_out():
    user = {"PATH": "/bin", "OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant", "SSH_AUTH_SOCK": "/s",
            "GH_TOKEN": "ghp", "LC_ALL": "C", "HOME": "/home/me", "HTTPS_PROXY": "http://corp:3128"}
    codex = agent_env(user, CODEX.passes, {"SPECFLUX_ROLE": "coder"})
    assert codex == {"PATH": "/bin", "OPENAI_API_KEY": "sk-openai", "LC_ALL": "C", "HOME": "/home/me",
                     "HTTPS_PROXY": "http://corp:3128", "SPECFLUX_ROLE": "coder"}
    confined = agent_env(user, (), {"KEY": "$GH_TOKEN", "UNSET": "${NOPE}"}, {"HOME": "/private"},
                         network_confined=True)
    assert confined == {"PATH": "/bin", "LC_ALL": "C", "HOME": "/private", "KEY": "ghp"}


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def _ask(proxy_port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
            if request.startswith(b"CONNECT") and b"\r\n\r\n" in data:
                if b" 200 " not in data.split(b"\r\n")[0]:
                    return data
                s.sendall(b"GET /tunnel HTTP/1.0\r\n\r\n")
                request = b""
        return data


def test_the_proxy_tunnels_and_forwards_to_allowed_hosts_and_refuses_the_rest(upstream):
    with EgressProxy(Allowlist(frozenset({("localhost", upstream)}))).start() as proxy:
        tunnelled = _ask(proxy.port, f"CONNECT localhost:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert b"200 Connection Established" in tunnelled and tunnelled.endswith(b"hello /tunnel")
        forwarded = _ask(proxy.port, f"GET http://localhost:{upstream}/plain HTTP/1.0\r\n\r\n".encode())
        assert forwarded.startswith(b"HTTP/1.0 200") and forwarded.endswith(b"hello /plain")
        refused = _ask(proxy.port, f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert refused.startswith(b"HTTP/1.1 403") and f"127.0.0.1:{upstream} is not among".encode() in refused
        assert proxy.refused == [f"127.0.0.1:{upstream}"]
