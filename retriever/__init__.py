"""retriever: local hybrid search over a markdown vault, for people and their AI agents.

The public names load on first use (PEP 562): the console script imports this package on
every hook call and must stay light.
"""

__all__ = [
    "Hit",
    "InputError",
    "Retriever",
    "RetrieverError",
    "SearchResult",
    "Settings",
    "UnavailableError",
    "settings_from",
]

_HOMES = {
    "Retriever": "retriever.app",
    "Settings": "retriever.config",
    "settings_from": "retriever.config",
    "Hit": "retriever.search",
    "SearchResult": "retriever.search",
    "RetrieverError": "retriever.errors",
    "InputError": "retriever.errors",
    "UnavailableError": "retriever.errors",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'retriever' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
