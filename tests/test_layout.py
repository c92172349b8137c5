"""The shape issue 12 left the code in, kept true: small glue classes, and protocol
names spelled only by the registry, the public ``ProtocolName`` type and the codecs."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from proxai_asgi.codec import PROTOCOLS

PACKAGE = Path(__file__).resolve().parent.parent / "proxai_asgi"
# everything but the codecs under protocols/, subpackages included
GLUE = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "protocols")
GLUE_IDS = [str(p.relative_to(PACKAGE)) for p in GLUE]
MAX_CLASS_LINES = 250


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


@pytest.mark.parametrize("path", GLUE, ids=GLUE_IDS)
def test_no_glue_class_is_over_250_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            assert lines <= MAX_CLASS_LINES, f"{path.name}: {node.name} has {lines} lines"


@pytest.mark.parametrize("path", GLUE, ids=GLUE_IDS)
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
    msgspec Struct built that way costs 3-5x more (CHANGELOG.md, request translation of
    long conversations): on the
    request and answer paths that was a measurable share of every request."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            n = len(node.keywords)
            assert n <= MAX_CALL_KEYWORDS, (
                f"{path.name}:{node.lineno}: {ast.unparse(node.func)}(...) with {n} keywords"
            )


ROOT = PACKAGE.parent
BENCH = ROOT / "bench"
BENCH_HELPER = "_common"  # the one module of ``bench`` a bench (or a script) may import
MAX_BENCH_README_LINES = 400


def _files(top: Path, suffix: str) -> list[Path]:
    """Files under ``top``, leaving out hidden and cache folders (a bench's own
    virtualenv lives in ``bench/.venv-litellm``)."""
    found = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        found += [Path(folder) / n for n in names if n.endswith(suffix)]
    return sorted(found)


def test_bench_keeps_no_notes() -> None:
    """Benchmark history belongs in git and the CHANGELOG: ``bench/`` holds its
    README and the benches, no notes beside them."""
    notes = [str(p.relative_to(BENCH)) for p in _files(BENCH, ".md") if p != BENCH / "README.md"]
    assert notes == []
    assert [p.name for p in _files(BENCH, "") if p.name.startswith("notes")] == []


def test_bench_readme_is_at_most_400_lines() -> None:
    lines = len((BENCH / "README.md").read_text().splitlines())
    assert lines <= MAX_BENCH_README_LINES, f"bench/README.md has {lines} lines"


def _bench_imports(path: Path) -> list[tuple[int, str]]:
    """The ``bench`` modules a file imports, as dotted names (relative ones resolved
    against its place in ``bench/``)."""
    tree = ast.parse(path.read_text())
    here = list(path.relative_to(ROOT).parent.parts)
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "bench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], node.module or ""])
            else:
                base = node.module or ""
            if base.split(".")[0] != "bench":
                continue
            if base.rstrip(".") == "bench":  # from bench import x
                named += [(node.lineno, f"bench.{a.name}") for a in node.names]
            else:
                named.append((node.lineno, base.rstrip(".")))
    return named


BENCH_SCRIPTS = _files(BENCH, ".py") + _files(ROOT / "scripts", ".py")


@pytest.mark.parametrize(
    "path", BENCH_SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in BENCH_SCRIPTS]
)
def test_no_bench_script_imports_another(path: Path) -> None:
    """Every bench answers its question alone: what benches share is in
    ``bench/_common.py``, and the servers they start are named, not imported."""
    if path == BENCH / f"{BENCH_HELPER}.py":
        return
    helper = f"bench.{BENCH_HELPER}"
    others = [(line, name) for line, name in _bench_imports(path) if name != helper]
    assert others == [], f"{path.relative_to(ROOT)} imports {others}"

