"""The standalone server's ``[search]`` table, ``--search`` and ``$PROXAI_SEARCH``; an
upstream's ``proxy_search``; and the configured Brave backend end to end."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest

from proxai_asgi import BraveSearch
from proxai_asgi.server import config as cfg
from proxai_asgi.server.cli import build_app, build_parser
from tests.helpers.search_model import QUERY, SearchModel
from tests.helpers.servers import serve
from tests.search.test_brave import ANSWER, FakeBrave

CHAT = ["--upstream-protocol", "openai_chat_completions"]
ENV = {"PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1"}


def _app(argv: list[str], env: dict[str, str]):  # type: ignore[no-untyped-def]
    return build_app(build_parser().parse_args(argv), env)[0]


def test_the_search_table_configures_a_brave_backend(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[search]\nbackend = "brave"\napi_key_env = "MY_BRAVE"\nbase_url = "http://127.0.0.1:9"\n'
        "max_results = 3\ntimeout = 2.5\nmax_searches = 4\n"
    )
    searcher = _app(["--config", str(path), *CHAT], {**ENV, "MY_BRAVE": "brv-1"}).context.search
    assert isinstance(searcher.backend, BraveSearch)
    assert (searcher.max_results, searcher.timeout, searcher.max_searches) == (3, 2.5, 4)
    assert "brv-1" not in repr(searcher)


def test_the_flag_and_the_environment_name_the_backend_its_key_from_brave_api_key() -> None:
    env = {**ENV, "BRAVE_API_KEY": "brv-2"}
    assert isinstance(_app([*CHAT, "--search", "brave"], env).context.search.backend, BraveSearch)
    env_only = {**env, "PROXAI_SEARCH": "brave"}
    assert isinstance(_app(CHAT, env_only).context.search.backend, BraveSearch)
    assert _app(CHAT, env).context.search.backend is None  # none unless asked


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["--search", "bing"], {}, "search.backend"),
        (["--search", "brave"], {}, "BRAVE_API_KEY"),
    ],
)
def test_a_bad_search_configuration_names_the_key(
    argv: list[str], env: dict[str, str], needle: str
) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        _app([*CHAT, *argv], {**ENV, **env})
    assert needle in str(info.value)


def test_an_unknown_search_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[search]\nbacknd = "brave"\n')
    with pytest.raises(cfg.ConfigError, match="backnd"):
        _app(["--config", str(path)], {})


def test_a_configured_brave_answers_an_anthropic_clients_search_through_a_chat_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brave = FakeBrave(body=json.dumps(ANSWER).encode())
    model = SearchModel()
    with serve(brave) as brave_url, serve(model) as model_url:
        path = tmp_path / "p.toml"
        path.write_text(
            f'[search]\nbackend = "brave"\nbase_url = "{brave_url}"\n\n'
            f'[[upstreams]]\nname = "vllm"\nprotocol = "openai_chat_completions"\n'
            f'base_url = "{model_url}/v1"\nproxy_search = false\n'
        )
        app = _app(["--config", str(path)], {"BRAVE_API_KEY": "brv-3"})
        with serve(app, close_app=True) as url:
            client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
            msg = client.messages.create(
                model="m",
                max_tokens=100,
                messages=[{"role": "user", "content": "news?"}],
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
            ).model_dump()
    assert brave.seen[0]["query"]["q"] == [QUERY]
    assert brave.seen[0]["headers"]["x-subscription-token"] == "brv-3"
    result = msg["content"][1]
    assert [r["url"] for r in result["content"]] == [r["url"] for r in ANSWER["web"]["results"]]  # type: ignore[index]
