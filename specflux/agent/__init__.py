"""Agent sessions: the tools, the backend protocol and the backends (anthropic, command, replay)."""
