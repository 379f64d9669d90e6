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
    ({"node.id": "7"}, "node.id=7"),
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
