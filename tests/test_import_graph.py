"""The Python package's imports run one way: no loop between modules, and no wing importing one above it.

Wings, bottom to top: core (channels, library, clock, logs), calibration (probes, translation, bounds), analysis
(logs as Spark tables, the report), spark (the session helper and trace points; `cps.report(spark)` uses the
analysis), harness (generator, pipelines, the throughput search, benchmarks), and the command line on top.
Imports inside functions count as well.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "cloudprofiler"

# wing -> rank; a wing imports its own modules and those of lower ranks
WINGS = {"core": 0, "calibration": 1, "analysis": 2, "spark": 3, "harness": 4, "top": 5}
TOP = ("cloudprofiler.cli", "cloudprofiler.demo")  # these modules and their submodules


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _wing(module: str) -> str:
    if module in TOP or module.startswith(tuple(f"{m}." for m in TOP)):
        return "top"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else "core"


def _is_extension(package: str, name: str) -> bool:
    """A compiled module of the package (`_log_call.c` builds `_log_call`), which has no .py file."""
    return (PACKAGE.parent.joinpath(*package.split(".")) / f"{name}.c").exists()


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The package's modules that `module` imports; `from p import name` imports p.name where that is a module,
    else p itself."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules or _is_extension(base, a.name) else base
                     for a in node.names]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] == "cloudprofiler")
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {i for i in _imports(p, m, set(files)) if i in files and i != m} for m, p in files.items()}


def test_no_import_loop():
    graph = _graph()
    state: dict[str, int] = {}
    loops = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                loops.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not loops, "import loops: " + "; ".join(" -> ".join(loop) for loop in loops)


def test_wings_import_downward_only():
    wrong = []
    for module, targets in _graph().items():
        wing = _wing(module)
        for target in targets:
            other = _wing(target)
            if WINGS[other] > WINGS[wing] or (WINGS[other] == WINGS[wing] and other != wing):
                wrong.append(f"{module} ({wing}) -> {target} ({other})")
    assert not wrong, "imports against the wings' order:\n" + "\n".join(sorted(wrong))


def test_the_check_sees_a_loop_and_an_upward_import(tmp_path, monkeypatch):
    package = tmp_path / "cloudprofiler"
    (package / "spark").mkdir(parents=True)
    (package / "harness").mkdir()
    (package / "__init__.py").write_text("")
    (package / "spark" / "__init__.py").write_text("from ..harness import x\n")
    (package / "harness" / "__init__.py").write_text("")
    (package / "harness" / "x.py").write_text("from . import y\n")
    (package / "harness" / "y.py").write_text("def f():\n    from .x import g\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    graph = _graph()
    assert "cloudprofiler.harness.x" in graph["cloudprofiler.spark"]
    assert "cloudprofiler.harness.x" in graph["cloudprofiler.harness.y"]
    for check in (test_no_import_loop, test_wings_import_downward_only):
        try:
            check()
        except AssertionError:
            continue
        raise AssertionError(f"{check.__name__} passed on a package that breaks it")
