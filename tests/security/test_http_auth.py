"""The HTTP admin API's logins and per-route ACL questions (clients/http_api/auth.py), and the
controller listener a broker dials (clients/security/listeners.py): pure."""
from __future__ import annotations

import base64

import pytest

from clients.http_api.auth import (
    Action, HttpAuthConfig, HttpAuthError, PasswordCheck, parse_basic, required_checks,
)
from clients.protocol.acls import AclOperation as O, AclResourceType as R
from clients.security import scram


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_basic_header_parsing() -> None:
    assert parse_basic(None) is None and parse_basic("") is None
    assert parse_basic(_basic("alice:pa:ss")) == ("alice", "pa:ss")     # only the first colon splits
    for bad in ("Bearer abc", "Basic !!!", _basic("secret-no-colon"), _basic(":secret")):
        with pytest.raises(HttpAuthError) as e:
            parse_basic(bad)
        assert "secret" not in str(e.value)             # never echoes what may be a password


def _credentials(table: dict) -> object:
    return lambda user, mechanism: table.get((user, mechanism.name))


def test_plain_users_and_scram_verifiers() -> None:
    table = {("alice", "SCRAM-SHA-512"): scram.credential_from_password(
        scram.MECHANISMS["SCRAM-SHA-512"], "alice-pw", b"salt-1", 4096)}
    check = PasswordCheck({"admin": "admin-pw"}, _credentials(table), b"k" * 32)
    assert check.quick("admin", "admin-pw") is True
    assert check.quick("nobody", "x") is False                 # no such user: no PBKDF2 spent
    assert check.quick("alice", "alice-pw") is None            # a verifier must be computed
    assert check.slow("alice", "wrong") is False
    assert check.quick("alice", "wrong") is None               # a failure is not remembered
    assert check.slow("alice", "alice-pw") is True
    assert check.quick("alice", "alice-pw") is True            # remembered
    # A changed credential (new salt) no longer matches the remembered pass.
    table[("alice", "SCRAM-SHA-512")] = scram.credential_from_password(
        scram.MECHANISMS["SCRAM-SHA-512"], "new-pw", b"salt-2", 4096)
    assert check.quick("alice", "alice-pw") is None and check.slow("alice", "alice-pw") is False
    assert check.slow("alice", "new-pw") is True


def test_which_calls_need_a_login() -> None:
    off = HttpAuthConfig.from_properties({})
    assert not off.needs_login("create_topic", "POST")
    on = HttpAuthConfig.from_properties({"ketch.http.authentication": "basic"})
    assert on.needs_login("create_topic", "POST") and on.needs_login("list_topics", "GET")
    assert not on.needs_login("metrics", "GET") and not on.needs_login("ready", "GET")
    reads_open = HttpAuthConfig.from_properties({"ketch.http.authentication": "basic",
                                                 "ketch.http.open.reads": "true",
                                                 "ketch.http.open.status": "false"})
    assert not reads_open.needs_login("list_topics", "GET")
    assert reads_open.needs_login("delete_topic", "DELETE")
    with pytest.raises(HttpAuthError):
        HttpAuthConfig.from_properties({"ketch.http.authentication": "digest"})


def test_routes_ask_what_kafkas_apis_ask() -> None:
    (create,) = required_checks("create_topic", "POST", {}, {"name": "t"})
    assert create.alternatives == (Action(O.CREATE, R.CLUSTER, "kafka-cluster"),
                                   Action(O.CREATE, R.TOPIC, "t"))
    assert create.error == "TOPIC_AUTHORIZATION_FAILED"
    (delete,) = required_checks("delete_topic", "DELETE", {"topic": "t"}, None)
    assert delete.alternatives == (Action(O.DELETE, R.TOPIC, "t"),)
    (alter,) = required_checks("alter_topic_configs", "PATCH", {"topic": "t"}, {"set": {}})
    assert alter.alternatives == (Action(O.ALTER_CONFIGS, R.TOPIC, "t"),)
    (group,) = required_checks("delete_group", "DELETE", {"group": "g"}, None)
    assert group.error == "GROUP_AUTHORIZATION_FAILED"
    reset = required_checks("reset_group_offsets", "POST", {"group": "g"},
                            {"to": "earliest", "topics": ["a", "b"]})
    assert [c.alternatives[0] for c in reset] == [
        Action(O.READ, R.GROUP, "g"), Action(O.READ, R.TOPIC, "a"), Action(O.READ, R.TOPIC, "b")]
    # Without topics the committed ones are unknown before the call: ALTER on the cluster.
    assert Action(O.ALTER, R.CLUSTER, "kafka-cluster") in [
        c.alternatives[0] for c in required_checks("reset_group_offsets", "POST", {"group": "g"},
                                                   {"to": "earliest"})]
    (elect,) = required_checks("elect_leaders", "POST", {}, {})
    assert elect.alternatives == (Action(O.ALTER, R.CLUSTER, "kafka-cluster"),)
    assert elect.error == "CLUSTER_AUTHORIZATION_FAILED"
    assert required_checks("list_topics", "GET", {}, None) == []      # filtered instead
    # A route the table does not know: ALTER on the cluster to change, DESCRIBE to read.
    (unknown_write,) = required_checks("create_cluster_link", "POST", {}, {})
    assert unknown_write.alternatives == (Action(O.ALTER, R.CLUSTER, "kafka-cluster"),)
    (unknown_read,) = required_checks("list_cluster_links", "GET", {}, None)
    assert unknown_read.alternatives == (Action(O.DESCRIBE, R.CLUSTER, "kafka-cluster"),)


def test_the_controller_listener_as_a_broker_dials_it() -> None:
    from clients.security.listeners import SecurityProtocol, controller_listener
    assert controller_listener({}) == ("CONTROLLER", SecurityProtocol.PLAINTEXT)
    assert controller_listener({"controller.listener.names": "ctl,other",
                                "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CTL:SASL_SSL"}) \
        == ("CTL", SecurityProtocol.SASL_SSL)
    assert controller_listener({"listener.security.protocol.map": "CONTROLLER:SSL"}) == \
        ("CONTROLLER", SecurityProtocol.SSL)
