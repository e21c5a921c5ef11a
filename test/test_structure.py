"""Plain structural checks from the architecture issue: no import cycle among the package's
modules, no source file over 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "python" / "sglang_duet"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Package modules `path` imports at module level or inside functions (both can close a cycle
    at run time); `TYPE_CHECKING` blocks are skipped since they never run."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (child.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                out.add(base)
                out.update(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle between modules, ignoring edges into a package's own ``__init__`` from its
    submodules (``from . import x`` style re-exports are how packages are built)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if node.startswith(nxt + "."):  # submodule -> its own package
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"p.x": {"p"}, "p": {"p.x"}}) is None
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_file_length(path: Path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(PKG)} has {n} lines (limit {MAX_LINES}): split it"


def test_patches_module_imports_no_other_runtime_module():
    """Every SGLang patch lives in runtime/patches.py and the rest of the runtime calls into it,
    never the other way round (that is what ended the phases/decode_graphs cycle)."""
    graph = _graph()
    runtime = {m for m in graph["sglang_duet.runtime.patches"]
               if m.startswith("sglang_duet.runtime")}
    assert runtime <= {"sglang_duet.runtime"}, sorted(runtime)
