"""docs/spec-index.md stays true: every rule id the spec test modules state (MP-n, RS-n,
SI-n, in their docstrings) has a row naming the tests whose docstrings cite it, and those
tests exist. The rule table is generated from the modules; regenerate it with
``python -m tests.spec.test_index`` after adding a rule or a test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "spec-index.md"
MODULES = {
    "MP": ("message-placement.txt", "tests/spec/test_message_placement.py"),
    "RS": ("refusal-and-status.txt", "tests/spec/test_refusal_and_status.py"),
    "SI": ("streaming-identifiers.txt", "tests/spec/test_streaming_identifiers.py"),
}
BEGIN, END = "<!-- rule table: generated -->", "<!-- end of rule table -->"
_RULE_LINE = re.compile(r"^  ((?:MP|RS|SI)-\d+)\s+(.*)$")
_CITE = re.compile(r"\b((?:MP|RS|SI)-\d+)\b")
# Rules with a documented deviation or a known defect (see the sections below the table).
MARKED = {
    "MP-8": "deviation",
    "MP-13": "deviation",
    "MP-23": "deviation",
    "MP-34": "deviation",
    "RS-2": "known defect",
    "RS-6": "deviation",
    "RS-15": "beyond the letter",
    "RS-17": "beyond the letter",
    "RS-23": "deviation",
    "SI-15": "deviation",
    "SI-18": "deviation",
}


def rules(path: str) -> dict[str, str]:
    """Rule id -> its one-line summary, from the module docstring."""
    doc = ast.get_docstring(ast.parse((ROOT / path).read_text())) or ""
    out: dict[str, str] = {}
    current = ""
    for line in doc.splitlines():
        m = _RULE_LINE.match(line)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.startswith("        ") and line.strip():
            out[current] += " " + line.strip()
        else:
            current = ""
    return out


def citing_tests(path: str) -> dict[str, list[str]]:
    """Rule id -> the test functions whose docstrings cite it."""
    out: dict[str, list[str]] = {}
    for node in ast.parse((ROOT / path).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            for rule in dict.fromkeys(_CITE.findall(ast.get_docstring(node) or "")):
                out.setdefault(rule, []).append(node.name)
    return out


def render() -> str:
    rows = ["| rule | spec file | what it says (short) | tests | note |", "|---|---|---|---|---|"]
    for spec, path in MODULES.values():
        tests = citing_tests(path)
        for rule, summary in rules(path).items():
            short = summary if len(summary) <= 110 else summary[:107].rsplit(" ", 1)[0] + " …"
            short = short.replace("|", "\\|")
            names = "<br>".join(f"`{Path(path).name}::{t}`" for t in tests.get(rule, []))
            rows.append(f"| {rule} | {spec} | {short} | {names} | {MARKED.get(rule, '')} |")
    return "\n".join([BEGIN, *rows, END])


def test_every_rule_has_a_citing_test() -> None:
    for _, path in MODULES.values():
        tests = citing_tests(path)
        missing = [r for r in rules(path) if r not in tests]
        assert not missing, f"{path}: rules no test cites: {missing}"


def test_the_index_is_the_generated_one() -> None:
    text = DOC.read_text()
    table = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert table == render(), "docs/spec-index.md is stale: python -m tests.spec.test_index"


def test_every_marked_rule_is_explained_below_the_table() -> None:
    text = DOC.read_text()
    after = text[text.index(END) :]
    for rule in MARKED:
        assert re.search(rf"\b{rule}\b", after), f"{rule} is marked but not explained"


if __name__ == "__main__":
    text = DOC.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + render() + text[text.index(END) + len(END) :]
    DOC.write_text(text)
