"""IncrementalAlterConfigs and AlterConfigs: topic and broker configs (Kafka's
ConfigurationControlManager).

Theory of operation
-------------------
Each resource in a request is decided on its own and atomically: every operation on it is
checked first, and only if all pass does it contribute ConfigRecords (a null Value deletes
a key). IncrementalAlterConfigs has Kafka's operations SET, DELETE, APPEND and SUBTRACT,
the last two for list-typed configs only (``cleanup.policy``), starting from the current
value or the default. AlterConfigs (the legacy API) replaces the resource's whole set: a
key the request does not name is deleted.

Every value is checked against the one definition table (``metadata_log.config_defs``):
an unknown name or a value of the wrong type or out of range come back as INVALID_CONFIG
naming the key; a read-only broker key ("Cannot update these configs dynamically"), a
per-broker-only key set as the cluster default, or a listener's security key without its
listener prefix as INVALID_REQUEST, as Kafka answers them; a malformed request too.
Topics must exist (UNKNOWN_TOPIC_OR_PARTITION); broker resources are named by a broker id
or "" for the cluster-wide default. Client-metrics subscriptions (KIP-714, resource type
CLIENT_METRICS) are named by the operator and checked as a whole once the operations are
applied (``metadata_log.client_metrics``: Kafka's ClientMetricsConfigs.validate); deleting
every key deletes the subscription. Cluster links (issue 21, Ketch's resource type
CLUSTER_LINK) likewise: checked whole (``metadata_log.cluster_links.validate_link``), and
deleting every key, which deletes the link, is refused while a mirror topic uses it.
``validate_only`` decides and writes nothing.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from clients.protocol import messages
from clients.protocol.configs import AlterConfigOpType
from clients.protocol.errors import ErrorCode
from metadata_log.client_metrics import CLIENT_METRICS_CONFIGS, validate_subscription
from metadata_log.cluster_links import CLUSTER_LINK_CONFIGS, cluster_link, validate_link
from metadata_log.mirror_topics import mirror_config_problem
from metadata_log.image import ConfigResourceType, MetadataImage
from metadata_log.config_defs import (
    tiered_storage_problem,
    LISTENER_ONLY_SECURITY_CONFIGS, TOPIC_CONFIGS, ConfigDef, ConfigType, DynamicScope, broker_config_def, list_items,
    validate_value,
)
from quorum.controller.result import ControllerResult

__all__ = ["alter_configs", "incremental_alter_configs"]


Problem = tuple[ErrorCode, str]


def _resource(image: MetadataImage, resource: Any) -> tuple[ConfigResourceType, Problem | None]:
    """The resource's type, or why it cannot be altered."""
    try:
        rtype = ConfigResourceType(resource.resource_type)
    except ValueError:
        rtype = ConfigResourceType.UNKNOWN
    name = resource.resource_name
    if rtype == ConfigResourceType.TOPIC:
        if image.topics.get(name) is None:
            return rtype, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        return rtype, None
    if rtype == ConfigResourceType.BROKER:
        if name != "" and not (name.isdigit() and name.isascii()):
            return rtype, (ErrorCode.INVALID_REQUEST,
                           f"Broker resource name must be a broker id or empty, not {name!r}.")
        return rtype, None
    if rtype == ConfigResourceType.CLIENT_METRICS:
        if name == "":
            return rtype, (ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        return rtype, None
    if rtype == ConfigResourceType.CLUSTER_LINK:
        if name == "":
            return rtype, (ErrorCode.INVALID_REQUEST, "Cluster link name can't be empty")
        return rtype, None
    return rtype, (ErrorCode.INVALID_REQUEST,
                   f"Unsupported resource type {resource.resource_type} for altering configs.")


def _definition(rtype: ConfigResourceType, resource_name: str, key: str
                ) -> tuple[ConfigDef | None, Problem | None]:
    """The definition ``key`` is checked against, or why it may not be set here."""
    if rtype == ConfigResourceType.TOPIC:
        defn = TOPIC_CONFIGS.get(key)
        if defn is None:
            return None, (ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        return defn, None
    if rtype == ConfigResourceType.CLIENT_METRICS:
        defn = CLIENT_METRICS_CONFIGS.get(key)
        if defn is None:
            return None, (ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
        return defn, None
    if rtype == ConfigResourceType.CLUSTER_LINK:
        defn = CLUSTER_LINK_CONFIGS.get(key)
        if defn is None:
            return None, (ErrorCode.INVALID_CONFIG, f"Unknown cluster link config name: {key}")
        return defn, None
    defn = broker_config_def(key)
    if defn is None:
        return None, (ErrorCode.INVALID_CONFIG, f"Unknown broker config name: {key}")
    # Kafka's DynamicBrokerConfig raises these as ConfigException and its ConfigAdminManager
    # answers INVALID_REQUEST (kept so for compatibility, KAFKA-13609).
    if defn.dynamic is DynamicScope.READ_ONLY:
        return None, (ErrorCode.INVALID_REQUEST,
                      f"Cannot update these configs dynamically: {key} (read-only: set it in "
                      "server.properties and restart the broker)")
    if key in LISTENER_ONLY_SECURITY_CONFIGS:
        return None, (ErrorCode.INVALID_REQUEST,
                      "These security configs can be dynamically updated only per-listener "
                      f"using the listener prefix: {key}")
    if defn.dynamic is DynamicScope.PER_BROKER and resource_name == "":
        return None, (ErrorCode.INVALID_REQUEST,
                      f"Cannot update these configs at default cluster level, broker id must "
                      f"be specified: {key}")
    return defn, None


def _check_set(rtype: ConfigResourceType, resource_name: str, key: str, value: str | None
               ) -> Problem | None:
    """Why ``key`` may not be set to ``value`` on this resource, or None."""
    defn, problem = _definition(rtype, resource_name, key)
    if problem is not None:
        return problem
    assert defn is not None
    if value is None:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}"
    error = validate_value(defn, value)
    return None if error is None else (ErrorCode.INVALID_CONFIG, error)


def _records(image: MetadataImage, rtype: ConfigResourceType, name: str, current: dict[str, str],
             new: dict[str, str], remote_storage_system_enable: bool
             ) -> tuple[Problem | None, list[Any]]:
    """The ConfigRecords taking the resource from ``current`` to ``new``, or why ``new``
    may not be its set (a subscription or a link is judged whole)."""
    problem = None
    if rtype == ConfigResourceType.CLIENT_METRICS:
        problem = validate_subscription(name, new)
    elif rtype == ConfigResourceType.CLUSTER_LINK and new != current:
        problem = validate_link(image, name, new)
    elif rtype == ConfigResourceType.TOPIC:
        # Issue 21: the ketch.mirror.* configs are judged together.
        mirror_problem = mirror_config_problem(new, lambda link: cluster_link(image, link) is not None,
                                               current)
        if mirror_problem is not None:
            problem = (ErrorCode.INVALID_CONFIG, mirror_problem)
        elif name:      # the topic defaults ("") are the brokers' business
            tiered_problem = tiered_storage_problem(new, current, remote_storage_system_enable)
            if tiered_problem is not None:
                problem = (ErrorCode.INVALID_CONFIG, tiered_problem)
    if problem is not None:
        return problem, []
    return None, [messages.ConfigRecord(resource_type=int(rtype), resource_name=name, name=key,
                                  value=new.get(key))
            for key in sorted(set(current) | set(new)) if current.get(key) != new.get(key)]


def _incremental_resource(image: MetadataImage, resource: Any, remote_storage_system_enable: bool
                          ) -> tuple[Problem | None, list[Any]]:
    rtype, problem = _resource(image, resource)
    if problem is not None:
        return problem, []
    name = resource.resource_name
    current = dict(image.configs.get(rtype, name))
    keys = Counter(c.name for c in resource.configs)
    new = dict(current)
    for c in resource.configs:
        if keys[c.name] > 1:
            return (ErrorCode.INVALID_REQUEST, f"Duplicate key {c.name} in the request."), []
        try:
            op = AlterConfigOpType(c.config_operation)
        except ValueError:
            return (ErrorCode.INVALID_REQUEST,
                    f"Unknown config operation {c.config_operation} for {c.name}."), []
        if op == AlterConfigOpType.DELETE:
            new.pop(c.name, None)       # deleting what was never set is not an error
            continue
        defn, problem = _definition(rtype, name, c.name)
        if problem is None and c.value is None:
            problem = (ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
        if problem is not None:
            return problem, []
        assert defn is not None
        if op == AlterConfigOpType.SET:
            value = c.value
        else:
            if defn.type is not ConfigType.LIST:
                return (ErrorCode.INVALID_CONFIG,
                        f"Can't {op.name} to key {c.name} because its type is not LIST."), []
            items = list_items(new.get(c.name, defn.default or ""))
            operand = list_items(c.value)
            if op == AlterConfigOpType.APPEND:
                items += [v for v in operand if v not in items]
            else:
                items = [v for v in items if v not in operand]
            value = ",".join(items)
        problem = _check_set(rtype, name, c.name, value)
        if problem is not None:
            return problem, []
        new[c.name] = value
    return _records(image, rtype, name, current, new, remote_storage_system_enable)


def _legacy_resource(image: MetadataImage, resource: Any, remote_storage_system_enable: bool
                     ) -> tuple[Problem | None, list[Any]]:
    """AlterConfigs: the request's configs become the resource's whole set."""
    rtype, problem = _resource(image, resource)
    if problem is not None:
        return problem, []
    name = resource.resource_name
    new: dict[str, str] = {}
    for c in resource.configs:
        if c.name in new:
            return (ErrorCode.INVALID_REQUEST, f"Duplicate key {c.name} in the request."), []
        problem = _check_set(rtype, name, c.name, c.value)
        if problem is not None:
            return problem, []
        new[c.name] = c.value
    return _records(image, rtype, name, dict(image.configs.get(rtype, name)), new,
                    remote_storage_system_enable)


def _decide(image: MetadataImage, request: Any, alter: Any, response_type: Any, entry_type: Any,
            remote_storage_system_enable: bool) -> ControllerResult[Any]:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    records: list[Any] = []
    responses = []
    for resource in request.resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            problem, rs = (ErrorCode.INVALID_REQUEST, "Duplicate resource in the request."), []
        else:
            problem, rs = alter(image, resource, remote_storage_system_enable)
        if not request.validate_only:
            records += rs
        code, message = problem or (ErrorCode.NONE, None)
        responses.append(entry_type(error_code=int(code), error_message=message,
                                    resource_type=resource.resource_type,
                                    resource_name=resource.resource_name))
    return ControllerResult(tuple(records), response_type(responses=responses))


def incremental_alter_configs(image: MetadataImage, request: messages.IncrementalAlterConfigsRequest,
                              remote_storage_system_enable: bool = False
                              ) -> ControllerResult[messages.IncrementalAlterConfigsResponse]:
    """``remote_storage_system_enable``: the controller's remote.log.storage.system.enable."""
    Response = messages.IncrementalAlterConfigsResponse
    return _decide(image, request, _incremental_resource, Response,
                   Response.AlterConfigsResourceResponse, remote_storage_system_enable)


def alter_configs(image: MetadataImage, request: messages.AlterConfigsRequest,
                  remote_storage_system_enable: bool = False
                  ) -> ControllerResult[messages.AlterConfigsResponse]:
    Response = messages.AlterConfigsResponse
    return _decide(image, request, _legacy_resource, Response,
                   Response.AlterConfigsResourceResponse, remote_storage_system_enable)
