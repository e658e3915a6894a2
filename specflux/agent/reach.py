"""What each sandbox level confines, in one line said when an agent's session starts (and as the
table of docs/sandbox.md): files written, files read, network, processes, environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specflux.agent.egress import EgressProxy
    from specflux.agent.sandbox import Sandbox

_LABELS = {"bwrap": "bubblewrap", "landlock": "Landlock", "sandbox-exec": "sandbox-exec"}


def network_line(sandbox: "Sandbox", proxy: "EgressProxy | None", confined: bool = False) -> str:
    if proxy is None and confined:  # nothing allowed: no proxy to start
        return "no host (a network namespace of its own)"
    if proxy is not None:
        how = "a network namespace of its own" if sandbox.name == "bwrap" else "Landlock's TCP rules"
        hosts = proxy.allowlist.describe()
        return f"{'only ' + hosts if proxy.allowlist.entries else 'no host'} ({how} and an egress proxy)"
    if sandbox.name == "landlock" and not sandbox.confines_network:
        return f"NOT confined (this kernel's Landlock is ABI {sandbox.abi}; it needs ABI 4)"
    if sandbox.name == "sandbox-exec":
        return "NOT confined (sandbox-exec: not done yet)"
    return "NOT confined (no sandbox)"


def reach_line(sandbox: "Sandbox", proxy: "EgressProxy | None" = None, network_confined: bool = False) -> str:
    """The line saying what `sandbox` confines for an agent CLI whose egress proxy is `proxy`
    (`network_confined` without one: no network at all)."""
    if sandbox.confined:
        written = "the work tree (not .git/ or .specflux/), a private HOME and temp folder"
        read = "everything but the runs' keys" if sandbox.name == "bwrap" else "everything (not confined)"
        processes = ("ended with the session (a PID namespace: it sees no other process)" if sandbox.name == "bwrap"
                     else "ended with the session (a subreaper)")
        head = f"the agent runs sandboxed with {_LABELS[sandbox.name]}"
    else:
        written = read = "anywhere this user can (not confined)"
        processes = "ended with the session (a subreaper)"
        head = "the agent runs without a sandbox"
    network = network_line(sandbox, proxy, network_confined)
    return (f"{head}: files written: {written}; files read: {read}; network: {network}; "
            f"processes: {processes}; environment: PATH, locale, terminal, SPECFLUX_* and its preset's variables only")
