"""IncrementalAlterConfigs: topic and broker configs (Kafka's ConfigurationControlManager).

Theory of operation
-------------------
Each resource in the request is decided on its own and atomically: every operation on it
is checked first, and only if all pass does it contribute ConfigRecords (a null Value
deletes a key). Operations are Kafka's: SET, DELETE, APPEND and SUBTRACT, the last two for
list-typed configs only (``cleanup.policy``). APPEND and SUBTRACT start from the current
value, or the default when the key is not set. Values are validated by
``config_defs.validate_value``; problems come back as INVALID_CONFIG (bad value, unknown
name, list operation on a non-list) or INVALID_REQUEST (malformed request) with a message a
person can act on. Topics must exist (UNKNOWN_TOPIC_OR_PARTITION); broker resources are
named by a broker id or "" for the cluster-wide default.
"""
from __future__ import annotations

from collections import Counter
from enum import IntEnum
from typing import Any

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import ConfigResourceType, MetadataImage
from metadata_log.config_defs import (
    BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType, list_items, validate_value,
)
from quorum.controller.result import ControllerResult

__all__ = ["AlterConfigOp", "incremental_alter_configs"]


class AlterConfigOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _alter_resource(image: MetadataImage, resource: Any
                    ) -> tuple[ErrorCode, str | None, list[Any]]:
    try:
        rtype = ConfigResourceType(resource.resource_type)
    except ValueError:
        rtype = ConfigResourceType.UNKNOWN
    name = resource.resource_name
    if rtype == ConfigResourceType.TOPIC:
        if image.topics.get(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.", []
        defs, kind = TOPIC_CONFIGS, "topic"
    elif rtype == ConfigResourceType.BROKER:
        if name != "" and not (name.isdigit() and name.isascii()):
            return (ErrorCode.INVALID_REQUEST,
                    f"Broker resource name must be a broker id or empty, not {name!r}.", [])
        defs, kind = BROKER_CONFIGS, "broker"
    else:
        return (ErrorCode.INVALID_REQUEST,
                f"Unsupported resource type {resource.resource_type} for "
                f"IncrementalAlterConfigs.", [])
    current = dict(image.configs.get(rtype, name))
    keys = Counter(c.name for c in resource.configs)
    new = dict(current)
    for c in resource.configs:
        if keys[c.name] > 1:
            return ErrorCode.INVALID_REQUEST, f"Duplicate key {c.name} in the request.", []
        defn = defs.get(c.name)
        if defn is None:
            return ErrorCode.INVALID_CONFIG, f"Unknown {kind} config name: {c.name}", []
        try:
            op = AlterConfigOp(c.config_operation)
        except ValueError:
            return (ErrorCode.INVALID_REQUEST,
                    f"Unknown config operation {c.config_operation} for {c.name}.", [])
        if op == AlterConfigOp.DELETE:
            new.pop(c.name, None)
            continue
        if c.value is None:
            return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}", []
        if op == AlterConfigOp.SET:
            value = c.value
        else:
            if defn.type is not ConfigType.LIST:
                return (ErrorCode.INVALID_CONFIG,
                        f"Can't {op.name} to key {c.name} because its type is not LIST.", [])
            items = list_items(new.get(c.name, defn.default))
            operand = list_items(c.value)
            if op == AlterConfigOp.APPEND:
                items += [v for v in operand if v not in items]
            else:
                items = [v for v in items if v not in operand]
            value = ",".join(items)
        error = validate_value(defn, value)
        if error is not None:
            return ErrorCode.INVALID_CONFIG, error, []
        new[c.name] = value
    records = []
    for key in sorted(set(current) | set(new)):
        if current.get(key) != new.get(key):
            records.append(messages.ConfigRecord(resource_type=int(rtype), resource_name=name,
                                                 name=key, value=new.get(key)))
    return ErrorCode.NONE, None, records


def incremental_alter_configs(image: MetadataImage, request: Any
                              ) -> ControllerResult[messages.IncrementalAlterConfigsResponse]:
    Response = messages.IncrementalAlterConfigsResponse
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    records: list[Any] = []
    responses = []
    for resource in request.resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            code, message, rs = (ErrorCode.INVALID_REQUEST,
                                 "Duplicate resource in the request.", [])
        else:
            code, message, rs = _alter_resource(image, resource)
        if not request.validate_only:
            records += rs
        responses.append(Response.AlterConfigsResourceResponse(
            error_code=int(code), error_message=message,
            resource_type=resource.resource_type, resource_name=resource.resource_name))
    return ControllerResult(tuple(records), Response(responses=responses))
