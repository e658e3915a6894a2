"""specflux: markdown-native task state for AI coding-agent work.

The library's public names, loaded on first use so that `import specflux` stays cheap:
`TaskStateManager` (the task store), `TaskDocument` (one task file, edited losslessly),
`Workspace` (where `.specflux/` is) and `SpecfluxError` (what every specflux error derives from).
ARCHITECTURE.md says where everything else lives.
"""

__version__ = "0.1.0"

_PUBLIC = {
    "TaskStateManager": "specflux.store.manager",
    "TaskDocument": "specflux.format.document",
    "Workspace": "specflux.store.workspace",
    "SpecfluxError": "specflux.base.errors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        from importlib import import_module

        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specflux' has no attribute {name!r}")
