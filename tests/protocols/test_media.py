"""``protocols._kit.media``: the one reading of a data URL every codec shares."""

from __future__ import annotations

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols._kit.media import DataURL, data_url, is_data_url, parse_data_url


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("data:image/png;base64,iVBO", DataURL("image/png", "iVBO")),
        ("DATA:image/png;base64,iVBO", DataURL("image/png", "iVBO")),  # the scheme: any case
        ("data:Image/PNG;base64,iVBO", DataURL("image/png", "iVBO")),  # media types too
        ("data:image/png;name=a.png;base64,iVBO", DataURL("image/png", "iVBO")),
        ("data:text/plain;charset=utf-8;base64,aGk=", DataURL("text/plain", "aGk=")),
        ("data:;base64,aGk=", DataURL(None, "aGk=")),  # no media type: the codec decides
        ("data:image/png;base64,", DataURL("image/png", "")),
        ("data:image/png;base64,a,b", DataURL("image/png", "a,b")),  # data as sent
        ("data:image/png;base64,aGk=\n", DataURL("image/png", "aGk=\n")),
    ],
)
def test_a_base64_data_url_is_read_one_way(url: str, parsed: DataURL) -> None:
    assert is_data_url(url)
    assert parse_data_url(url) == parsed


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png,%89PNG",  # not base64
        "data:image/png;BASE64,iVBO",  # the marker as written only
        "data:image/png;base64",  # no data
        "data:,aGk=",
        "data: image/png;base64,iVBO",  # whitespace before the comma
        "data:image/png ;base64,iVBO",
        "data:image/png; base64,iVBO",
        "data:image;base64,iVBO",  # a media type is type/subtype
        "data:image/png;charset;base64,iVBO",  # a parameter is name=value
        "data:image/png;a=b c;base64,iVBO",
        "data:",
    ],
)
def test_anything_else_with_the_scheme_is_not_read(url: str) -> None:
    assert is_data_url(url)
    assert parse_data_url(url) is None


@pytest.mark.parametrize("url", ["https://x/a.png", "", "dat:a", " data:image/png;base64,AA"])
def test_other_urls_are_not_data_urls(url: str) -> None:
    assert not is_data_url(url)
    assert parse_data_url(url) is None


def test_a_written_data_url_reads_back() -> None:
    url = data_url("application/pdf", "JVBER")
    assert url == "data:application/pdf;base64,JVBER"
    assert parse_data_url(url) == DataURL("application/pdf", "JVBER")


# A user image given by a data URL, in each OpenAI protocol.
IMAGE_BODIES: dict[str, tuple[ProtocolName, bytes]] = {
    "chat": (
        "openai_chat_completions",
        b'{"model":"m","messages":[{"role":"user","content":[{"type":"image_url",'
        b'"image_url":{"url":"URL"}}]}]}',
    ),
    "responses": (
        "openai_responses",
        b'{"model":"m","input":[{"role":"user","content":[{"type":"input_image",'
        b'"image_url":"URL"}]}]}',
    ),
}


@pytest.mark.parametrize("client", IMAGE_BODIES)
def test_both_openai_decoders_read_a_data_url_the_same_way(client: str) -> None:
    """They once differed: Chat dropped the parameters, Responses kept them; neither
    read an upper-case scheme."""
    protocol, body = IMAGE_BODIES[client]
    body = body.replace(b"URL", b"DATA:Image/PNG;name=a.png;base64,iVBO")
    request = get_codec(protocol).decode_request(body, TranslationReport())
    assert request.messages[0].content[0] == c.Image(data="iVBO", media_type="image/png")


def test_a_chat_file_of_no_media_type_is_left_to_the_upstream_codec() -> None:
    """Chat named it application/octet-stream, which no upstream takes for a document."""
    body = (
        b'{"model":"m","messages":[{"role":"user","content":[{"type":"file",'
        b'"file":{"file_data":"data:;base64,JVBER","filename":"a.pdf"}}]}]}'
    )
    request = get_codec("openai_chat_completions").decode_request(body, TranslationReport())
    assert request.messages[0].content[0] == c.File(data="JVBER", filename="a.pdf")


@pytest.mark.parametrize("upstream", ["anthropic_messages", "gemini_generate_content"])
def test_both_encoders_of_inline_media_read_a_data_url_the_same_way(upstream: str) -> None:
    image = c.Image(url="DATA:Image/PNG;x=y;base64,iVBO")
    request = c.Request(model="m", messages=[c.Message(role="user", content=[image])], max_tokens=8)
    codec = get_codec(upstream)  # type: ignore[arg-type]
    body = codec.encode_request(request, TranslationReport(), UpstreamOptions())
    assert b'"image/png"' in body and b'"iVBO"' in body
