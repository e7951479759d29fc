"""The house's structure, read from the source with `ast` (nothing is imported): imports only point down,
the lesson's core stays the lesson, and no file grows past what a reader can hold.

Run alone to see the structure's state: .venv/bin/python -m pytest tests/unit/test_structure.py -q
"""

import ast
import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("specdec", "app_pages")  # whose modules must not import each other in a circle
MAX_LINES = 450
# What specdec/core/ (the lesson) may not import: the speed machinery, the layers above it, the UI.
NOT_IN_CORE = ("specdec.kernels", "specdec.models", "specdec.serving", "specdec.measure", "specdec.views",
               "specdec.training", "specdec.cli",
               "streamlit")
SKIPPED_FOLDERS = {"__pycache__", "node_modules"}  # and hidden ones: .venv, .git, caches
# specdec's layers, lowest first: a module may import from its own layer or any layer before it, never after.
LAYERS = [
    {"specdec.errors", "specdec.paths", "specdec.clock", "specdec.model_names"},
    {"specdec.config"},
    {"specdec.core"},
    {"specdec.kernels"},  # the CPU's speed machinery: the core never imports it, models apply it
    {"specdec.models"},
    {"specdec.serving"},  # the models' lock and which models a server may load
    {"specdec.classroom"},  # a class answering together: its questions, links and store (no torch)
    {"specdec.measure", "specdec.training"},
    {"specdec.views"},  # what the pages draw; reads measure's statistics
    {"specdec.cli"},
]


@functools.cache
def python_files() -> tuple[Path, ...]:
    """Every .py file of the repository, not descending into SKIPPED_FOLDERS or hidden folders."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in SKIPPED_FOLDERS and not s.startswith(".")]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return tuple(sorted(found))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of PACKAGES by its dotted name (a package by its __init__.py)."""
    return {module_name(p): p for p in python_files() if p.relative_to(ROOT).parts[0] in PACKAGES}


@functools.cache
def imported_names(path: Path) -> frozenset[str]:
    """Every module a file imports, at its top or inside a function (a lazy import still ties two
    modules), as dotted names; `from a import b` gives both a and a.b (b may be a module)."""
    names = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return frozenset(names)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of PACKAGES it imports (a name imported from a package counts as the
    package's __init__, a submodule as the submodule)."""
    modules = package_modules()
    return {name: {imported for imported in imported_names(path) if imported in modules and imported != name}
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> int:
    for level, names in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in names):
            return level
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def specdec_modules() -> list[tuple[str, Path]]:
    """specdec's modules by dotted name, the package itself and its __main__ left out."""
    return sorted((name, path) for name, path in package_modules().items()
                  if name.startswith("specdec.") and name != "specdec.__main__")


def importing(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(n for n in imported_names(path) if any(n == f or n.startswith(f + ".") for f in forbidden))


@pytest.mark.parametrize(("name", "path"), specdec_modules(), ids=lambda value: str(value))
def test_imports_point_down_the_layers_and_never_into_streamlit(name, path):
    imported = imported_names(path)
    assert not any(m == "streamlit" or m.startswith("streamlit.") for m in imported), name
    for module in imported:
        if module.startswith("specdec."):
            assert layer_of(module) <= layer_of(name), f"{name} imports {module}, a layer above it"
    if name.startswith("specdec.measure"):  # measure and training share a layer, not each other
        assert not any(m.startswith("specdec.training") for m in imported), f"{name} imports training"
    if name.startswith("specdec.training"):
        assert not any(m.startswith(("specdec.measure", "specdec.views")) for m in imported), name


def test_records_hold_no_tensors():
    """Round records are plain data, apart from the torch loop that fills them."""
    assert "torch" not in imported_names(ROOT / "specdec" / "core" / "records.py")
    assert not {"torch", "transformers"} & imported_names(ROOT / "specdec" / "config.py")


def test_the_core_imports_neither_the_speed_machinery_nor_the_layers_above_it():
    core = [p for p in python_files() if p.relative_to(ROOT).parts[:2] == ("specdec", "core")]
    assert len(core) > 5  # the folder was found
    wrong = {str(p.relative_to(ROOT)): names for p in core if (names := importing(p, NOT_IN_CORE))}
    assert not wrong, f"specdec/core/ must import none of {NOT_IN_CORE}: {wrong}"


def test_the_engine_never_imports_streamlit():
    engine = [p for p in python_files() if p.relative_to(ROOT).parts[0] == "specdec"]
    wrong = {str(p.relative_to(ROOT)): names for p in engine if (names := importing(p, ("streamlit",)))}
    assert not wrong, f"specdec/ must not import Streamlit (pages call it): {wrong}"


def test_no_modules_import_each_other_in_a_circle():
    graph = import_graph()
    assert "specdec.core.rounds" in graph and "specdec.core.acceptance" in graph["specdec.core.rounds"]
    assert not (found := cycles(graph)), f"import cycles: {found}"


def test_the_cycle_finder_finds_a_circle():
    """Negative control: a circle of three, and a line that is none."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_python_file_is_longer_than_a_reader_can_hold():
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
               for p in python_files()}
    assert len(lengths) > 50  # the tree was read
    long = {name: lines for name, lines in lengths.items() if lines > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines (split by what a reader looks for): {long}"


def test_every_package_docstring_lists_its_modules():
    """A newcomer opens a package's __init__.py to find their way: every module and subpackage is
    named there."""
    missing = []
    for init in sorted((ROOT / "specdec").rglob("__init__.py")):
        if "__pycache__" in init.parts:
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for child in sorted(init.parent.iterdir()):
            name = child.name
            if name == "__init__.py" or name.startswith((".", "_")):
                continue
            if child.suffix == ".py" or (child.is_dir() and (child / "__init__.py").exists()):
                shown = name if child.suffix == ".py" else name + "/"
                if shown not in docstring and name not in docstring:
                    missing.append(f"{init.parent.relative_to(ROOT)}: {shown}")
    assert not missing, "not named in their package's docstring: " + ", ".join(missing)
