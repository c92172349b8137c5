"""proxai_asgi: any of the four LLM client protocols against any upstream.

from proxai_asgi import ProxaiMiddleware, Upstream, Route
"""

from .errors import ProxyError
from .middleware import ProxaiMiddleware
from .routing import Fallback, Route, Upstream
from .search import BraveSearch, Searcher, SearchResult
from .usage.budgets import Budget

__all__ = [
    "BraveSearch",
    "Budget",
    "Fallback",
    "ProxaiMiddleware",
    "ProxyError",
    "Route",
    "SearchResult",
    "Searcher",
    "Upstream",
]
__version__ = "0.1.0"
