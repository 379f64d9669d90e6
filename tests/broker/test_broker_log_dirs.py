"""A broker's log directories at start-up (broker.broker): each formatted with its own
directory.id, and no start while one is unusable (the interim before KIP-858)."""
from __future__ import annotations

import pytest

from broker.broker import Broker
from broker.config import from_properties
from clients.properties import load_properties


def props(*log_dirs: str) -> dict[str, str]:
    return {"node.id": "1", "process.roles": "broker", "controller.quorum.voters": "1001@127.0.0.1:1",
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": ",".join(log_dirs),
            "ketch.cluster.id": "HGlCEN9mTK-uWvI6oLyeVQ"}


def test_a_broker_refuses_to_start_with_an_unusable_log_dir(tmp_path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file where a log dir should be")
    p = props(str(good), str(bad))
    with pytest.raises(SystemExit) as e:
        Broker(from_properties(p), p)
    assert str(bad) in str(e.value) and "unusable" in str(e.value)
    meta = load_properties(str(good / "meta.properties"))
    assert meta["node.id"] == "1" and len(meta["directory.id"]) == 22


def test_log_dirs_of_another_cluster_are_refused(tmp_path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    second.mkdir()
    (second / "meta.properties").write_text("version=1\ncluster.id=other\nnode.id=1\n")
    p = props(str(first), str(second))
    with pytest.raises(SystemExit) as e:
        Broker(from_properties(p), p)
    assert "cluster.id" in str(e.value)
