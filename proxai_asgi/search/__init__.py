"""Web search run by the proxy for upstreams that have none: the backend interface
(``SearchResult``, ``SearchBackend``), a Brave Search backend, a test backend, and the
sans-IO pieces of the loop (``offer``: the function offered to the model and its
results; ``rounds``: the rounds spliced into one answer)."""

from .backend import SearchBackend, Searcher, SearchError, SearchResult
from .brave import BraveSearch
from .testing import StaticSearch

__all__ = [
    "BraveSearch",
    "SearchBackend",
    "SearchError",
    "SearchResult",
    "Searcher",
    "StaticSearch",
]
