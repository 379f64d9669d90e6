"""Controller process configuration from Kafka's server.properties keys."""
from __future__ import annotations

import pytest

from quorum.config import ConfigError, from_properties, load

BASE = {
    "node.id": "2",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
    "listeners": "CONTROLLER://127.0.0.1:9094",
    "metadata.log.dir": "/var/ketch/meta",
    "ketch.cluster.secret": "s3cret",
}


def test_kafka_keys_give_listener_voters_and_derived_raft_addresses() -> None:
    config = from_properties({**BASE, "broker.session.timeout.ms": "6000",
                              "unclean.leader.election.enable": "true"})
    assert config.node_id == 2
    assert (config.listener_host, config.listener_port) == ("127.0.0.1", 9094)
    assert config.voters[3] == ("127.0.0.1", 9095)
    assert config.raft_address == "127.0.0.1:19094"            # port + ketch.raft.port.offset
    assert config.raft_addresses()[1] == "127.0.0.1:19093"
    assert config.metadata_log_dir == "/var/ketch/meta"
    assert config.controller_settings == {"broker_session_timeout_ms": 6000,
                                          "unclean_leader_election_enable": True}


def test_explicit_raft_voters_override_the_derivation() -> None:
    config = from_properties({**BASE, "ketch.raft.voters":
                              "1@127.0.0.1:7001,2@127.0.0.1:7002,3@127.0.0.1:7003"})
    assert config.raft_address == "127.0.0.1:7002"


@pytest.mark.parametrize("change, key", [
    ({"ketch.cluster.secret": ""}, "ketch.cluster.secret"),
    ({"node.id": "7"}, "Raft address"),      # joins, but on voter 2's listener and Raft port
    ({"process.roles": "broker,controller"}, "process.roles"),
    ({"controller.quorum.voters": "1@127.0.0.1"}, "controller.quorum.voters"),
    ({"controller.quorum.voters": "1@h:1,1@h:2"}, "listed twice"),
    ({"ketch.raft.voters": "1@127.0.0.1:7001"}, "ketch.raft.voters"),
    ({"listeners": ""}, "listeners"),
    ({"metadata.log.dir": ""}, "metadata.log.dir"),
    ({"broker.session.timeout.ms": "soon"}, "broker.session.timeout.ms"),
])
def test_bad_configuration_names_the_key(change, key) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        from_properties({**BASE, **change})


def test_secret_from_a_file_and_relative_dirs_from_the_config_location(tmp_path) -> None:
    (tmp_path / "secret").write_text("from-file\n")
    props = {**BASE, "ketch.cluster.secret": "", "ketch.cluster.secret.file": "secret",
             "metadata.log.dir": "", "log.dirs": "data/meta,data/other"}
    path = tmp_path / "controller.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    config = load(str(path))
    assert config.cluster_secret == "from-file"
    assert config.metadata_log_dir == str(tmp_path / "data/meta")


# -- the processes: brokers and controllers read server.properties through one parser --------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from clients.admin import Admin, ConfigResource, NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.protocol.configs import ConfigSource  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BROKER_BASE = {"node.id": "1", "process.roles": "broker",
               "controller.quorum.voters": "1000@127.0.0.1:9093",
               "listeners": "PLAINTEXT://127.0.0.1:9092"}


def _run(module: str, props: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Start a node process on ``props``; it must refuse before binding anything."""
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, "--config", str(path)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


@pytest.mark.parametrize("module, base", [
    ("broker", BROKER_BASE),
    ("quorum", {**BASE, "node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093"}),
])
@pytest.mark.parametrize("key, value", [("log.retention.ms", "abc"),
                                        ("log.retention.hours", "a week"),
                                        ("log.roll.hours", "0")])
def test_a_bad_value_stops_the_process_with_one_line_naming_the_key(
        module, base, key, value, tmp_path) -> None:
    data = tmp_path / "data"
    done = _run(module, {**base, "log.dirs": str(data), "metadata.log.dir": str(data),
                         key: value}, tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"Invalid value {value} for configuration {key}:" in lines[0]
    assert not data.exists()                  # refused before touching the data directory


def test_a_broker_refuses_a_topic_default_no_log_can_use(tmp_path) -> None:
    # log.segment.bytes=20 passes Kafka's floor (14) but cannot hold one batch (61 bytes).
    done = _run("broker", {**BROKER_BASE, "log.dirs": str(tmp_path / "data"),
                           "log.segment.bytes": "20"}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "log.segment.bytes=20" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One controller, one broker, with Kafka's hour-based synonyms and a misspelt key."""
    c = LocalCluster(str(tmp_path_factory.mktemp("node-config")), controllers=1, brokers=1,
                     broker_props={"log.retention.hours": "5", "log.roll.hours": "2",
                                   "log.retention.msec": "1000"})
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop()


def test_kafka_synonyms_set_the_topic_defaults_and_unknown_keys_warn_once(cluster) -> None:
    broker = cluster.spec.brokers[0]
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("hours", 1, 1)])    # retries NOT_CONTROLLER itself
        resource = ConfigResource.topic("hours")
        entries = admin.describe_configs([resource], include_synonyms=True)[resource]
    retention, roll = entries["retention.ms"], entries["segment.ms"]
    assert (retention.value, retention.source) == (str(5 * 3_600_000),
                                                   ConfigSource.STATIC_BROKER_CONFIG)
    assert (roll.value, roll.source) == (str(2 * 3_600_000), ConfigSource.STATIC_BROKER_CONFIG)
    assert retention.synonyms[0].name == "log.retention.hours"
    log = Path(broker.log).read_text()
    warned = [line for line in log.splitlines() if "log.retention.msec" in line]
    assert len(warned) == 1, warned
    assert "WARNING" in warned[0] and "did you mean log.retention.ms?" in warned[0]


def test_a_controller_not_among_the_voters_joins_with_its_own_raft_address() -> None:
    config = from_properties({**BASE, "node.id": "4", "listeners": "CONTROLLER://127.0.0.1:9096"})
    assert config.joining and config.raft_address == "127.0.0.1:19096"
    assert 4 not in config.raft_addresses() and sorted(config.raft_addresses()) == [1, 2, 3]
