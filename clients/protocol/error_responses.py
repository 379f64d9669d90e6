"""Error responses for whole requests: refuse everything a request names with one code.

Used where a request cannot be served at all: a standby controller (NOT_CONTROLLER), a
metadata write that timed out, a broker that cannot reach the controllers to forward an
admin request, an API version a node does not serve.
"""
from __future__ import annotations

import uuid
from typing import Any

from clients.protocol import messages
from clients.protocol.api_keys import RESPONSE_NAMES, ApiKey

__all__ = ["error_response"]


def error_response(api_key: int, request: Any, code: int, message: str | None = None) -> Any:
    """The response answering ``code`` for everything ``request`` names (Kafka's
    ``AbstractRequest.getErrorResponse``): per topic for the admin APIs, top level
    otherwise."""
    m = messages
    if api_key == ApiKey.BROKER_REGISTRATION:
        return m.BrokerRegistrationResponse(error_code=code)
    if api_key == ApiKey.BROKER_HEARTBEAT:
        return m.BrokerHeartbeatResponse(error_code=code)
    if api_key == ApiKey.ALTER_PARTITION:
        return m.AlterPartitionResponse(error_code=code)
    if api_key == ApiKey.ALLOCATE_PRODUCER_IDS:
        return m.AllocateProducerIdsResponse(error_code=code)
    if api_key == ApiKey.UNREGISTER_BROKER:
        return m.UnregisterBrokerResponse(error_code=code, error_message=message)
    if api_key == ApiKey.CREATE_TOPICS:
        return m.CreateTopicsResponse(topics=[
            m.CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=code,
                                                        error_message=message)
            for t in request.topics])
    if api_key == ApiKey.DELETE_TOPICS:
        names = [(t.name, t.topic_id) for t in request.topics] or \
                [(n, uuid.UUID(int=0)) for n in request.topic_names]
        return m.DeleteTopicsResponse(responses=[
            m.DeleteTopicsResponse.DeletableTopicResult(name=n, topic_id=i, error_code=code,
                                                        error_message=message)
            for n, i in names])
    if api_key == ApiKey.CREATE_PARTITIONS:
        return m.CreatePartitionsResponse(results=[
            m.CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                                   error_message=message)
            for t in request.topics])
    if api_key == ApiKey.ALTER_CLIENT_QUOTAS:
        A = m.AlterClientQuotasResponse
        return A(entries=[A.EntryData(error_code=code, error_message=message, entity=[
            A.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in request.entries])
    if api_key in (ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS):
        response: Any = (m.IncrementalAlterConfigsResponse if api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
                    else m.AlterConfigsResponse)
        return response(responses=[
            response.AlterConfigsResourceResponse(
                error_code=code, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name)
            for r in request.resources])
    if api_key == ApiKey.CREATE_ACLS:
        return m.CreateAclsResponse(results=[
            m.CreateAclsResponse.AclCreationResult(error_code=code, error_message=message)
            for _ in request.creations])
    if api_key == ApiKey.DELETE_ACLS:
        return m.DeleteAclsResponse(filter_results=[
            m.DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=message,
                                                        matching_acls=[])
            for _ in request.filters])
    if api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        # Per user, as the controller answers: a NOT_CONTROLLER must reach the broker's
        # controller channel (which retries on it) and not read as "no results".
        R = m.AlterUserScramCredentialsResponse
        users = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
        return R(results=[R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
                          for u in users])
    # Any other API: its response with the top-level error code set, where it has one.
    # Built once: the fields this response has are known from its class before building it.
    cls = getattr(m, RESPONSE_NAMES[api_key])
    fields = cls.__dataclass_fields__
    kw: dict[str, Any] = {}
    if "error_code" in fields:
        kw["error_code"] = code
    if message is not None and "error_message" in fields:
        kw["error_message"] = message
    return cls(**kw)
