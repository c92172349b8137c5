"""The shape issue 12 left the code in, kept true: small glue classes, and protocol
names spelled only by the registry, the public ``ProtocolName`` type and the codecs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proxai_asgi.codec import PROTOCOLS

PACKAGE = Path(__file__).resolve().parent.parent / "proxai_asgi"
GLUE = sorted(PACKAGE.glob("*.py"))  # everything but the codecs under protocols/
MAX_CLASS_LINES = 250


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


@pytest.mark.parametrize("path", GLUE, ids=[p.name for p in GLUE])
def test_no_glue_class_is_over_250_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            assert lines <= MAX_CLASS_LINES, f"{path.name}: {node.name} has {lines} lines"


@pytest.mark.parametrize("path", GLUE, ids=[p.name for p in GLUE])
def test_no_glue_module_names_a_protocol(path: Path) -> None:
    """Outside ``protocols/`` only ``codec.py`` (the public ``ProtocolName``) spells a
    protocol's name in code; docstrings may show configuration examples."""
    if path.name == "codec.py":
        return
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    named = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in skip
        and isinstance(node.value, str)
        and node.value in PROTOCOLS
    ]
    assert named == [], f"{path.name} names protocols: {named}"


ALL_MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_CALL_KEYWORDS = 15


@pytest.mark.parametrize(
    "path", ALL_MODULES, ids=[str(p.relative_to(PACKAGE)) for p in ALL_MODULES]
)
def test_no_call_passes_more_than_15_keywords(path: Path) -> None:
    """CPython 3.11 builds a call with 16 or more keyword arguments through a dict, and a
    msgspec Struct built that way costs 3-5x more (bench/notes-fixed-cost.md): on the
    request and answer paths that was a measurable share of every request."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            n = len(node.keywords)
            assert n <= MAX_CALL_KEYWORDS, (
                f"{path.name}:{node.lineno}: {ast.unparse(node.func)}(...) with {n} keywords"
            )
