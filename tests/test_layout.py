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


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string (and bytes, read as latin-1) constants of a module's code, its
    docstrings left out."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    return [
        (node.lineno, v.decode("latin-1") if isinstance(v, bytes) else v)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in skip
        and isinstance(v := node.value, (str, bytes))
    ]


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
    named = [(line, text) for line, text in _code_strings(path) if text in PROTOCOLS]
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


# ------------------------------------------------- the layout draws the architecture
# (issue 27): a small top level (the public API and the sans-IO hub), the rest in
# subpackages named for what they are; codecs independent of each other.

MAX_TOP_LEVEL_MODULES = 18
PROTOCOLS_DIR = PACKAGE / "protocols"
CODECS = frozenset(
    d.name
    for d in PROTOCOLS_DIR.iterdir()
    if d.is_dir() and (d / "__init__.py").exists() and not d.name.startswith("_")
)
# The layers above the codecs: a codec never reaches into them.
ABOVE_CODECS = (
    "serving",
    "transport",
    "responses_state",
    "server",
    "middleware",
    "store",
    "usage",
    "metrics",
    "search",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py")}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``proxai_asgi`` module ``path`` imports, as absolute dotted names: inside
    functions and under ``if TYPE_CHECKING:`` too. ``from a import b`` names ``a.b``
    when ``b`` is a module, else ``a``."""
    tree = ast.parse(path.read_text())
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    named: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for a in node.names:
                sub = f"{module}.{a.name}"
                named.append((node.lineno, sub if sub in MODULES else module))
    return [(line, name) for line, name in named if name.split(".")[0] == "proxai_asgi"]


def test_the_top_level_holds_at_most_18_modules() -> None:
    """The public API and the hub; transports, responders, Responses state, the server
    and the codecs' helpers live in their subpackages."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} top-level modules: {top}"


def test_every_folder_of_the_package_is_a_package() -> None:
    """A folder without ``__init__.py`` would be a namespace package the tests above
    might not see."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    assert [str(f) for f in folders if not (f / "__init__.py").exists()] == []


def test_codecs_are_found() -> None:
    assert len(CODECS) >= 4


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_no_codec_imports_another_codec(codec: str) -> None:
    """A codec imports the hub, ``protocols._kit`` and its own folder; what two codecs
    share (the OpenAI family's errors and checks, the loose error reader) is in
    ``protocols/_kit``."""
    crossing = []
    for path in sorted((PROTOCOLS_DIR / codec).rglob("*.py")):
        for line, name in imported_modules(path):
            parts = name.split(".")
            if len(parts) > 2 and parts[1] == "protocols" and parts[2] in CODECS - {codec}:
                crossing.append(f"{path.relative_to(PACKAGE)}:{line} {name}")
    assert crossing == []


PROTOCOL_FILES = sorted(PROTOCOLS_DIR.rglob("*.py"))


@pytest.mark.parametrize(
    "path", PROTOCOL_FILES, ids=[str(p.relative_to(PACKAGE)) for p in PROTOCOL_FILES]
)
def test_protocols_import_no_layer_above_them(path: Path) -> None:
    """Layers import downward: the codecs (and their kit) never import the responders,
    the transports, the Responses state, the server, the stores or the middleware."""
    above = [
        (line, name)
        for line, name in imported_modules(path)
        if len(name.split(".")) > 1 and name.split(".")[1] in ABOVE_CODECS
    ]
    assert above == []


PROVIDER_HEADERS = ("x-api-key", "x-goog-api-key", "anthropic-version")


@pytest.mark.parametrize("path", GLUE, ids=GLUE_IDS)
def test_no_module_outside_protocols_names_a_provider_header(path: Path) -> None:
    """Each codec declares its credential headers and listing paths; the transports and
    the middleware read them from the registry, so a new protocol's key header is never
    forwarded to another provider for want of a line elsewhere. (Docstrings may name
    them.)"""
    named = [
        (line, text)
        for line, text in _code_strings(path)
        if any(h in text.lower() for h in PROVIDER_HEADERS)
    ]
    assert named == [], f"{path.relative_to(PACKAGE)} names provider headers: {named}"


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (type-only and in-function imports
    included; a package's ``__init__`` run on the way to a submodule is not counted)."""
    return {
        _module_name(p): {n for _, n in imported_modules(p) if n in MODULES} - {_module_name(p)}
        for p in PACKAGE.rglob("*.py")
    }


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    """Layers import downward only: a responder reads the middleware through
    ``serving.context.Context``, never by importing it (type-only imports count)."""
    cycle = _a_cycle(_import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


def test_only_the_public_api_imports_the_middleware() -> None:
    importers = sorted(
        module
        for module, deps in _import_graph().items()
        if {"proxai_asgi.middleware", "proxai_asgi"} & deps
    )
    assert importers == ["proxai_asgi", "proxai_asgi.server.cli"]
