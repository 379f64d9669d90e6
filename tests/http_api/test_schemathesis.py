"""A property-based run of the HTTP admin API from its own OpenAPI document (schemathesis):
requests generated from every route's schemas, valid and deliberately invalid, against a
live broker and a live controller. No answer may be a 5xx, and both nodes must still be
serving afterwards.

The document is served as is, with one change for the run's sake: topic sizes are capped
at a few partitions (the API takes up to 10,000, and a generator that keeps asking for
that many would spend the run creating partitions, not finding bugs)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.http_api.http_helpers import get
from tests.integration.integration_helpers import STOP_TIMEOUT_S, start_cluster

pytestmark = pytest.mark.process

SCHEMATHESIS = shutil.which("st", path=os.path.dirname(sys.executable)) or shutil.which("st")
EXAMPLES_PER_OPERATION = 20
SEED = 20261126


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "fuzz", controllers=1, brokers=1)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def _document_for_the_run(port: int, path: str) -> str:
    status, doc = get(port, "/v1/openapi.json")
    assert status == 200
    schemas = doc["components"]["schemas"]
    schemas["NewTopic"]["properties"]["partitions"]["maximum"] = 4
    schemas["NewPartitions"]["properties"]["count"]["maximum"] = 4
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


@pytest.mark.parametrize("role", ["broker", "controller"])
def test_no_generated_request_gets_a_5xx(cluster, role: str, tmp_path) -> None:
    assert SCHEMATHESIS, "schemathesis is a test dependency (pyproject's test extra)"
    node = next(n for n in cluster.spec.nodes if n.role == role)
    doc = _document_for_the_run(node.http_port, str(tmp_path / "openapi.json"))
    run = subprocess.run(
        [SCHEMATHESIS, "run", doc, "--url", f"http://127.0.0.1:{node.http_port}",
         "--checks", "not_a_server_error", "--phases", "examples,coverage,fuzzing",
         "--max-examples", str(EXAMPLES_PER_OPERATION), "--seed", str(SEED),
         "--request-timeout", "60", "--suppress-health-check", "all",
         "--report", "junit", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert cluster.exited_nodes() == {}
    for n in cluster.spec.nodes:
        assert get(n.http_port, "/v1/live")[0] == 200
