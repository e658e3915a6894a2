"""specflux: markdown-native task state for AI coding-agent work."""

__version__ = "0.1.0"
