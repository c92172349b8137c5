"""The price table: lookups, the cost arithmetic, overrides (a TOML file, a table
object, the server's configuration), and unknown models costing None, never 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxai_asgi.server import config as cfg
from proxai_asgi.usage import PriceTable, UsageRecord
from proxai_asgi.usage.prices import ModelPrice, base_name, load_prices


def _rec(model: str | None = "gpt-4o", **tokens: int) -> UsageRecord:
    rec = UsageRecord(
        request_id="req_1",
        time="2026-11-28T00:00:00+00:00",
        owner="o",
        route="*",
        upstream="up",
        key_id=None,
        client_protocol="openai_chat_completions",
        upstream_protocol="openai_chat_completions",
        requested_model="asked",
        served_model=model,
        status=200,
    )
    for name, value in tokens.items():
        setattr(rec, name, value)
    return rec


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
    ],
)
def test_a_provider_model_id_finds_its_entry(model: str, entry: str) -> None:
    table = PriceTable.default()
    assert table.lookup(model) is table.models[entry]


def test_base_name_drops_prefixes_and_dates() -> None:
    assert base_name("models/gemini-2.5-pro") == "gemini-2.5-pro"
    assert base_name("gpt-4o-2024-08-06") == "gpt-4o"
    assert base_name("claude-sonnet-4-5-20250929") == "claude-sonnet-4-5"


@pytest.mark.parametrize("model", ["gemini-1.5-flash", "my-local-llama", "", None])
def test_an_unknown_model_costs_none_never_zero(model: str | None) -> None:
    rec = _rec(model, input_tokens=1000, output_tokens=10)
    rec.requested_model = None
    assert PriceTable.default().cost(rec) == (None, None)


def test_the_served_model_is_priced_else_the_requested_one() -> None:
    table = PriceTable.default()
    rec = _rec("gpt-4o-mini", input_tokens=1_000_000)
    rec.requested_model = "gpt-4o"
    assert table.cost(rec)[0] == pytest.approx(0.15)
    rec.served_model = None
    assert table.cost(rec)[0] == pytest.approx(2.50)


def test_a_record_without_usage_costs_none() -> None:
    assert PriceTable.default().cost(_rec("gpt-4o")) == (None, None)


def test_every_category_has_its_price() -> None:
    table = PriceTable.default()
    rec = _rec(
        "claude-sonnet-4-5",
        input_tokens=1_000_000,
        output_tokens=2_000_000,
        cache_read_tokens=3_000_000,
        cache_write_5m_tokens=4_000_000,
        cache_write_1h_tokens=5_000_000,
        server_tool_requests=7,
    )
    usd, version = table.cost(rec)
    assert usd == pytest.approx(3.0 + 2 * 15.0 + 3 * 0.30 + 4 * 3.75 + 5 * 6.0 + 7 * 0.01)
    assert version == table.version and "2026" in version


def test_reasoning_is_priced_apart_only_where_the_entry_says() -> None:
    rec = _rec("r1", output_tokens=1_000_000, reasoning_tokens=400_000)
    flat = PriceTable({"r1": ModelPrice(input=1.0, output=10.0)}, "v")
    assert flat.cost(rec)[0] == pytest.approx(10.0)
    apart = PriceTable({"r1": ModelPrice(input=1.0, output=10.0, reasoning=20.0)}, "v")
    assert apart.cost(rec)[0] == pytest.approx(0.6 * 10.0 + 0.4 * 20.0)


def test_unset_cache_prices_are_the_input_price() -> None:
    table = PriceTable({"m": ModelPrice(input=2.0, output=4.0)}, "v")
    rec = _rec("m", cache_read_tokens=1_000_000, cache_write_5m_tokens=1_000_000)
    rec.cache_write_1h_tokens = 1_000_000
    assert table.cost(rec)[0] == pytest.approx(6.0)


def test_gemini_25_pro_over_200k_prompt_tokens_takes_the_long_context_prices() -> None:
    table = PriceTable.default()
    short = _rec(
        "gemini-2.5-pro", input_tokens=150_000, cache_read_tokens=50_000, output_tokens=1000
    )
    assert table.cost(short)[0] == pytest.approx(0.15 * 1.25 + 0.05 * 0.125 + 0.001 * 10)
    long = _rec(
        "gemini-2.5-pro", input_tokens=150_000, cache_read_tokens=50_001, output_tokens=1000
    )
    assert table.cost(long)[0] == pytest.approx(0.15 * 2.5 + 0.050001 * 0.25 + 0.001 * 15)


def test_patterns_match_the_most_specific_first() -> None:
    table = PriceTable(
        {
            "a": ModelPrice(input=1.0, output=1.0, patterns=("acme-*",)),
            "b": ModelPrice(input=2.0, output=2.0, patterns=("acme-pro-*",)),
        },
        "v",
    )
    assert table.lookup("acme-pro-7") is table.models["b"]
    assert table.lookup("acme-lite-7") is table.models["a"]


PRICE_FILE = """
version = "acme-2026-11"
[models."gpt-4o"]
input = 1.0
output = 2.0
[models."house-model"]
input = 0.5
output = 0.5
names = ["house"]
patterns = ["house-v*"]
"""


def test_a_price_file_overrides_the_default_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(PRICE_FILE)
    table = load_prices(str(path))
    assert table.version == "acme-2026-11"
    assert table.cost(_rec("gpt-4o-2024-08-06", input_tokens=1_000_000)) == (1.0, "acme-2026-11")
    assert table.lookup("house") is table.lookup("house-v3") is table.models["house-model"]
    assert table.lookup("claude-sonnet-4-5") is not None  # the defaults are kept


def test_a_price_file_can_replace_the_default_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text("replace = true\n" + PRICE_FILE)
    table = load_prices(path)
    assert table.lookup("claude-sonnet-4-5") is None
    assert table.lookup("gpt-4o") is not None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[models."m"]\ninput = 1.0\n', "output"),
        ('[models."m"]\ninput = 1.0\noutput = 1.0\ncache_reed = 1\n', "cache_reed"),
        ("colour = 1\n", "colour"),
        ("replace = 1\n", "replace"),
        ("not toml [", "prices file"),
    ],
)
def test_a_bad_price_file_is_an_error_naming_what_is_wrong(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=needle):
        load_prices(str(path))
    with pytest.raises(ValueError, match="prices file"):
        load_prices(str(tmp_path / "missing.toml"))


def test_a_table_object_and_none_load_as_they_are() -> None:
    table = PriceTable({}, "mine")
    assert load_prices(table) is table
    assert load_prices(None).version == PriceTable.default().version


def test_the_server_configuration_takes_a_prices_table_or_file(tmp_path: Path) -> None:
    conf = cfg.parse({"prices": {"version": "cfg-1", "models": {"m": {"input": 1, "output": 2}}}})
    assert isinstance(conf.prices, dict)
    assert load_prices(conf.prices).version == "cfg-1"
    path = tmp_path / "p.toml"
    path.write_text(PRICE_FILE)
    assert cfg.parse({"prices": str(path)}).prices == str(path)
    with pytest.raises(cfg.ConfigError, match="prices"):
        cfg.parse({"prices": {"models": {"m": {"input": 1}}}})
    with pytest.raises(cfg.ConfigError, match="prices"):
        cfg.parse({"prices": str(tmp_path / "missing.toml")})


def test_the_cli_takes_a_price_file_and_the_cost_header(tmp_path: Path) -> None:
    from proxai_asgi.server.cli import build_app, build_parser

    path = tmp_path / "p.toml"
    path.write_text(PRICE_FILE)
    argv = ["--prices", str(path), "--cost-header"]
    app, _ = build_app(build_parser().parse_args(argv), {})
    accounting = app.context.accounting
    assert accounting.prices.version == "acme-2026-11" and accounting.cost_header
    app, _ = build_app(build_parser().parse_args([]), {"PROXAI_PRICES": str(path)})
    assert app.context.accounting.prices.version == "acme-2026-11"
    assert not app.context.accounting.cost_header
    with pytest.raises(cfg.ConfigError, match="--prices"):
        build_app(build_parser().parse_args(["--prices", str(tmp_path / "none.toml")]), {})
