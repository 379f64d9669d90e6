from clients.properties import format_properties, parse_listeners, parse_properties
import pytest


def test_parses_kafka_server_properties() -> None:
    text = """# comment
node.id=3
process.roles = broker
controller.quorum.voters=1@127.0.0.1:9093,\\
   2@127.0.0.1:9094
! another comment
log.dirs: /tmp/a
empty.value=
"""
    props = parse_properties(text)
    assert props == {"node.id": "3", "process.roles": "broker",
                     "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094",
                     "log.dirs": "/tmp/a", "empty.value": ""}
    assert parse_properties(format_properties(props)) == props


def test_listeners() -> None:
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092,controller://:9093") == {
        "PLAINTEXT": ("127.0.0.1", 9092), "CONTROLLER": ("0.0.0.0", 9093)}
    with pytest.raises(ValueError):
        parse_listeners("127.0.0.1:9092")
