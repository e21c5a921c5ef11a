"""The runtime package's modules import one another without a cycle (phases and decode_graphs
used to import each other; every SGLang patch now lives in patches.py, which imports none)."""

from __future__ import annotations

import ast
import pathlib

RUNTIME = pathlib.Path(__file__).resolve().parents[2] / "python" / "sglang_duet" / "runtime"


def runtime_imports(path: pathlib.Path) -> set[str]:
    """Sibling runtime modules `path` imports anywhere (deferred imports count too)."""
    names = {p.stem for p in RUNTIME.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "sglang_duet.runtime":
                found |= {a.name for a in node.names}
            elif node.module.startswith("sglang_duet.runtime."):
                found.add(node.module.rsplit(".", 1)[1])
    return found & names - {path.stem}


def test_no_cycle():
    graph = {p.stem: runtime_imports(p) for p in RUNTIME.glob("*.py")}
    assert graph["patches"] == set()
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"import cycle: {' -> '.join((*stack, node))}"
        if node in done:
            return
        for nxt in graph[node]:
            visit(nxt, (*stack, node))
        done.add(node)

    for name in graph:
        visit(name, ())
    assert "phases" in graph["scheduler"] and "decode_graphs" in graph["phases"]
