"""Client quotas in the metadata log (KIP-546, Kafka's ClientQuotaControlManager).

AlterClientQuotas sets or removes quota values of an entity: a combination of at most one
``user`` and one ``client-id`` (a name, or None for that type's default), or one ``ip``.
Each entry of the request is decided on its own, all of its operations or none: an empty or
repeated entity type, an ``ip`` with anything else, a key that does not apply to the entity,
or a value that is not positive (a byte rate: not a whole number) refuses the entry with
INVALID_REQUEST and writes nothing for it. The accepted entries become ClientQuotaRecords
(``remove`` for a removal) in one batch; brokers replay them into ``image.client_quotas``
and enforce them (broker/client_quotas.py).
"""
from __future__ import annotations

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import MetadataImage, quota_entity
from quorum.controller.result import ControllerResult

__all__ = ["QUOTA_KEYS", "alter_client_quotas"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
_CLIENT_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True,     # key -> whole numbers
                "request_percentage": False, "controller_mutation_rate": False}
# Keys by the kind of entity they apply to.
QUOTA_KEYS: dict[str, dict[str, bool]] = {
    USER: _CLIENT_KEYS, CLIENT_ID: _CLIENT_KEYS, IP: {"connection_creation_rate": True},
}


def _entity_problem(entity: list[tuple[str, str | None]]) -> str | None:
    types = [t for t, _ in entity]
    if not entity:
        return "Invalid empty client quota entity"
    if len(set(types)) != len(types):
        return f"Duplicate entity type in {types}"
    unknown = [t for t in types if t not in QUOTA_KEYS]
    if unknown:
        return f"Unhandled client quota entity type: {unknown[0]}"
    if IP in types and len(types) > 1:
        return "Invalid quota entity combination: ip cannot be combined with user or client-id"
    return None


def _op_problem(kind: str, op: messages.AlterClientQuotasRequest.OpData) -> str | None:
    whole = QUOTA_KEYS[kind].get(op.key)
    if whole is None:
        return f"Invalid configuration key {op.key} for {kind} quotas"
    if op.remove:
        return None
    if not op.value > 0:
        return f"Quota {op.key} must be positive, got {op.value}"
    if whole and op.value != int(op.value):
        return f"Quota {op.key} must be a whole number, got {op.value}"
    return None


def alter_client_quotas(image: MetadataImage, request: messages.AlterClientQuotasRequest
                        ) -> ControllerResult[messages.AlterClientQuotasResponse]:
    R = messages.AlterClientQuotasResponse
    Q = messages.ClientQuotaRecord
    records, entries = [], []
    for entry in request.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        problem = _entity_problem(pairs)
        if problem is None:
            kind = IP if any(t == IP for t, _ in pairs) else USER
            problem = next((p for op in entry.ops if (p := _op_problem(kind, op))), None)
        if problem is None and len({op.key for op in entry.ops}) != len(entry.ops):
            problem = "Duplicate quota key in one entry"
        entries.append(R.EntryData(
            error_code=ErrorCode.INVALID_REQUEST if problem else ErrorCode.NONE,
            error_message=problem,
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in pairs]))
        if problem is None and not request.validate_only:
            entity = quota_entity(pairs)
            current = image.client_quotas.entities.get(entity, {})
            for op in entry.ops:
                if op.remove and op.key not in current:
                    continue        # nothing to remove: no record
                records.append(Q(entity=[Q.EntityData(entity_type=t, entity_name=n)
                                         for t, n in entity],
                                 key=op.key, value=0.0 if op.remove else op.value,
                                 remove=op.remove))
    return ControllerResult(tuple(records), R(entries=entries))
