"""The layout shows the architecture (STYLE.md §1-2), and this test keeps it that way.

Imports go one way between packages:

- ``clients`` (wire protocol, record batches, the client) imports nothing else of Ketch;
- ``metadata_log`` imports only ``clients``;
- ``quorum`` imports ``clients`` and ``metadata_log``;
- ``broker`` imports ``clients``, ``metadata_log`` and, of ``quorum``, only
  ``quorum.network`` (the Kafka network server both process kinds serve through: KRaft
  brokers are the quorum's observers, as Kafka's broker depends on its raft module);
- only ``quorum/raft.py`` imports pysyncobj.

The sans-I/O cores (``PURE``) never import asyncio, socket, threading, selectors, subprocess,
signal or pysyncobj, never call the global ``time`` or ``random`` functions, and import no
Ketch module that is not itself a pure core (no back-import into a shell, also not under
``if TYPE_CHECKING:``), apart from the storage port, whose file implementation is the
one place the log code meets the file system.

No object reaches into another's private state: an access ``x._name`` is allowed when ``x``
is ``self``, ``cls``, ``super()``, a module or a class of the same module, or when ``x`` is
a plain name inside a class (or module) that itself defines ``_name`` (an instance of the
same class: ``other._offsets`` in ``OffsetIndex.copy``). ``self.peer._name``,
``replicas._complete(...)`` from another class, a third-party object's internals: not.
"""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
from functools import cache

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("clients", "metadata_log", "quorum", "broker")
ALLOWED = {
    "clients": {"clients"},
    "metadata_log": {"clients", "metadata_log"},
    "quorum": {"clients", "metadata_log", "quorum"},
    "broker": {"clients", "metadata_log", "broker"},
}
# What broker may import from quorum, and nothing else of it.
BROKER_FROM_QUORUM = {"quorum.network"}

# Every pure core: directories (all their modules) and single modules. Checked to be pure
# when listed; a new core module goes here.
PURE = (
    "clients/protocol", "clients/records", "clients/_core", "clients/types.py",
    "clients/errors.py", "clients/frozen.py",
    "metadata_log",
    "quorum/controller", "quorum/progress.py", "quorum/prevote.py", "quorum/voters.py",
    "broker/log", "broker/replica", "broker/producer_state.py", "broker/replica_manager.py",
    "broker/delayed/divert.py", "broker/delayed/store.py", "broker/delayed/scheduler.py",
    "clients/tiered/remote_storage.py", "clients/tiered/metadata.py", "clients/tiered/reading.py",
    "clients/tiered/aborted_txn.py", "broker/tiered/plan.py",
    "broker/fetch_session.py", "broker/client_quotas.py", "broker/auth_helper.py", "broker/scram_describe.py",
    "clients/security/__init__.py", "clients/security/scram.py", "clients/security/sasl.py",
    "clients/security/jaas.py",
    "clients/security/listeners.py",
    "broker/client_telemetry.py", "broker/otlp.py", "broker/client_metrics_export.py",
    "clients/spark/options.py", "clients/spark/planning.py", "clients/http_api/spec.py",
    "clients/http_api/auth.py",
    "broker/group/coordinator.py", "broker/group/state.py", "broker/group/offsets.py",
    "broker/group/records.py", "broker/group/consumer_group.py",
    "broker/group/consumer_coordinator.py", "broker/group/effects.py",
    "broker/txn/coordinator.py", "broker/txn/state.py", "broker/txn/records.py",
    "broker/txn/verification.py", "broker/txn/markers.py", "broker/link_manager/core.py",
    "broker/controller_endpoints.py",
    "broker/mirror/__init__.py", "broker/mirror/_core.py", "broker/mirror/_port.py",
)
# Ports: the synchronous storage interface the log core is written against, with its file
# and simulated implementations (Kafka's ReplicatedLog / MockLog split). Pure cores may
# import it; it may use the file system and a lock.
PORTS = ("broker/log/storage.py",)
IO_MODULES = {"asyncio", "socket", "threading", "selectors", "pysyncobj", "aiohttp",
              "subprocess", "signal", "concurrent"}

# Private cross-object accesses still present, by "path:name", each with why and who
# removes it. The broker's data-plane rewrite (issue 11) removed replicas._complete,
# groups._run and the aiohttp site._server; a stale entry fails
# test_allow_list_names_only_accesses_that_exist.
PRIVATE_ACCESS_ALLOWED: dict[str, str] = {
    "clients/cli/leader_election.py:_value2member_map_":
        "Enum internals; the public test is `code in clients.protocol.errors.ERROR_INFO` "
        "(the CLI's owner is editing this file)",
}
# NamedTuple's public API is spelt with an underscore.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
CHECKED_FOR_PRIVATE_ACCESS = (*PACKAGES, "chaos")


def _modules(package: str) -> list[pathlib.Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _files(entry: str) -> list[pathlib.Path]:
    path = ROOT / entry
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


@cache
def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _package_of(path: pathlib.Path) -> str:
    """The package a relative import in ``path`` starts from (a/b/c.py and a/b/__init__.py:
    a.b)."""
    return ".".join(path.relative_to(ROOT).parts[:-1])


def _imports(path: pathlib.Path) -> set[str]:
    """Every module name an import statement names, relative ones made absolute; for
    ``from a import b`` both ``a`` and ``a.b`` (b may be a module). Walks the whole tree:
    imports under ``if TYPE_CHECKING:`` or inside functions count."""
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = _package_of(path).split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(p for p in (*base, module) if p)
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names if a.name != "*")
    return names


def _resolve(module: str) -> pathlib.Path | None:
    """The file of a Ketch module, or None (a class or function name, or not Ketch's)."""
    base = ROOT.joinpath(*module.split("."))
    if (base / "__init__.py").exists():
        return base / "__init__.py"
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py")
    return None


def _pure_files() -> set[pathlib.Path]:
    return {f for entry in PURE for f in _files(entry)} - {ROOT / p for p in PORTS}


# ---------------------------------------------------------------- imports between packages

@pytest.mark.parametrize("package", PACKAGES)
def test_imports_go_one_way(package: str) -> None:
    for path in _modules(package):
        for name in _imports(path):
            top = name.split(".")[0]
            if top not in PACKAGES:
                continue
            ok = top in ALLOWED[package] or (package == "broker" and any(
                name == m or name.startswith(m + ".") for m in BROKER_FROM_QUORUM))
            assert ok, f"{path.relative_to(ROOT)} imports {name}"


def test_broker_uses_only_the_network_server_of_quorum() -> None:
    used = {name for path in _modules("broker") for name in _imports(path)
            if name.split(".")[0] == "quorum" and _resolve(name) is not None}
    assert used <= BROKER_FROM_QUORUM, used


def test_only_raft_module_imports_pysyncobj() -> None:
    for package in PACKAGES:
        for path in _modules(package):
            rel = path.relative_to(ROOT).as_posix()
            if any(n.split(".")[0] == "pysyncobj" for n in _imports(path)):
                assert rel == "quorum/raft.py", f"{rel} imports pysyncobj"


# ---------------------------------------------------------------- pure cores

def test_every_listed_core_exists() -> None:
    for entry in (*PURE, *PORTS):
        assert (ROOT / entry).exists(), f"{entry} is listed but does not exist"


@pytest.mark.parametrize("core", PURE)
def test_pure_cores_do_no_io(core: str) -> None:
    for path in _files(core):
        rel = path.relative_to(ROOT).as_posix()
        if rel in PORTS:
            continue
        imported = {n.split(".")[0] for n in _imports(path)}
        assert not imported & IO_MODULES, f"{rel} imports {imported & IO_MODULES}"
        for node in ast.walk(_tree(path)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in ("time", "random") and node.attr != "Random"):
                raise AssertionError(f"{rel}:{node.lineno} calls {node.value.id}.{node.attr}")


@pytest.mark.parametrize("core", PURE)
def test_pure_cores_import_only_pure_cores(core: str) -> None:
    pure = _pure_files() | {ROOT / p for p in PORTS}
    for path in _files(core):
        rel = path.relative_to(ROOT).as_posix()
        if rel in PORTS:
            continue
        for name in sorted(_imports(path)):
            if name.split(".")[0] not in PACKAGES:
                continue
            target = _resolve(name)
            if target is None:
                continue
            assert target in pure, (f"{rel} imports {name} "
                                    f"({target.relative_to(ROOT)} is not a pure core)")


# ---------------------------------------------------------------- private state stays private

def _module_names(tree: ast.Module, path: pathlib.Path) -> set[str]:
    """Names bound to modules by this file's imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for a in node.names:
                full = f"{module}.{a.name}"
                if _resolve(full) is not None or (node.level == 0 and _is_external_module(full)):
                    names.add(a.asname or a.name)
    return names


@cache
def _is_external_module(name: str) -> bool:
    import importlib.util
    if name.split(".")[0] in PACKAGES:
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def _own_private_names(scope: ast.AST) -> set[str]:
    """Private names a class (or module) defines: its methods, attributes it assigns,
    ``__slots__`` entries."""
    out: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            out.update(c.value for c in ast.walk(node.value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {n for n in out if n.startswith("_")}


def private_accesses(path: pathlib.Path) -> list[str]:
    """``path:line receiver._name`` for each private access across objects."""
    tree = _tree(path)
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    modules = _module_names(tree, path)
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    class_names = {c.name for c in classes}
    module_own = _own_private_names(tree)
    own_by_class = {id(c): _own_private_names(c) for c in classes}
    found: list[str] = []

    def visit(node: ast.AST, cls: ast.ClassDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.ClassDef) else cls
            if (isinstance(child, ast.Attribute) and child.attr.startswith("_")
                    and not child.attr.endswith("__") and child.attr not in NAMEDTUPLE_API):
                v = child.value
                if isinstance(v, ast.Name):
                    ok = (v.id in ("self", "cls") or v.id in modules or v.id in class_names
                          or child.attr in (own_by_class[id(cls)] if cls else module_own))
                else:
                    ok = (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                          and v.func.id == "super")
                if not ok:
                    found.append(f"{rel}:{child.lineno} {ast.unparse(child)}")
            visit(child, inner)

    visit(tree, None)
    return found


@pytest.mark.parametrize("package", CHECKED_FOR_PRIVATE_ACCESS)
def test_no_private_access_across_objects(package: str) -> None:
    found = [hit for path in _modules(package) for hit in private_accesses(path)]
    unexpected = [hit for hit in found
                  if f"{hit.split(':')[0]}:{hit.rsplit('.', 1)[-1]}" not in PRIVATE_ACCESS_ALLOWED]
    assert not unexpected, "private state reached from outside its object:\n" + "\n".join(
        unexpected)


def test_the_private_access_check_finds_what_it_must(tmp_path) -> None:
    """The check itself: the patterns issue 11 names are found, their public forms pass."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n"
        "from dataclasses import dataclass\n"
        "class Api:\n"
        "    def handle(self, replicas, groups, site):\n"
        "        replicas._complete([])\n"
        "        groups._run()\n"
        "        self.broker._server.close()\n"
        "        return site._server\n"
        "class Index:\n"
        "    __slots__ = ('_offsets',)\n"
        "    def copy(self, other):\n"
        "        other._offsets = self._offsets\n"
        "        os._exit; super()._x; self._y\n"
        "        return Index._make\n")
    found = [hit.split(" ", 1)[1] for hit in private_accesses(sample)]
    assert found == ["replicas._complete", "groups._run", "self.broker._server",
                     "site._server"]


def test_allow_list_names_only_accesses_that_exist() -> None:
    found = {f"{hit.split(':')[0]}:{hit.rsplit('.', 1)[-1]}"
             for package in CHECKED_FOR_PRIVATE_ACCESS for path in _modules(package)
             for hit in private_accesses(path)}
    stale = set(PRIVATE_ACCESS_ALLOWED) - found
    assert not stale, f"allowed but gone (remove from PRIVATE_ACCESS_ALLOWED): {stale}"


# ---------------------------------------------------------------- tests

def test_test_module_basenames_are_unique() -> None:
    """Test directories are not packages (helpers are imported as siblings), so pytest
    imports each test file by its basename: two files with one name break collection."""
    seen: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        assert path.name not in seen, f"{rel} and {seen[path.name]} share a basename"
        seen[path.name] = rel


@pytest.mark.parametrize("command", [[sys.executable, "-m", "pytest"], ["pytest"]])
def test_pytest_collects_from_the_repo_root(command: list[str]) -> None:
    """``tests/clients`` must not shadow the ``clients`` package, with ``python -m pytest``
    (which puts the current directory on sys.path) or plain ``pytest`` (which does not)."""
    if command == ["pytest"]:
        command = [str(pathlib.Path(sys.executable).with_name("pytest"))]
        if not pathlib.Path(command[0]).exists():
            pytest.skip("no pytest script next to this interpreter")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([*command, "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/clients/test_clock.py", "tests/clients/records"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tests/clients/test_clock.py: " in done.stdout   # addopts has -q: counts per file
