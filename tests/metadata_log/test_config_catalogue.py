"""The config catalogue (metadata_log/_broker_configs.py, _topic_configs.py): Kafka's names,
defaults, limits and scopes, and every key Ketch itself reads.

The spot checks were read from Kafka 3.9.0's sources (``ServerLogConfigs``,
``ServerConfigs``, ``SocketServerConfigs``, ``SslConfigs``, ``SaslConfigs``, ``LogConfig``...
for types and defaults; ``DynamicBrokerConfig`` for scopes): ``log.retention.ms`` is dynamic
cluster-wide, while ``log.retention.minutes`` and ``.hours`` are read-only, because only the
first name of each topic-config synonym chain is reconfigurable.
"""
from __future__ import annotations

import ast
import os
import re

import pytest

from clients.cli.launcher import LocalCluster
from clients.properties import load_properties
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log._broker_configs import BROKER_CONFIG_DEFS
from metadata_log._config_types import INT32_MAX, INT64_MAX
from metadata_log._topic_configs import TOPIC_CONFIG_DEFS
from metadata_log.config_defs import (
    BROKER_CONFIGS, LISTENER_ONLY_SECURITY_CONFIGS, TOPIC_CONFIGS, ConfigType, DynamicScope,
    broker_config_def, validate_value,
)
from tests.integration.integration_helpers import FAST_BROKER, FAST_CONTROLLER
from tests.quorum.controller.harness import Harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL_DEFS = [("broker", d) for d in BROKER_CONFIG_DEFS] + [("topic", d) for d in TOPIC_CONFIG_DEFS]
RO, PB, CW = DynamicScope.READ_ONLY, DynamicScope.PER_BROKER, DynamicScope.CLUSTER_WIDE
INTEGERS = {ConfigType.SHORT, ConfigType.INT, ConfigType.LONG}


def test_names_are_unique_and_well_formed() -> None:
    for defs in (BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS):
        names = [d.name for d in defs]
        assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
        bad = [n for n in names if not re.fullmatch(r"[a-z][a-z0-9]*(\.[a-z0-9]+)*", n)]
        assert bad == []
    # The whole catalogue, not a first cut: Kafka 3.9's KafkaConfig has 307 non-ZooKeeper
    # keys, and the dynamic ones number 93 with the three quota keys.
    assert len(BROKER_CONFIGS) >= 320
    # Kafka has 93; listeners and advertised.listeners are read-only in Ketch (no live rebind).
    assert sum(d.dynamic is not RO for d in BROKER_CONFIG_DEFS) == 91
    assert not any(n.startswith("zookeeper.") for n in BROKER_CONFIGS)


@pytest.mark.parametrize("kind,defn", ALL_DEFS, ids=[f"{k}:{d.name}" for k, d in ALL_DEFS])
def test_every_default_parses_and_passes_its_own_validator(kind: str, defn) -> None:
    if defn.default is not None:
        assert validate_value(defn, defn.default) is None


def test_every_doc_is_one_line_and_unapplied_ones_say_why() -> None:
    for _, defn in ALL_DEFS:
        assert defn.doc and "\n" not in defn.doc, defn.name
        assert ("no effect in Ketch" in defn.doc) == (not defn.applied), defn.name


def test_every_topic_synonym_is_a_broker_key_of_a_compatible_type() -> None:
    for topic in TOPIC_CONFIG_DEFS:
        for synonym in topic.synonyms:
            broker = BROKER_CONFIGS.get(synonym.name)
            assert broker is not None, (topic.name, synonym.name)
            same = broker.type is topic.type or {broker.type, topic.type} <= INTEGERS
            assert same, (topic.name, synonym.name, broker.type, topic.type)
            if synonym.unit_ms != 1:
                assert broker.type in INTEGERS and topic.type in INTEGERS
            # A broker default Ketch would not act on is not applied either, and back.
            assert broker.applied == topic.applied, (topic.name, synonym.name)
            # The broker default must pass the topic's check once converted to its unit.
            if broker.default is not None and synonym.unit_ms == 1:
                assert validate_value(topic, broker.default) is None, synonym.name
        # Kafka's ServerTopicConfigSynonyms: the first synonym is the dynamic one.
        if topic.synonyms and topic.name != "message.format.version":
            assert BROKER_CONFIGS[topic.synonyms[0].name].dynamic is CW, topic.name


def _keys_read_by(path: str, function: str | None = None) -> set[str]:
    """Config keys a module reads: string arguments of ``_int``/``_bool``/``num``, of
    ``NodeProperties.get_int``/``get_bool``/``get_str``/``is_set``, and of
    ``get``/``broker_value``/``[...]``/``in`` on something named like properties or layers,
    and the first item of ``(key, attribute)`` pairs a loop walks."""
    tree = ast.parse(open(os.path.join(ROOT, path)).read())
    if function is not None:
        tree = next(n for n in ast.walk(tree)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function)

    def props_like(node: ast.AST) -> bool:
        text = ast.unparse(node)
        return "prop" in text or "layers" in text

    def const(node: ast.AST | None) -> str | None:
        ok = isinstance(node, ast.Constant) and isinstance(node.value, str)
        return node.value if ok else None  # type: ignore[union-attr]

    keys: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in ("_int", "_bool", "num"):
                keys.add(const(node.args[1] if name != "num" else node.args[0]))
            elif name in ("get_int", "get_bool", "get_str", "is_set"):   # NodeProperties
                keys.add(const(node.args[0]))
            elif name in ("get", "broker_value") and isinstance(func, ast.Attribute) \
                    and props_like(func.value):
                keys.add(const(node.args[0]))
        elif isinstance(node, ast.Subscript) and props_like(node.value):
            keys.add(const(node.slice))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) \
                and props_like(node.comparators[0]):
            keys.add(const(node.left))
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
            keys.update(const(pair.elts[0]) for pair in node.iter.elts
                        if isinstance(pair, ast.Tuple))
    return {k for k in keys if k is not None and "." in k}


def test_every_key_ketch_reads_is_known_and_applied() -> None:
    read = {
        "broker/config.py": _keys_read_by("broker/config.py"),
        "quorum/config.py": _keys_read_by("quorum/config.py"),
        "broker/broker.py _group_config": _keys_read_by("broker/broker.py", "_group_config"),
        "broker/broker.py": _keys_read_by("broker/broker.py"),
    }
    # The scan must find what it is meant to find (else it proves nothing).
    assert {"node.id", "socket.request.max.bytes", "ketch.event.loop"} <= read["broker/config.py"]
    assert {"ketch.raft.voters", "auto.leader.rebalance.enable",
            "metadata.log.max.record.bytes.between.snapshots"} <= read["quorum/config.py"]
    assert {"group.max.size", "offsets.retention.minutes"} <= read["broker/broker.py _group_config"]
    for where, keys in read.items():
        unknown = sorted(k for k in keys if k not in BROKER_CONFIGS)
        assert unknown == [], where
        unapplied = sorted(k for k in keys if not BROKER_CONFIGS[k].applied)
        assert unapplied == [], where
    # Keys the lead's live application reads (issue 19) and LogManagerConfig's.
    for key in ("log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                "log.retention.check.interval.ms", "log.flush.offset.checkpoint.interval.ms"):
        assert BROKER_CONFIGS[key].applied, key


def test_every_key_the_launcher_writes_is_known_and_valid(tmp_path) -> None:
    """The server.properties files ``ketch up`` and the tests write (no process started)."""
    cluster = LocalCluster(str(tmp_path / "c"), controllers=1, brokers=1,
                           broker_props=FAST_BROKER, controller_props=FAST_CONTROLLER)
    written = 0
    for node in cluster.spec.nodes:
        for key, value in load_properties(node.config).items():
            defn = broker_config_def(key)
            assert defn is not None, (node.role, key)
            assert defn.applied, (node.role, key)
            assert validate_value(defn, value) is None, (node.role, key, value)
            written += 1
    assert written >= 15


def test_password_keys_are_exactly_the_secrets_and_sensitive() -> None:
    passwords = {d.name for d in BROKER_CONFIG_DEFS if d.type is ConfigType.PASSWORD}
    assert passwords == {
        "delegation.token.master.key", "delegation.token.secret.key",
        "password.encoder.old.secret", "password.encoder.secret", "sasl.jaas.config",
        "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
        "ssl.keystore.password", "ssl.truststore.certificates", "ssl.truststore.password",
        "ketch.cluster.secret", "ketch.remote.storage.s3.secret.key",
    }
    for _, defn in ALL_DEFS:
        assert defn.sensitive == (defn.type is ConfigType.PASSWORD), defn.name
        if re.search(r"(password|secret|secret\.key|jaas\.config)$", defn.name):
            assert defn.sensitive, defn.name


def test_listener_prefixed_keys_resolve_per_broker() -> None:
    keystore = broker_config_def("listener.name.internal.ssl.keystore.location")
    assert keystore is not None
    assert (keystore.dynamic, keystore.type) == (PB, ConfigType.STRING)
    jaas = broker_config_def("listener.name.internal.plain.sasl.jaas.config")
    assert jaas is not None and jaas.dynamic is PB and jaas.sensitive
    password = broker_config_def("listener.name.external.ssl.keystore.password")
    assert password is not None and password.sensitive
    # Only security and connection keys take a listener prefix.
    assert broker_config_def("listener.name.internal.log.retention.ms") is None
    assert broker_config_def("listener.name.internal.no.such.key") is None


# (name, type, Kafka's default, scope), each read from Kafka 3.9.0's source.
SPOT_CHECKS = [
    ("log.retention.ms", ConfigType.LONG, None, CW),
    ("log.retention.minutes", ConfigType.INT, None, RO),
    ("log.retention.hours", ConfigType.INT, "168", RO),
    ("log.retention.bytes", ConfigType.LONG, "-1", CW),
    ("log.retention.check.interval.ms", ConfigType.LONG, "300000", RO),
    ("log.roll.ms", ConfigType.LONG, None, CW),
    ("log.roll.hours", ConfigType.INT, "168", RO),
    ("log.segment.bytes", ConfigType.INT, "1073741824", CW),
    ("log.cleaner.enable", ConfigType.BOOLEAN, "true", RO),
    ("log.cleaner.threads", ConfigType.INT, "1", CW),
    ("log.cleaner.dedupe.buffer.size", ConfigType.LONG, "134217728", CW),
    ("log.cleaner.io.max.bytes.per.second", ConfigType.DOUBLE, "1.7976931348623157E308", CW),
    ("message.max.bytes", ConfigType.INT, "1048588", CW),
    ("min.insync.replicas", ConfigType.INT, "1", CW),
    ("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", CW),
    ("compression.zstd.level", ConfigType.INT, "3", CW),
    ("num.io.threads", ConfigType.INT, "8", CW),
    ("num.network.threads", ConfigType.INT, "3", CW),
    ("num.replica.fetchers", ConfigType.INT, "1", CW),
    ("max.connections", ConfigType.INT, str(INT32_MAX), CW),
    ("max.connections.per.ip.overrides", ConfigType.STRING, "", CW),
    ("producer.id.expiration.ms", ConfigType.INT, "86400000", CW),
    ("metric.reporters", ConfigType.LIST, "", CW),
    ("follower.replication.throttled.rate", ConfigType.LONG, str(INT64_MAX), CW),
    ("remote.log.manager.copy.max.bytes.per.second", ConfigType.LONG, str(INT64_MAX), CW),
    ("listeners", ConfigType.STRING, "PLAINTEXT://:9092", RO),    # PER_BROKER in Kafka; no live rebind here
    ("ssl.keystore.location", ConfigType.STRING, None, PB),
    ("ssl.keystore.password", ConfigType.PASSWORD, None, PB),
    ("ssl.client.auth", ConfigType.STRING, "none", PB),
    ("ssl.endpoint.identification.algorithm", ConfigType.STRING, "https", PB),
    ("ssl.principal.mapping.rules", ConfigType.STRING, "DEFAULT", RO),
    ("sasl.enabled.mechanisms", ConfigType.LIST, "GSSAPI", PB),
    ("sasl.kerberos.min.time.before.relogin", ConfigType.LONG, "60000", PB),
    ("sasl.login.refresh.buffer.seconds", ConfigType.SHORT, "300", PB),
    ("sasl.mechanism.controller.protocol", ConfigType.STRING, "GSSAPI", RO),
    ("node.id", ConfigType.INT, "-1", RO),
    ("process.roles", ConfigType.LIST, "", RO),
    ("controller.quorum.voters", ConfigType.LIST, "", RO),
    ("broker.session.timeout.ms", ConfigType.INT, "9000", RO),
    ("broker.heartbeat.interval.ms", ConfigType.INT, "2000", RO),
    ("initial.broker.registration.timeout.ms", ConfigType.INT, "60000", RO),
    ("metadata.log.max.record.bytes.between.snapshots", ConfigType.LONG, "20971520", RO),
    ("offsets.topic.replication.factor", ConfigType.SHORT, "3", RO),
    ("offsets.retention.minutes", ConfigType.INT, "10080", RO),
    ("group.max.size", ConfigType.INT, str(INT32_MAX), RO),
    ("transaction.state.log.replication.factor", ConfigType.SHORT, "3", RO),
    ("transactional.id.expiration.ms", ConfigType.INT, "604800000", RO),
    ("socket.request.max.bytes", ConfigType.INT, "104857600", RO),
    ("queued.max.requests", ConfigType.INT, "500", RO),
    ("delegation.token.max.lifetime.ms", ConfigType.LONG, "604800000", RO),
    ("remote.log.storage.system.enable", ConfigType.BOOLEAN, "false", RO),
    ("log.local.retention.ms", ConfigType.LONG, "-2", CW),
]


@pytest.mark.parametrize("name,type_,default,scope", SPOT_CHECKS, ids=[c[0] for c in SPOT_CHECKS])
def test_spot_checks_against_kafka(name: str, type_: ConfigType, default: str | None,
                                   scope: DynamicScope) -> None:
    defn = BROKER_CONFIGS[name]
    assert (defn.type, defn.default, defn.dynamic) == (type_, default, scope)


def test_topic_configs_include_kafkas_whole_list() -> None:
    # Kafka 3.9.0's LogConfig names (TopicConfig), all 36, and Ketch's mirror topic configs.
    assert {"ketch.mirror.link", "ketch.mirror.source.topic", "ketch.mirror.state"} <= set(TOPIC_CONFIGS)
    assert {k for k in TOPIC_CONFIGS if not k.startswith("ketch.")} == {
        "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
        "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms",
        "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
        "index.interval.bytes", "leader.replication.throttled.replicas",
        "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms",
        "max.message.bytes", "message.downconversion.enable", "message.format.version",
        "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms", "message.timestamp.type",
        "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
        "preallocate", "remote.log.copy.disable", "remote.log.delete.on.disable",
        "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
        "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable",
    }
    assert TOPIC_CONFIGS["local.retention.ms"].default == "-2"
    assert TOPIC_CONFIGS["message.format.version"].default == "3.0-IV1"
    # A boolean; whether true is allowed is the controller's remote.log.storage.system.enable
    # (tiered_storage_problem, tests/quorum).
    assert validate_value(TOPIC_CONFIGS["remote.storage.enable"], "true") is None
    assert validate_value(TOPIC_CONFIGS["remote.storage.enable"], "yes") is not None


@pytest.mark.parametrize("name,value,ok", [
    ("compression.gzip.level", "-1", True), ("compression.gzip.level", "9", True),
    ("compression.gzip.level", "0", False), ("compression.lz4.level", "18", False),
    ("compression.zstd.level", "-131072", True), ("local.retention.bytes", "-3", False),
    ("message.format.version", "3.0", True), ("message.format.version", "2.8-IV1", True),
    ("message.format.version", "2.9", False),
    ("leader.replication.throttled.replicas", "*", True),
    ("leader.replication.throttled.replicas", "0:101,1:102", True),
    ("follower.replication.throttled.replicas", "0-101", False),
    ("cleanup.policy", "compact,delete", True), ("cleanup.policy", "tidy", False),
])
def test_topic_values_are_checked_as_kafka_does(name: str, value: str, ok: bool) -> None:
    error = validate_value(TOPIC_CONFIGS[name], value)
    assert (error is None) == ok, error
    if not ok:
        assert name in error and value in error     # the message names key and value


@pytest.mark.parametrize("name,value,ok", [
    ("ssl.client.auth", "requested", True), ("ssl.client.auth", "sometimes", False),
    ("controller.quorum.voters", "1@127.0.0.1:9093,2@[::1]:9094", True),
    ("controller.quorum.voters", "1@127.0.0.1", False),
    ("controller.quorum.bootstrap.servers", "host:9093", True),
    ("group.consumer.migration.policy", "bidirectional", True),
    ("group.consumer.migration.policy", "sideways", False),
    ("remote.log.manager.copier.thread.pool.size", "-1", True),
    ("remote.log.manager.copier.thread.pool.size", "0", False),
    ("remote.log.storage.manager.impl.prefix", "", False),
    ("security.inter.broker.protocol", "SASL_SSL", True),
    ("log.retention.ms", "-2", False), ("log.roll.ms", "0", False),
    ("offsets.topic.replication.factor", "40000", False),        # not a SHORT
    ("inter.broker.protocol.version", "3.9-IV0", True),
    ("ketch.event.loop", "trio", False),
])
def test_broker_values_are_checked_as_kafka_does(name: str, value: str, ok: bool) -> None:
    error = validate_value(BROKER_CONFIGS[name], value)
    assert (error is None) == ok, error
    if not ok:
        assert name in error


def _alter(h: Harness, resource_type: int, name: str, key: str, value: str) -> int:
    IAC = M.IncrementalAlterConfigsRequest
    request = IAC(validate_only=True, resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IAC.AlterableConfig(name=key, config_operation=0, value=value)])])
    result = h.controller.handle_incremental_alter_configs(request, h.now_ms)
    return h.commit(result).responses[0].error_code


def test_the_controller_takes_every_dynamic_key_and_refuses_read_only_ones() -> None:
    """Issue 19's complaint: a valid Kafka broker key was "unknown". Every dynamic key in the
    catalogue is accepted with its default for one broker; cluster-wide ones also for the
    cluster default (""); read-only ones, and a listener's security keys without the listener
    prefix, are refused with INVALID_REQUEST (Kafka's answer, KAFKA-13609)."""
    h = Harness()
    h.start_broker(1)
    h.create_topic("t")
    broker, topic = 4, 2
    for defn in BROKER_CONFIG_DEFS:
        value = defn.default if defn.default not in (None, "") else None
        if value is None:
            continue
        per_broker = _alter(h, broker, "1", defn.name, value)
        default = _alter(h, broker, "", defn.name, value)
        if defn.dynamic is RO or defn.name in LISTENER_ONLY_SECURITY_CONFIGS:
            assert (per_broker, default) == (ErrorCode.INVALID_REQUEST,) * 2, defn.name
        elif defn.dynamic is PB:
            assert (per_broker, default) == (ErrorCode.NONE, ErrorCode.INVALID_REQUEST), defn.name
        else:
            assert (per_broker, default) == (ErrorCode.NONE, ErrorCode.NONE), defn.name
    assert _alter(h, broker, "1", "sasl.kerberos.min.time.before.relogin", "120000") == 0
    for defn in TOPIC_CONFIG_DEFS:
        if defn.name.startswith("ketch.mirror."):
            continue    # judged together (tests/mirror/test_mirror_configs.py)
        if defn.default is not None:
            assert _alter(h, topic, "t", defn.name, defn.default) == ErrorCode.NONE, defn.name
