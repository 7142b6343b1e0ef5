"""The layout keeps its promises: imports run down the layers the architecture page states, no module imports
itself back, pages are pages.

Every ``import`` statement in the project's packages counts, including those
inside functions: an import deferred into a function to dodge a cycle is
still a cycle in the design.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Imports run down this list: a room imports only rooms after it (docs/architecture.md states the same list)
LAYERS = ("pages", "widgets", "dashboard", "workloads", "sim", "presentation", "metrics", "engine")
# the draft-training lab stands aside: it imports these rooms (workloads only through its datasets), nothing imports it
DISTILL_IMPORTS = ("engine", "workloads.datasets")
# inside workloads: what each room may import of the others (the command line, __main__, replay_args and
# simulate_cli, imports all)
WORKLOADS_ROOMS = {
    "datasets": set(),
    "endpoint": set(),
    "report": set(),
    "drivers": {"datasets", "endpoint"},
    "bench": {"drivers", "datasets", "endpoint"},
}
PACKAGES = (*LAYERS, "distill")
# package -> third-party modules it must never import
NO_THIRD_PARTY = {
    "engine": {"streamlit", "plotly"},
    "sim": {"streamlit", "plotly"},
    "workloads": {"streamlit", "plotly"},
    "metrics": {"streamlit", "torch", "plotly"},
    "presentation": {"streamlit", "torch"},
    "dashboard": {"streamlit"},
    "distill": {"streamlit", "plotly"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py") if (ROOT / package).is_dir() else ():
            if "assets" not in path.parts:
                found[module_name(path)] = path
    return found


def imported_names(path: Path, modules: dict[str, Path], this: str | None = None) -> set[str]:
    """Every module ``path`` (the module ``this``) imports: project modules by full name, others by top name."""
    this = this or module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # ``from engine import stages`` imports the module engine.stages
                child = f"{base}.{alias.name}"
                names.add(child if child in modules else base)
    resolved = set()
    for name in names:
        while name and name not in modules and "." in name:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    resolved.discard(this)
    return resolved


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported_names(path, modules) for name, path in modules.items()}


def top(name: str) -> str:
    """The room a module belongs to: its top-level package."""
    return name.split(".")[0]


def violations(graph: dict[str, set[str]], rules: dict[str, set[str]]) -> list[str]:
    """Imports of a package's modules that its rule forbids (rules by top-level name on both sides)."""
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if top(target) in rules.get(top(module), set())
    )


def against_the_flow(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up the layer list, into the training lab, or out of it into what it may not import."""
    bad = []
    for module, targets in graph.items():
        for target in (t for t in targets if top(t) in PACKAGES and top(t) != top(module)):
            if top(module) == "distill":
                allowed = any(target == room or target.startswith(f"{room}.") for room in DISTILL_IMPORTS)
            elif top(target) == "distill":
                allowed = False
            else:
                allowed = LAYERS.index(top(target)) > LAYERS.index(top(module))
            if not allowed:
                bad.append(f"{module} imports {target}")
    return sorted(bad)


def across_workloads_rooms(graph: dict[str, set[str]]) -> list[str]:
    """Imports between workloads' rooms that ``WORKLOADS_ROOMS`` does not allow."""

    def room(name: str) -> str | None:
        parts = name.split(".")
        return parts[1] if len(parts) > 2 and parts[0] == "workloads" and parts[1] in WORKLOADS_ROOMS else None

    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if room(module) is not None
        for target in targets
        if room(target) not in (None, room(module)) and room(target) not in WORKLOADS_ROOMS[room(module)]
    )


def test_imports_run_down_the_layers_as_the_architecture_page_says(graph):
    page = (ROOT / "docs" / "architecture.md").read_text()
    stated = re.search(r"Imports run one way,\s+down this list: ((?:`\w+`(?:\s+→\s+)?)+)", page)
    assert stated is not None and tuple(re.findall(r"`(\w+)`", stated.group(1))) == LAYERS
    assert against_the_flow(graph) == []


def test_workloads_rooms_import_only_what_they_are_allowed(graph):
    assert set(WORKLOADS_ROOMS) | {"__init__", "__main__", "replay_args", "simulate_cli"} == {
        p.stem if p.is_file() else p.name for p in (ROOT / "workloads").iterdir() if p.suffix == ".py" or p.is_dir()
    } - {"__pycache__"}
    assert across_workloads_rooms(graph) == []


def test_light_packages_stay_light(graph):
    assert violations(graph, NO_THIRD_PARTY) == []


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    project = {name: {t for t in targets if t in graph} for name, targets in graph.items()}
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the current path, 2 done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(project[node]):
            if state[nxt] == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif state[nxt] == 0:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(project):
        if state[node] == 0:
            visit(node, [node])
    return cycles


def test_there_are_no_import_cycles(graph):
    assert find_cycles(graph) == []


def test_the_checker_sees_deferred_imports_relative_imports_and_cycles(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from engine import stages\n")
    (tmp_path / "b.py").write_text("from . import summary\nimport torch.nn\n")
    modules = {"engine.stages": tmp_path / "a.py", "metrics.export": tmp_path / "b.py", "metrics.summary": tmp_path}
    assert imported_names(tmp_path / "a.py", modules, "engine.pd") == {"engine.stages"}
    assert imported_names(tmp_path / "b.py", modules, "metrics.export") == {"metrics.summary", "torch"}
    assert find_cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == ["x -> y -> z -> x"]
    assert find_cycles({"x": {"y"}, "y": set()}) == []
    assert against_the_flow({"metrics.summary": {"engine.request", "presentation.palette"}}) == [
        "metrics.summary imports presentation.palette"
    ]
    assert against_the_flow({"distill.data": {"workloads.datasets.sharegpt_file", "workloads.drivers.replay"}}) == [
        "distill.data imports workloads.drivers.replay"
    ]
    assert against_the_flow({"engine.stages": {"distill.train"}}) == ["engine.stages imports distill.train"]
    assert across_workloads_rooms({"workloads.datasets.sources": {"workloads.drivers.trace"}}) == [
        "workloads.datasets.sources imports workloads.drivers.trace"
    ]
    assert across_workloads_rooms({"workloads.drivers.sweep": {"workloads.endpoint.engine"}}) == []


def test_pages_holds_only_the_pages_the_app_navigates_to():
    declared = set(re.findall(r'st\.Page\("pages/(\w+)\.py"', (ROOT / "app.py").read_text()))
    files = {p.stem for p in (ROOT / "pages").glob("*.py")} - {"__init__"}
    assert declared and files == declared


def test_no_module_is_much_longer_than_three_hundred_lines():
    long = sorted(
        f"{path.relative_to(ROOT)}: {n}"
        for path in project_modules().values()
        if (n := len(path.read_text().splitlines())) > 330
    )
    assert long == []
