"""Plain structural checks from the architecture issues: no import cycle among the package's
modules, no source file over 400 lines, benchmark code imported only by its own tests, no
sys.path edits anywhere."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "python" / "sglang_duet"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    return _source_imports(path.read_text(), name, path.name == "__init__.py", modules)


def _source_imports(src: str, name: str, is_pkg: bool, modules: set[str]) -> set[str]:
    """Package modules module `name` imports anywhere: at module level, inside functions (both
    can close a cycle at run time) and in `TYPE_CHECKING` blocks (a cycle of type hints is still
    two modules that each need the other, the duet/paper_scheme circle of #49 was one);
    `from . import x` counts as importing the submodule x."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
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


def test_import_finder_finds_each_form():
    modules = {"p", "p.a", "p.b", "p.c", "p.d", "p.q", "p.q.e", "os"}
    src = ("import os\nfrom . import a\nfrom .b import thing\nfrom typing import TYPE_CHECKING\n"
           "if TYPE_CHECKING:\n    from .c import Hint\n"
           "def f():\n    from p.d import late\n    from .q import e\n")
    assert _source_imports(src, "p.x", False, modules) == {
        "os", "p", "p.a", "p.b", "p.c", "p.d", "p.q", "p.q.e"}
    assert _source_imports("from .. import a\nfrom . import e\n", "p.q", True, modules) == {
        "p", "p.a", "p.q.e"}


def test_a_type_hint_circle_is_a_cycle():
    """Two modules whose only back edge is a `TYPE_CHECKING` import still form a circle."""
    modules = {"p.duet", "p.paper"}
    graph = {"p.duet": _source_imports("from .paper import search\n", "p.duet", False, modules),
             "p.paper": _source_imports("if TYPE_CHECKING:\n    from .duet import Policy\n",
                                        "p.paper", False, modules)}
    assert _find_cycle(graph) == ["p.duet", "p.paper", "p.duet"]


def test_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"p.x": {"p"}, "p": {"p.x"}}) is None
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    """No import circle in python/sglang_duet (the cycle is listed when there is one)."""
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


# ---- the checkout as a whole: imports and import paths ---------------------------------------

REPO = PKG.parent.parent
SKIP_DIRS = {"build", "dist", "node_modules", "__pycache__"}  # and every hidden dir (.venv, ...)


def _sources(*tops: str) -> list[Path]:
    """The checkout's own .py files under `tops`, without virtual environments or build output."""
    out: list[Path] = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(REPO / top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and d[0] != ".")
            out += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py")]
    return out


def _imported_modules(tree: ast.AST) -> set[str]:
    """Absolute module names imported anywhere in the file (functions included), and names
    given to importlib.import_module / __import__ as string literals."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                             "__import__")):
            out.add(node.args[0].value)
    return out


def _benchmark_imports(path: Path) -> set[str]:
    return {m for m in _imported_modules(ast.parse(path.read_text()))
            if m.split(".")[0] == "benchmark"}


def test_benchmark_import_finder_finds_each_form():
    src = ("import benchmark.stamp\nfrom benchmark.serving import launch\nimport os\n"
           "def f():\n    from benchmark import ab\n"
           "    return importlib.import_module('benchmark.sim.speed')\n"
           "from sglang_duet import benchmark_names\nfrom . import benchmark\n")
    assert {m for m in _imported_modules(ast.parse(src)) if m.split(".")[0] == "benchmark"} == {
        "benchmark.stamp", "benchmark.serving", "benchmark", "benchmark.sim.speed"}


def test_only_benchmark_tests_import_benchmark_code():
    """The package, the test helpers and every test outside test/benchmark/ use the package
    (sglang_duet.local_server and the rest), never benchmark code: a benchmark module's own
    tests live under test/benchmark/, mirroring benchmark/."""
    offenders = []
    for path in _sources("python", "test"):
        rel = path.relative_to(REPO)
        if rel.parts[:2] == ("test", "benchmark"):
            continue
        offenders += [f"{rel.as_posix()}: {m}" for m in sorted(_benchmark_imports(path))]
    assert not offenders, offenders


def _sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that change the import path: sys.path.<insert|append|extend|...>(...), an assignment
    to sys.path (or an item or slice of it), `from sys import path`, site.addsitedir(...)."""

    def is_sys_path(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            node = node.value
        return ast.unparse(node) == "sys.path"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                is_sys_path(node.func.value) or ast.unparse(node.func) in (
                    "site.addsitedir", "addsitedir")):
            lines.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) for t in targets):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("sys", "site") and any(
                a.name in ("path", "addsitedir") for a in node.names):
            lines.append(node.lineno)
    return sorted(lines)


def test_sys_path_edit_finder_finds_each_form():
    src = ("import sys, site\nsys.path.insert(0, 'x')\nsys.path.append('y')\n"
           "sys.path[:0] = ['z']\nsys.path = ['w']\nsys.path += ['v']\n"
           "site.addsitedir('u')\nfrom sys import path\nprint(sys.path)\n"
           "sys.meta_path.insert(0, None)\nos.path.join('a')\n")
    assert _sys_path_edits(ast.parse(src)) == [2, 3, 4, 5, 6, 7, 8]


def test_no_sys_path_edits():
    """Benchmarks run as `python -m benchmark...` (on the GPU machine, which has no install, with
    PYTHONPATH=python); the tests' path is pytest's `pythonpath` option in pyproject.toml."""
    offenders = [f"{p.relative_to(REPO).as_posix()}:{line}"
                 for p in _sources("python", "test", "benchmark", "sgl-duet-kernel", "docker")
                 for line in _sys_path_edits(ast.parse(p.read_text()))]
    assert not offenders, offenders
