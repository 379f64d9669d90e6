"""CreateAcls / DeleteAcls in the controller (quorum/controller/acl_control.py), through the
log: records, replay into the image, snapshots."""
from __future__ import annotations

from clients.protocol import messages
from clients.protocol.acls import (
    AclOperation as Op, AclPatternType as P, AclPermissionType as Perm, AclResourceType as R,
)
from clients.protocol.errors import ErrorCode
from metadata_log.acls import StandardAcl
from metadata_log.snapshot import image_to_records, records_to_image
from tests.quorum.controller.harness import Harness

C = messages.CreateAclsRequest.AclCreation
D = messages.DeleteAclsRequest.DeleteAclsFilter


def creation(rtype: int = R.TOPIC, name: str = "orders-", ptype: int = P.PREFIXED,
             principal: str = "User:alice", host: str = "*", op: int = Op.READ,
             perm: int = Perm.ALLOW) -> C:
    return C(resource_type=rtype, resource_name=name, resource_pattern_type=ptype,
             principal=principal, host=host, operation=op, permission_type=perm)


def create(h: Harness, *creations: C) -> messages.CreateAclsResponse:
    return h.commit(h.controller.handle_create_acls(
        messages.CreateAclsRequest(creations=list(creations)), h.now_ms))


def delete(h: Harness, *filters: D) -> messages.DeleteAclsResponse:
    return h.commit(h.controller.handle_delete_acls(
        messages.DeleteAclsRequest(filters=list(filters)), h.now_ms))


def a_filter(rtype: int = R.ANY, name: str | None = None, ptype: int = P.ANY,
             principal: str | None = None, host: str | None = None, op: int = Op.ANY,
             perm: int = Perm.ANY) -> D:
    return D(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=ptype,
             principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


def test_created_acls_reach_the_image_once_and_survive_a_snapshot() -> None:
    h = Harness()
    resp = create(h, creation(), creation(), creation(op=Op.WRITE, perm=Perm.DENY))
    assert [r.error_code for r in resp.results] == [0, 0, 0]
    acls = h.image.acls
    assert sorted((a.operation, a.permission_type) for a in acls.by_id.values()) == [
        (Op.READ, Perm.ALLOW), (Op.WRITE, Perm.DENY)]
    # Creating an existing ACL again writes nothing and succeeds, as Kafka's.
    before = h.next_offset
    assert create(h, creation()).results[0].error_code == 0
    assert h.next_offset == before
    again = records_to_image(image_to_records(h.image), h.image.provenance)
    assert again.acls.by_id == acls.by_id
    assert list(again.acls.covering(R.TOPIC, "orders-eu")) != []


def test_kafkas_validation_refuses_each_bad_creation_alone() -> None:
    h = Harness()
    before = h.next_offset
    resp = create(h,
                  creation(rtype=R.ANY), creation(rtype=R.UNKNOWN), creation(rtype=42),
                  creation(ptype=P.MATCH), creation(ptype=P.ANY),
                  creation(op=Op.ANY), creation(op=Op.UNKNOWN),
                  creation(perm=Perm.ANY),
                  creation(name=""), creation(principal="alice"), creation(host=""),
                  creation(rtype=R.CLUSTER, name="my-cluster", ptype=P.LITERAL, op=Op.ALTER),
                  creation(rtype=R.CLUSTER, name="kafka-cluster", ptype=P.LITERAL, op=Op.ALTER))
    codes = [r.error_code for r in resp.results]
    assert codes == [ErrorCode.INVALID_REQUEST] * 12 + [0]
    assert all(r.error_message for r in resp.results[:12])
    assert h.next_offset == before + 1 and len(h.image.acls) == 1


def test_delete_by_filters_removes_matches_once_and_reports_them() -> None:
    h = Harness()
    create(h, creation(), creation(name="orders-eu", ptype=P.LITERAL, principal="User:bob"),
           creation(rtype=R.GROUP, name="g", ptype=P.LITERAL), creation(name="*", ptype=P.LITERAL))
    resp = delete(h,
                  a_filter(rtype=R.TOPIC, name="orders-eu", ptype=P.MATCH),   # the three topic ACLs
                  a_filter(rtype=R.TOPIC),                                  # all already taken
                  a_filter(rtype=R.UNKNOWN))                                # refused
    first, second, third = resp.filter_results
    assert sorted((m.resource_name, m.pattern_type) for m in first.matching_acls) == [
        ("*", P.LITERAL), ("orders-", P.PREFIXED), ("orders-eu", P.LITERAL)]
    assert second.error_code == 0 and second.matching_acls == []
    assert third.error_code == ErrorCode.INVALID_REQUEST
    assert [a.resource_type for a in h.image.acls.by_id.values()] == [R.GROUP]
    # ANY matches exact names of any pattern type, not covering patterns.
    resp = delete(h, a_filter(name="orders-eu"), a_filter(rtype=R.GROUP, name="g", principal="User:x"))
    assert [len(r.matching_acls) for r in resp.filter_results] == [0, 0]
    assert len(h.image.acls) == 1


def test_acls_image_index_finds_covering_patterns_only() -> None:
    h = Harness()
    create(h, creation(name="ord", ptype=P.PREFIXED), creation(name="orders-eu", ptype=P.LITERAL),
           creation(name="orders-us", ptype=P.LITERAL), creation(name="x", ptype=P.PREFIXED),
           creation(name="*", ptype=P.LITERAL, principal="User:*"))
    found = {(a.resource_name, a.pattern_type) for a in h.image.acls.covering(R.TOPIC, "orders-eu")}
    assert found == {("ord", P.PREFIXED), ("orders-eu", P.LITERAL), ("*", P.LITERAL)}
    assert StandardAcl(R.TOPIC, "x", P.PREFIXED, "User:alice", "*", Op.READ, Perm.ALLOW) in \
        set(h.image.acls.by_id.values())
