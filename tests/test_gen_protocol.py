"""tools/gen_protocol.py fails loudly on missing input and never truncates its outputs.

Each case runs a copy of the tool in a temporary tree (tools/ and clients/protocol/ with
sentinel outputs), so the repository's generated files are never at stake; the schema
directory is absent, partial, corrupt, or a full copy of ../shared/kafka-protocol."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "kafka-protocol"
SENTINEL = "# an earlier generated file, which a failed run must leave as it is\n" * 40
OUTPUTS = ("clients/protocol/_schemas.py", "clients/protocol/messages.pyi",
           "clients/protocol/api_keys.pyi")


def _tree(tmp_path: pathlib.Path) -> pathlib.Path:
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "gen_protocol.py", repo / "tools" / "gen_protocol.py")
    for rel in OUTPUTS:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(SENTINEL)
    return repo


def _run(repo: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(repo / "tools" / "gen_protocol.py"), *args],
                          capture_output=True, text=True, timeout=120)


def _assert_refused(result: subprocess.CompletedProcess, repo: pathlib.Path, names: str) -> None:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr            # one line, no traceback
    assert names in lines[0], lines[0]
    for rel in OUTPUTS:
        assert (repo / rel).read_text() == SENTINEL, f"{rel} was changed by a failed run"
    assert not list(repo.rglob("*.tmp"))


def test_missing_schema_directory_fails_with_one_line_and_writes_nothing(tmp_path) -> None:
    repo = _tree(tmp_path)      # the default input, tmp_path/shared/kafka-protocol, is absent
    _assert_refused(_run(repo), repo, str(tmp_path / "shared" / "kafka-protocol"))
    _assert_refused(_run(repo, "--check"), repo, str(tmp_path / "shared" / "kafka-protocol"))


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/kafka-protocol is not beside the repo")
def test_partial_or_corrupt_schemas_fail_and_a_full_copy_regenerates(tmp_path) -> None:
    repo = _tree(tmp_path)
    shared = tmp_path / "shared" / "kafka-protocol"
    (shared / "messages").mkdir(parents=True)
    for path in sorted((SHARED / "messages").glob("*.json")):
        shutil.copy(path, shared / "messages")
    # messages/ alone: metadata/ and coordinators/ missing.
    _assert_refused(_run(repo, "--shared", str(shared)), repo, str(shared / "metadata"))

    for folder in ("metadata", "coordinators"):
        shutil.copytree(SHARED / folder, shared / folder)
    broken = shared / "messages" / "ProduceRequest.json"
    good = broken.read_text()
    broken.write_text(good[: len(good) // 2])     # a truncated schema file
    _assert_refused(_run(repo, "--shared", str(shared)), repo, str(broken))

    broken.write_text(good)
    result = _run(repo, "--shared", str(shared))
    assert result.returncode == 0, result.stderr
    for rel in OUTPUTS:
        text = (repo / rel).read_text()
        assert text != SENTINEL and ("ProduceRequest" in text or "PRODUCE = 0" in text), rel
    assert "ProduceRequest" in (repo / OUTPUTS[0]).read_text()
    assert not list(repo.rglob("*.tmp"))
    assert _run(repo, "--check", "--shared", str(shared)).returncode == 0
