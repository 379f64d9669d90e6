"""Imports go one way (STYLE.md §2), and pure cores stay free of I/O.

- ``clients`` imports nothing from Ketch's other packages;
- ``metadata_log`` imports only ``clients``;
- only ``quorum/raft.py`` (and benchmarks) import pysyncobj;
- the sans-I/O cores never import asyncio, socket, threading, selectors or pysyncobj, and
  never call the global ``time`` or ``random`` functions.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("clients", "metadata_log", "quorum", "broker")
ALLOWED = {
    "clients": {"clients"},
    "metadata_log": {"clients", "metadata_log"},
    "quorum": {"clients", "metadata_log", "quorum"},
    "broker": {"clients", "metadata_log", "broker"},
}
PURE = ("clients/protocol", "clients/records", "clients/_core", "quorum/controller")
IO_MODULES = {"asyncio", "socket", "threading", "selectors", "pysyncobj", "aiohttp"}


def _modules(package: str) -> list[pathlib.Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_go_one_way(package: str) -> None:
    for path in _modules(package):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES:
                # KRaft brokers are the quorum's observers: they share its network server
                # (quorum.network) and nothing else from quorum.
                ok = top in ALLOWED[package] or (package == "broker" and name == "quorum.network")
                assert ok, f"{path.relative_to(ROOT)} imports {name}"


def test_only_raft_module_imports_pysyncobj() -> None:
    for package in PACKAGES:
        for path in _modules(package):
            rel = path.relative_to(ROOT).as_posix()
            if any(n.split(".")[0] == "pysyncobj" for n in _imports(path)):
                assert rel == "quorum/raft.py", f"{rel} imports pysyncobj"


@pytest.mark.parametrize("core", PURE)
def test_pure_cores_do_no_io(core: str) -> None:
    for path in sorted((ROOT / core).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        imported = {n.split(".")[0] for n in _imports(path)}
        assert not imported & IO_MODULES, f"{rel} imports {imported & IO_MODULES}"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in ("time", "random") and node.attr != "Random"):
                raise AssertionError(f"{rel}:{node.lineno} calls {node.value.id}.{node.attr}")


def test_test_module_basenames_are_unique() -> None:
    """Test directories are not packages (helpers are imported as siblings), so pytest
    imports each test file by its basename: two files with one name break collection."""
    seen: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        assert path.name not in seen, f"{rel} and {seen[path.name]} share a basename"
        seen[path.name] = rel
