"""The HTTP admin API of a ``ketch up --secure`` cluster (issue 16): HTTPS against the
cluster's CA, Basic logins checked against the PLAIN table and the SCRAM verifiers of the
metadata log, and the ACLs of the equivalent Kafka API with the StandardAuthorizer that
``--secure`` turns on (``admin`` and the broker user are its super users). An unauthenticated mutating call gets 401
with a JSON error, a call the ACLs do not allow 403; lists hide what the caller may not
describe. The same cluster's controllers listen on SASL_SSL, which the brokers log in to
(they could not register otherwise), and ``ketch`` verbs reach it with --dir."""
from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from clients.admin import Admin, UserScramCredentialUpsertion
from clients.cli.launcher import LocalCluster
from clients.connection import roundtrip
from clients.protocol import ApiKey, messages
from clients.protocol.acls import (
    AclBinding, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
)
from clients.waiting import wait_until

pytestmark = [pytest.mark.process]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_AUTO_CREATE = {"auto.create.topics.enable": "false"}
ALICE, ALICE_PW = "alice", "alice-secret"


class Http:
    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.port, self.context = port, context

    def call(self, method: str, path: str, body: object = None,
             login: tuple[str, str] | None = None) -> tuple[int, object, dict]:
        headers = {"Content-Type": "application/json"}
        if login is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(login).encode()).decode()
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as resp:
                return resp.status, json.loads(resp.read()), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read()), dict(e.headers)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    cluster = LocalCluster(str(tmp_path_factory.mktemp("http-secure")), controllers=1, brokers=1,
                           secure=True,
                           broker_props={**NO_AUTO_CREATE, "broker.heartbeat.interval.ms": "300",
                                         "offsets.topic.num.partitions": "1"},
                           controller_props={"broker.heartbeat.interval.ms": "300"})
    try:
        cluster.start(timeout_s=60)
        assert cluster.security is not None
        admin_pw = cluster.security.client_props()["sasl.password"]
        with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers,
                    **cluster.security.client_props()}) as admin:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(ALICE, "SCRAM-SHA-256", ALICE_PW, 4096)])
            allow = [AclBinding(AclResourceType.TOPIC, "alice-", AclPatternType.PREFIXED,
                                f"User:{ALICE}", "*", op, AclPermissionType.ALLOW)
                     for op in (AclOperation.CREATE, AclOperation.DESCRIBE)]
            admin.create_acls(allow)
            wait_until(lambda: ALICE in admin.describe_user_scram_credentials()
                       and len(admin.describe_acls()) == 2, timeout_s=15,
                       what="alice's credentials and ACLs on the broker")
        broker = cluster.spec.brokers[0]
        yield cluster, Http(broker.http_port, cluster.security.client_ssl_context()), ("admin", admin_pw)
    finally:
        cluster.stop(timeout_s=15)


def test_unauthenticated_and_wrong_logins_get_401_while_probes_stay_open(secured) -> None:
    cluster, http, admin = secured
    status, body, _ = http.call("GET", "/v1/ready")
    assert status == 200, body
    status, body, headers = http.call("POST", "/v1/topics", {"name": "nobody-t"})
    assert status == 401 and body["error"] == "SASL_AUTHENTICATION_FAILED", body
    assert headers["WWW-Authenticate"].startswith("Basic")
    status, body, _ = http.call("POST", "/v1/topics", {"name": "nobody-t"}, login=(ALICE, "wrong"))
    assert status == 401 and "wrong" not in json.dumps(body)
    status, body, _ = http.call("GET", "/v1/topics", login=("mallory", "x"))
    assert status == 401
    # Plain HTTP on the HTTPS port gets nothing.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{http.port}/v1/live", timeout=5)


def test_acls_decide_what_an_authenticated_user_may_do(secured) -> None:
    cluster, http, admin = secured
    # A super user (PLAIN table and SCRAM both know admin) may do anything.
    status, body, _ = http.call("POST", "/v1/topics", {"name": "admins-t", "partitions": 1,
                                                       "replication_factor": 1}, login=admin)
    assert status == 201, body
    # alice (SCRAM-SHA-256) may create and describe alice-*, nothing else.
    status, body, _ = http.call("POST", "/v1/topics", {"name": "alice-t", "partitions": 1,
                                                       "replication_factor": 1},
                                login=(ALICE, ALICE_PW))
    assert status == 201, body
    status, body, _ = http.call("POST", "/v1/topics", {"name": "bobs-t"}, login=(ALICE, ALICE_PW))
    assert status == 403 and body["error"] == "TOPIC_AUTHORIZATION_FAILED", body
    status, body, _ = http.call("DELETE", "/v1/topics/alice-t", login=(ALICE, ALICE_PW))
    assert status == 403 and body["error"] == "TOPIC_AUTHORIZATION_FAILED", body
    status, body, _ = http.call("GET", "/v1/topics/admins-t", login=(ALICE, ALICE_PW))
    assert status == 403, body
    # Not even whether a topic exists: 403 before 404.
    status, body, _ = http.call("GET", "/v1/topics/no-such-topic", login=(ALICE, ALICE_PW))
    assert status == 403, body
    status, body, _ = http.call("POST", "/v1/actions/elect-leaders", {}, login=(ALICE, ALICE_PW))
    assert status == 403 and body["error"] == "CLUSTER_AUTHORIZATION_FAILED", body
    status, body, _ = http.call("GET", "/v1/topics", login=(ALICE, ALICE_PW))
    assert status == 200 and [t["name"] for t in body["items"]] == ["alice-t"], body
    status, body, _ = http.call("GET", "/v1/topics", login=admin)
    assert {"admins-t", "alice-t"} <= {t["name"] for t in body["items"]}, body
    status, body, _ = http.call("DELETE", "/v1/topics/alice-t", login=admin)
    assert status == 200, body


def test_controllers_http_api_and_the_cli_on_the_secured_cluster(secured) -> None:
    cluster, http, admin = secured
    controller = cluster.spec.controllers[0]
    chttp = Http(controller.http_port, http.context)
    status, body, _ = chttp.call("POST", "/v1/topics", {"name": "x"})
    assert status == 401, body
    # Its Kafka listener is SASL_SSL: a plaintext request gets no answer.
    with pytest.raises((ConnectionError, OSError)):
        roundtrip("127.0.0.1", controller.port, ApiKey.API_VERSIONS, 0,
                  messages.ApiVersionsRequest(), timeout_s=5)
    # The controller's own admin clients log in to the controllers and the brokers.
    status, body, _ = chttp.call("GET", "/v1/quorum", login=admin)
    assert status == 200 and body["leader_id"] == controller.id, body
    status, body, _ = chttp.call("GET", "/v1/topics", login=admin)
    assert status == 200 and "admins-t" in {t["name"] for t in body["items"]}, body
    # ketch reads leaders' log end offsets from the brokers' HTTPS API with the admin login.
    out = subprocess.run([sys.executable, "-m", "clients.cli", "topic", "describe", "admins-t",
                          "--dir", cluster.dir, "--output", "json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    (view,) = json.loads(out.stdout)
    assert view["partitions"][0]["log_end_offset"] == 0, view
