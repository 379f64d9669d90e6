"""broker/group's cores stay sans-I/O (STYLE.md §1); only driver.py, the shell, may do I/O."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORES = sorted(p for p in (ROOT / "broker" / "group").glob("*.py") if p.name != "driver.py")
IO_MODULES = {"asyncio", "socket", "threading", "selectors", "pysyncobj", "aiohttp", "os",
              "time", "io"}


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name)
def test_group_cores_do_no_io(path: pathlib.Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {node.module.split(".")[0]}
        else:
            names = set()
        assert not names & IO_MODULES, f"{path.name}:{node.lineno} imports {names & IO_MODULES}"
        # Randomness comes in as a random.Random; the module-level functions are off limits.
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in ("time", "random") and node.attr != "Random"):
            raise AssertionError(f"{path.name}:{node.lineno} calls {node.value.id}.{node.attr}")
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "uuid" and node.attr in ("uuid1", "uuid4")):
            raise AssertionError(f"{path.name}:{node.lineno} draws a uuid from the OS")


def test_there_are_cores_to_check() -> None:
    assert {p.name for p in CORES} >= {"coordinator.py", "state.py", "offsets.py", "records.py"}
