"""The targets one request may be sent to, in the order they are tried.

A route's own upstream comes first (each key of its pool is a target), then its
fallbacks in order. Within one upstream, the key a session is bound to comes first
(its prompt cache is warm), other sessions start on a key chosen by their hash so
new sessions spread over the pool; targets cooled down are tried only when nothing
else is left, soonest to recover first. A route with one upstream, one key and no
fallback has a one-target plan and never asks the shared state anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ..client_values import loggable
from .failures import Failure
from .routes import Route, Upstream


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream with one key, asked for ``model``."""

    upstream: Upstream  # a pool member: ``api_key`` is one key (or None)
    model: str
    fallback_index: int  # 0: the route's own upstream; n: its n-th fallback

    @property
    def member(self) -> str:
        """This key on this upstream: what a binding names and a refused key cools."""
        return member_name(self.upstream)

    @property
    def provider(self) -> str:
        """This model on this upstream, whichever key: what an outage (5xx, overload)
        cools (providers overload per model: the others stay in use)."""
        return f"{upstream_name(self.upstream)}/{self.model}"

    @property
    def keyed(self) -> str:
        """This model on this key: what a rate limit (429) cools."""
        return f"{member_name(self.upstream)}/{self.model}"


@dataclass(slots=True)
class Attempts:
    """What the exchange log and the ledger say of the routing (``Exchange.routing``)."""

    count: int = 0
    failures: list[str] = field(default_factory=list)
    served_by: Target | None = None
    continued: Target | None = None  # the target that finished a cut answer

    def note(self, target: Target, failure: Failure) -> None:
        self.failures.append(f"{target.fallback_index}:{failure.cls}:{loggable(failure.reason)}")


def upstream_name(up: Upstream) -> str:
    """An upstream's name in the shared state: the same on every instance."""
    known: str | None = up.__dict__.get("_upstream_name")
    if known is None:
        import hashlib  # here: importing it costs every process ~6 ms of OpenSSL

        where = "inner" if up.inner else (up.base_url or "")
        digest = hashlib.blake2b(f"{up.protocol} {where}".encode(), digest_size=8).hexdigest()
        known = up.__dict__["_upstream_name"] = "u-" + digest
    return known


def member_name(up: Upstream) -> str:
    known: str | None = up.__dict__.get("_member_name")
    if known is None:
        known = up.__dict__["_member_name"] = f"{upstream_name(up)}.{up.key_id}"
    return known


class RoutePlan:
    """What a route offers: every target in configured order (made once per route)."""

    def __init__(self, route: Route) -> None:
        self.route = route

    @cached_property
    def groups(self) -> tuple[tuple[Upstream, str | None, int], ...]:
        """(upstream, model to ask, fallback index) in order; model None: the routed."""
        own = (self.route.upstream, None, 0)
        rest = tuple((f.upstream, f.model, i + 1) for i, f in enumerate(self.route.fallbacks))
        return (own, *rest)

    @cached_property
    def single(self) -> bool:
        """One target only: nothing to choose, no state to consult."""
        return len(self.groups) == 1 and len(self.route.upstream.members) == 1

    def names(self, model: str) -> list[str]:
        """Every name a cooldown of this request's targets can be kept under, asked of
        the shared state in one go (``model``: the routed model)."""
        out: list[str] = []
        for up, fallback_model, _ in self.groups:
            asked = fallback_model or model
            out.append(f"{upstream_name(up)}/{asked}")
            for m in up.members:
                out.append(member_name(m))
                out.append(f"{member_name(m)}/{asked}")
        return out

    def targets(
        self,
        model: str,
        cooled: Mapping[str, float] = {},
        bound: str | None = None,
        session: str | None = None,
    ) -> list[Target]:
        """The targets in the order to try them (``model``: the routed model)."""
        ready: list[Target] = []
        later: list[tuple[float, int, Target]] = []
        for up, fallback_model, index in self.groups:
            members = _rotated(up.members, bound, session)
            for m in members:
                target = Target(m, fallback_model or model, index)
                wait = max(
                    cooled.get(target.provider, 0.0),
                    cooled.get(target.member, 0.0),
                    cooled.get(target.keyed, 0.0),
                )
                if wait > 0:
                    later.append((wait, len(later), target))
                else:
                    ready.append(target)
        later.sort()
        return ready + [t for _, _, t in later]


def _rotated(members: Sequence[Upstream], bound: str | None, session: str | None) -> list[Upstream]:
    """The pool's keys, starting with the bound one, else one chosen by the session."""
    if len(members) == 1:
        return list(members)
    start = 0
    if bound is not None:
        for i, m in enumerate(members):
            if member_name(m) == bound:
                start = i
                break
        else:
            start = _spread(session, len(members))
    else:
        start = _spread(session, len(members))
    return list(members[start:]) + list(members[:start])


_counter = [0]


def _spread(session: str | None, n: int) -> int:
    """A session's first key: from its hash, so it is the same on every instance; a
    request with no session takes the next key in turn."""
    if session is not None:
        return int(session[:8], 16) % n
    _counter[0] = (_counter[0] + 1) % n
    return _counter[0]
