"""The HTTP API's contract (clients/http_api/spec.py): the OpenAPI document is valid and
describes exactly the routes the server registers; input checking names the field."""
from __future__ import annotations

import pytest
import schemathesis

from clients.http_api import spec
from clients.http_api.server import AdminHttpServer


class _NoNode:
    node_id, role = 0, "broker"


def _served_routes() -> set[tuple[str, str]]:
    server = AdminHttpServer(_NoNode(), None, lambda names: (iter(()), "text/plain"), "127.0.0.1", 0)
    out = set()
    for route in server.app.router.routes():
        if route.method == "HEAD":
            continue       # aiohttp adds HEAD beside every GET
        out.add((route.method, route.resource.canonical))
    return out


def test_the_document_is_valid_openapi() -> None:
    doc = spec.openapi_document()
    schema = schemathesis.openapi.from_dict(doc)      # raises on an invalid document
    assert doc["openapi"].startswith("3.")
    operations = [op for op in schema.get_all_operations()]
    assert len(operations) == len(spec.ROUTES)


def test_the_document_names_every_served_route_and_no_other() -> None:
    doc = spec.openapi_document()
    documented = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert documented == _served_routes()


def test_every_route_has_a_handler_and_every_body_a_schema() -> None:
    for route in spec.ROUTES:
        assert callable(getattr(AdminHttpServer, route.handler)), route.handler
        if route.body is not None:
            assert route.body in spec.SCHEMAS


@pytest.mark.parametrize("body, field", [
    ({"partitions": 3}, "name"),
    ({"name": "t", "bogus": 1}, "bogus"),
    ({"name": "t", "partitions": "3"}, "partitions"),
    ({"name": "t", "partitions": 0}, "partitions"),
    ({"name": "a/b"}, "name"),
    ({"name": ".."}, "name"),
    ({"name": "t", "configs": {"retention.ms": 5}}, "configs.retention.ms"),
    ({"name": "t", "replication_factor": True}, "replication_factor"),
])
def test_a_bad_new_topic_names_the_field(body: dict, field: str) -> None:
    with pytest.raises(spec.InvalidInput) as e:
        spec.check({"$ref": "#/components/schemas/NewTopic"}, body)
    assert e.value.field == field


def test_a_good_body_passes() -> None:
    spec.check({"$ref": "#/components/schemas/NewTopic"},
               {"name": "orders", "partitions": 6, "replication_factor": 3,
                "configs": {"retention.ms": "3600000"}})
    spec.check({"$ref": "#/components/schemas/Reassignment"},
               {"partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2]},
                               {"topic": "orders", "partition": 1, "replicas": None}]})


def test_query_parameters_are_converted_and_checked() -> None:
    route = next(r for r in spec.ROUTES if r.handler == "list_topics")
    assert spec.check_query(route, {"limit": "5", "internal": "true"}) == {"limit": 5, "internal": True}
    for query, field in (({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"),
                         ({"internal": "yes"}, "internal"), ({"color": "red"}, "color")):
        with pytest.raises(spec.InvalidInput) as e:
            spec.check_query(route, query)
        assert e.value.field == field


def test_pages_follow_the_cursor() -> None:
    items = [{"name": n} for n in "abcde"]
    first = spec.page(items, lambda i: i["name"], {"limit": 2})
    assert [i["name"] for i in first["items"]] == ["a", "b"] and first["next"] == "b"
    second = spec.page(items, lambda i: i["name"], {"limit": 2, "after": first["next"]})
    assert [i["name"] for i in second["items"]] == ["c", "d"] and second["next"] == "d"
    last = spec.page(items, lambda i: i["name"], {"limit": 2, "after": "d"})
    assert [i["name"] for i in last["items"]] == ["e"] and last["next"] is None
