"""Where a request goes: the configured upstreams and routes (``routes``), and what
keeps answering when one fails — failure classes, key pools, fallbacks, cooldowns and
session affinity."""

from .routes import Route, Router, Upstream, split_url

__all__ = ["Route", "Router", "Upstream", "split_url"]
