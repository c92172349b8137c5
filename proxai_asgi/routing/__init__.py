"""Where a request goes: the configured upstreams and routes (``routes``), and what
keeps answering when one fails — failure classes, key pools, fallbacks, cooldowns and
session affinity."""

from .routes import Fallback, Route, Router, Upstream, split_url

__all__ = ["Fallback", "Route", "Router", "Upstream", "split_url"]
