"""The package's shape: imports only point down the layers, and the engine never imports Streamlit."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "specdec"
# Lowest first: a module may import from its own layer or any layer before it, never after.
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


def layer_of(module: str) -> int:
    for level, names in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in names):
            return level
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name not in ("specdec", "specdec.__main__"):
            yield name, path


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize(("name", "path"), list(modules()), ids=lambda value: str(value))
def test_imports_point_down_and_never_into_streamlit(name, path):
    imported = imports_of(path)
    assert not any(m == "streamlit" or m.startswith("streamlit.") for m in imported), name
    for module in imported:
        if module.startswith("specdec."):
            assert layer_of(module) <= layer_of(name), f"{name} imports {module}, a layer above it"
    if name.startswith("specdec.measure"):
        assert not any(m.startswith("specdec.training") for m in imported), f"{name} imports training"
    if name.startswith("specdec.training"):
        assert not any(m.startswith(("specdec.measure", "specdec.views")) for m in imported), name


def test_records_hold_no_tensors():
    """Round records are plain data, apart from the torch loop that fills them."""
    assert "torch" not in imports_of(PACKAGE / "core" / "records.py")
    assert not {"torch", "transformers"} & imports_of(PACKAGE / "config.py")
