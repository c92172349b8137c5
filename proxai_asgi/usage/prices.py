"""The price table: what each model's tokens cost, versioned.

Which model is priced: the one that served (``rec.served_model``, the name the
upstream's answer gave, e.g. ``gpt-4o-2024-08-06``), else the one the client asked
for (``rec.requested_model``). The served name is what the provider bills; a routed
alias (``model_rewrite``) or a fallback makes the requested one a different model.

A model is found by its exact name, then by its base name (``base_name``: a
``models/`` or ``provider/`` prefix and a date suffix taken off), then by the entries'
``patterns`` (globs, the longest first). A model not found costs ``None``, never 0.

The cost of a record, in USD::

    (input * input + cache_read * cache_read + cache_write_5m * cache_write_5m
     + cache_write_1h * cache_write_1h + (output - reasoning) * output
     + reasoning * reasoning_price) / 1e6  +  server_tool_requests * server_tool_request

in the ledger's token categories (``record.count_tokens``). An unset cache price is the
input price (no discount), an unset 1-hour write price is the 5-minute one, an unset
reasoning price is the output price, an unset per-request price is 0. A record with
no token counted (no usage known, or a failed exchange, never billed) costs ``None``
too. An entry's
``long_context`` tier (Gemini 2.5 Pro over 200k prompt tokens) replaces the prices it
names for a request whose prompt (input + cache reads + cache writes) is over its
``threshold``.

A price file (TOML; ``load_prices("prices.toml")``, the server's ``prices = "file"``)::

    version = "acme-2026-11"     # goes into every record's price_version
    replace = false              # true: only these models; false: over the default table
    [models."gpt-4o"]            # a model's own entry replaces the default's whole
    input = 2.5                  # USD per million tokens
    output = 10.0
    cache_read = 1.25
    cache_write_5m = 2.5
    cache_write_1h = 2.5
    reasoning = 10.0             # only where reasoning is priced apart
    server_tool_request = 0.01   # USD per server tool request (a web search)
    names = ["my-4o"]            # other exact names
    patterns = ["gpt-4o-*"]      # globs
    [models."gemini-2.5-pro".long_context]
    threshold = 200000
    input = 2.5
    output = 15.0
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..bounded_cache import BoundedCache
from .price_list import DEFAULT_MODELS, DEFAULT_VERSION

if TYPE_CHECKING:
    from .record import UsageRecord

_UNSEEN: Any = object()
_DATED = re.compile(r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-latest)$")


class Tier(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Prices for a prompt over ``threshold`` tokens; unset ones keep the base's."""

    threshold: int
    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    reasoning: float | None = None


class ModelPrice(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """USD per million tokens (``server_tool_request``: USD per request)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    reasoning: float | None = None
    server_tool_request: float = 0.0
    names: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    long_context: Tier | None = None

    def cost(self, rec: UsageRecord) -> float:
        prompt = (
            rec.input_tokens
            + rec.cache_read_tokens
            + rec.cache_write_5m_tokens
            + rec.cache_write_1h_tokens
        )
        tier = self.long_context
        over = tier is not None and prompt > tier.threshold

        def rate(name: str) -> float | None:
            if over:
                value: float | None = getattr(tier, name)
                if value is not None:
                    return value
            result: float | None = getattr(self, name)
            return result

        input_ = rate("input") or 0.0
        output = rate("output") or 0.0
        write_5m = _first(rate("cache_write_5m"), input_)
        reasoning = min(rec.reasoning_tokens, rec.output_tokens)
        per_million = (
            rec.input_tokens * input_
            + rec.cache_read_tokens * _first(rate("cache_read"), input_)
            + rec.cache_write_5m_tokens * write_5m
            + rec.cache_write_1h_tokens * _first(rate("cache_write_1h"), write_5m)
            + (rec.output_tokens - reasoning) * output
            + reasoning * _first(rate("reasoning"), output)
        )
        usd = per_million / 1_000_000 + rec.server_tool_requests * self.server_tool_request
        return round(usd, 10)


def _first(value: float | None, default: float) -> float:
    return default if value is None else value


def base_name(model: str) -> str:
    """``models/gemini-2.5-pro`` -> ``gemini-2.5-pro``; ``openai/gpt-4o-2024-08-06`` ->
    ``gpt-4o``; ``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return _DATED.sub("", name)


class PriceTable:
    """Prices per model, and the version that goes into every priced record."""

    __slots__ = ("_exact", "_found", "_patterns", "models", "version")

    def __init__(self, models: Mapping[str, ModelPrice], version: str) -> None:
        self.models = dict(models)
        self.version = version
        self._exact: dict[str, ModelPrice] = {}
        patterns: list[tuple[str, ModelPrice]] = []
        for name, price in self.models.items():
            for alias in (name, *price.names):
                self._exact.setdefault(alias.lower(), price)
            patterns.extend((p.lower(), price) for p in price.patterns)
        # The most specific glob first: ``gpt-4o-mini*`` before ``gpt-4o*``.
        self._patterns = sorted(patterns, key=lambda item: -len(item[0]))
        # What each model name found (an unknown one scans every pattern): model names
        # are the upstreams' and the clients', so bounded like every shared table.
        self._found: BoundedCache[str, ModelPrice | None] = BoundedCache(
            max_bytes=1 << 20, max_entries=4096
        )

    @classmethod
    def default(cls) -> PriceTable:
        return cls(_parse_models(DEFAULT_MODELS, "default"), DEFAULT_VERSION)

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The entry pricing ``model``; None when the table has none."""
        if not model:
            return None
        found = self._found.get(model, _UNSEEN)
        if found is _UNSEEN:
            found = self._search(model)
            self._found.put(model, found)
        return found

    def _search(self, model: str) -> ModelPrice | None:
        exact = self._exact.get(model.lower())
        if exact is not None:
            return exact
        base = base_name(model)
        found = self._exact.get(base)
        if found is not None:
            return found
        for pattern, price in self._patterns:
            if fnmatchcase(base, pattern) or fnmatchcase(model.lower(), pattern):
                return price
        return None

    def cost(self, rec: UsageRecord) -> tuple[float | None, str | None]:
        """The record's cost in USD and the table's version; (None, None) for a
        model with no price."""
        if not _counted(rec):
            return None, None  # no usage known (a relayed Chat stream without one, a failure)
        price = self.lookup(rec.served_model or rec.requested_model)
        if price is None:
            return None, None
        return price.cost(rec), self.version


def _counted(rec: UsageRecord) -> bool:
    """Whether any usage was counted: every answer reads some prompt tokens, so a
    record with none had no usage to price (0 would claim it was free)."""
    return bool(
        rec.input_tokens
        or rec.output_tokens
        or rec.cache_read_tokens
        or rec.cache_write_5m_tokens
        or rec.cache_write_1h_tokens
        or rec.server_tool_requests
    )


def _parse_models(table: Mapping[str, Any], where: str) -> dict[str, ModelPrice]:
    models: dict[str, ModelPrice] = {}
    for name, entry in table.items():
        try:
            models[name] = msgspec.convert(entry, ModelPrice)
        except msgspec.ValidationError as exc:
            raise ValueError(f"prices ({where}): models.{name!r}: {exc}") from None
    return models


def _from_table(data: Mapping[str, Any], where: str) -> PriceTable:
    unknown = set(data) - {"version", "replace", "models"}
    if unknown:
        raise ValueError(f"prices ({where}): unknown key(s) {', '.join(sorted(unknown))}")
    models = data.get("models", {})
    if not isinstance(models, Mapping):
        raise ValueError(f"prices ({where}): models must be a table of models")
    own = _parse_models(models, where)
    replace = data.get("replace", False)
    if not isinstance(replace, bool):
        raise ValueError(f"prices ({where}): replace must be true or false")
    base = {} if replace else PriceTable.default().models
    version = data.get("version") or f"{DEFAULT_VERSION}+{where}"
    if not isinstance(version, str):
        raise ValueError(f"prices ({where}): version must be a string")
    return PriceTable({**base, **own}, version)


def load_prices(spec: str | Path | Mapping[str, Any] | PriceTable | None) -> PriceTable:
    """The default table (None), a table object as it is, a TOML price file's path, or
    the same as a mapping (the server configuration's ``[prices]`` table)."""
    if spec is None:
        return PriceTable.default()
    if isinstance(spec, PriceTable):
        return spec
    if isinstance(spec, Mapping):
        return _from_table(spec, "configuration")
    path = Path(spec)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"prices file {str(path)!r}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"prices file {str(path)!r}: {exc}") from None
    return _from_table(data, path.name)
