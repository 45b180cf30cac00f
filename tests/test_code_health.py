"""Code health: ruff and mypy pass (as configured in pyproject.toml), the package's
import graph has no cycles and no private cross-module imports, the Spark-free
modules never load pyspark, and no more tests than ``CONSTANT_PATCHES`` monkeypatch a
module constant (sizes are set through ``vmi_spark.core.limits``)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


def test_ruff_passes():
    proc = subprocess.run([_tool("ruff"), "check", "vmi_spark", "jobs", "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_passes():
    proc = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# ---------------------------------------------------------------- the package's import graph
# (marked unit: they are fast and Spark-free, and the lint step runs only ruff and mypy)
PACKAGE = ROOT / "vmi_spark"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` inside ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) of every import in a file, at any
    depth (a lazy import inside a function is an edge of the graph too)."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node.level, node.module)
            out += [(target, a.name, node.lineno) for a in node.names]
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, Path]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for m, path in files.items():
        for target, name, _ in _imports(path):
            if name is not None and f"{target}.{name}" in files:  # from package import module
                graph[m].add(f"{target}.{name}")
            elif target in files:
                graph[m].add(target)
    for m in graph:  # a module imports its parent packages first: not an edge of its own
        graph[m] = {t for t in graph[m] if not m.startswith(t + ".")}
    return graph, files


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through every strongly connected component with more than one module
    (or a module importing itself), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.unit
def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert _resolve("vmi_spark.spark.select", False, 2, "core.greedy") == "vmi_spark.core.greedy"
    assert _resolve("vmi_spark.spark", True, 1, "plan") == "vmi_spark.spark.plan"
    assert _resolve("vmi_spark.spark.plan", False, 1, None) == "vmi_spark.spark"


@pytest.mark.unit
def test_the_package_has_no_import_cycles():
    graph, _ = _graph()
    assert "vmi_spark.spark.executions.passes" in graph["vmi_spark.spark.routes"]  # the graph is real
    assert "vmi_spark.spark.routes" in graph["vmi_spark.spark.select"]
    assert _cycles(graph) == []


@pytest.mark.unit
def test_no_private_name_is_imported_from_another_module():
    _, files = _graph()
    bad = []
    for path in files.values():
        for target, name, line in _imports(path):
            if not target.startswith("vmi_spark") or name is None:
                continue
            if name.startswith("_") and not name.startswith("__"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} from {target}")
    assert bad == []


@pytest.mark.unit
@pytest.mark.parametrize("module", ["vmi_spark.core", "vmi_spark.core.encoding",
                                    "vmi_spark.core.greedy", "vmi_spark.core.inmemory",
                                    "vmi_spark.sklearn"])
def test_spark_free_modules_never_import_pyspark(module):
    code = (f"import {module}, sys; "
            "assert not any(m.startswith('pyspark') for m in sys.modules), "
            "sorted(m for m in sys.modules if m.startswith('pyspark'))[:5]")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ------------------------------------------------------------- one decision, one place
#: the concrete row sources and executions: only spark/routes.py chooses among them
_CONCRETE = {"SparkSource", "ParquetReader", "VectorReader", "ParquetVectorReader",
             "DriverRows", "BatchReader", "DriverBackend", "ResidentBackend", "SparkBackend"}


@pytest.mark.unit
def test_the_orchestrator_asks_routes_and_never_a_class():
    """spark/select.py orchestrates: it neither imports a concrete row source or
    execution nor asks what class an object is (routes.choose_rows and
    routes.choose_execution decide, and the objects carry their capabilities)."""
    tree = ast.parse((PACKAGE / "spark" / "select.py").read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert not imported & _CONCRETE, sorted(imported & _CONCRETE)
    calls = [n.func.id for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "isinstance" not in calls
    assert {"choose_rows", "choose_execution", "start_execution"} <= set(calls)


# ---------------------------------------------------------------- tests through public seams
#: ``monkeypatch.setattr(<module>, "<UPPER_CASE>", ...)`` lines left in tests/: none.
#: Sizes are set through ``vmi_spark.core.limits`` (the ``set_limits`` fixture), the loop
#: backend through ``kernels.using`` and the Hadoop path of local URIs through
#: ``outputs.file_uris_through_hadoop``; never raise this number.
CONSTANT_PATCHES = 0
_CONSTANT_PATCH = re.compile(r'monkeypatch\.setattr\(\s*[\w.]+,\s*"[A-Z][A-Z0-9_]*"')


@pytest.mark.unit
def test_no_more_tests_monkeypatch_a_module_constant():
    found = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if _CONSTANT_PATCH.search(line)]
    assert len(found) <= CONSTANT_PATCHES, (
        f"{len(found)} tests monkeypatch a module constant (at most {CONSTANT_PATCHES}): "
        f"set sizes with vmi_spark.core.limits.overridden or the set_limits fixture; {found}")


def _names_imported_from_the_package(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every ``from vmi_spark... import name`` (name None for a
    plain ``import vmi_spark...``) in ``path``, at any depth (benchmarks import late)."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "vmi_spark":
            found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names
                      if a.name.split(".")[0] == "vmi_spark"]
    return found



def _missing_imports(paths: list[Path]) -> list[str]:
    """Where ``paths`` import a module or a name the package does not have."""
    import importlib

    missing = []
    for path in paths:
        for line, module, name in _names_imported_from_the_package(path):
            where = f"{path.name}:{line}"
            try:
                mod = importlib.import_module(module)
            except ImportError as e:
                missing.append(f"{where}: {module} ({e})")
                continue
            if name is not None and name != "*" and not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{where}: {name} from {module}")
    return missing


@pytest.mark.unit
def test_the_scripts_import_only_what_the_package_has():
    """benchmarks/, experiments/ and jobs/ run outside the tests: a name they import from
    the package that was moved or renamed would only fail when somebody runs them."""
    scripts = sorted(p for d in ("benchmarks", "experiments", "jobs")
                     for p in (ROOT / d).glob("*.py"))
    assert len(scripts) > 10 and any(_names_imported_from_the_package(p) for p in scripts)
    assert _missing_imports(scripts) == []


@pytest.mark.unit
def test_the_script_import_check_sees_a_missing_name_or_module(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import vmi_spark.core\n\ndef main():\n"
                      "    from vmi_spark.spark.plan import build_plan, plan_from_schema\n"
                      "    from vmi_spark.core import greedy, nothing_here\n"
                      "    import vmi_spark.gone\n")
    assert _missing_imports([script]) == [
        "s.py:4: build_plan from vmi_spark.spark.plan", "s.py:5: nothing_here from vmi_spark.core",
        "s.py:6: vmi_spark.gone (No module named 'vmi_spark.gone')"]
