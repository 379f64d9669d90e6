"""AlterClientQuotas in the controller (quorum/controller/quota_control.py)."""
from __future__ import annotations

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from tests.quorum.controller.harness import Harness

A = messages.AlterClientQuotasRequest


def entry(entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]]):
    return A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                       ops=[A.OpData(key=k, value=v, remove=r) for k, v, r in ops])


def alter(h: Harness, *entries, validate_only: bool = False):
    return h.commit(h.controller.handle_alter_client_quotas(
        A(entries=list(entries), validate_only=validate_only), h.now_ms))


def test_set_change_and_remove_quotas_through_the_log() -> None:
    h = Harness()
    resp = alter(h, entry([("client-id", "app"), ("user", None)],
                          [("producer_byte_rate", 1024.0, False), ("request_percentage", 50.5, False)]))
    assert [e.error_code for e in resp.entries] == [0]
    entity = (("client-id", "app"), ("user", None))      # one spelling: sorted by type
    assert dict(h.image.client_quotas.entities[entity]) == {
        "producer_byte_rate": 1024.0, "request_percentage": 50.5}
    alter(h, entry([("user", None), ("client-id", "app")], [("producer_byte_rate", 0, True)]))
    assert dict(h.image.client_quotas.entities[entity]) == {"request_percentage": 50.5}
    alter(h, entry([("client-id", "app"), ("user", None)], [("request_percentage", 0, True)]))
    assert entity not in h.image.client_quotas.entities


def test_bad_entries_are_refused_alone_and_write_nothing() -> None:
    h = Harness()
    before = h.next_offset
    resp = alter(h,
                 entry([], [("producer_byte_rate", 1.0, False)]),
                 entry([("client-id", "a"), ("client-id", "b")], [("producer_byte_rate", 1.0, False)]),
                 entry([("ip", "1.2.3.4"), ("user", "u")], [("connection_creation_rate", 1.0, False)]),
                 entry([("client-id", "a")], [("producer_byte_rate", -5.0, False)]),
                 entry([("client-id", "a")], [("producer_byte_rate", 1.5, False)]),
                 entry([("client-id", "a")], [("no_such_quota", 1.0, False)]),
                 entry([("galaxy", "a")], [("producer_byte_rate", 1.0, False)]),
                 entry([("client-id", "ok")], [("consumer_byte_rate", 10.0, False)]))
    assert [e.error_code for e in resp.entries] == [ErrorCode.INVALID_REQUEST] * 7 + [0]
    assert all(e.error_message for e in resp.entries[:7])
    assert h.next_offset == before + 1 and list(h.image.client_quotas.entities) == [(("client-id", "ok"),)]
    only_checked = alter(h, entry([("client-id", "v")], [("consumer_byte_rate", 1.0, False)]),
                         validate_only=True)
    assert only_checked.entries[0].error_code == 0 and h.next_offset == before + 1
