"""metadata_log.cluster_view: the brokers and partition health every node reports (pure)."""
from __future__ import annotations

from builders import image_of, partition, register, topic

from clients.protocol import messages as M
from metadata_log.cluster_view import broker_states, partition_health, unhealthy_partitions
from metadata_log.config_layers import ConfigLayers


def _image(extra=()):
    return image_of([
        register(1), register(2), register(3, fenced=True, rack="r3"),
        topic("healthy", 1), partition(1, 0, [1, 2, 3]),
        topic("shrunk", 2), partition(2, 0, [1, 2, 3], isr=[1, 2]), partition(2, 1, [1, 2], isr=[1]),
        topic("offline", 3), partition(3, 0, [3], isr=[3], leader=-1),
        *extra])


def test_brokers_include_the_fenced_with_their_listeners() -> None:
    states = broker_states(_image())
    assert [b["id"] for b in states] == [1, 2, 3]
    assert states[2]["fenced"] is True and states[2]["rack"] == "r3"
    assert states[0]["listeners"] == [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9001}]


def test_health_counts_each_kind_of_problem() -> None:
    image = _image()
    h = partition_health(image, ConfigLayers(image.configs, None, {"min.insync.replicas": "2"}))
    # under min ISR (2): shrunk-1 (ISR 1) and offline-0 (ISR 1)
    assert (h.partitions, h.under_replicated, h.under_min_isr, h.offline) == (4, 2, 2, 1)
    assert not h.healthy


def test_min_isr_comes_from_the_topic_config_first() -> None:
    image = _image([M.ConfigRecord(resource_type=2, resource_name="shrunk",
                                   name="min.insync.replicas", value="3")])
    h = partition_health(image, ConfigLayers(image.configs, None, {}))
    # shrunk-0 (ISR 2 of min 3) and shrunk-1 (1 of 3); the others fall back to Kafka's 1.
    assert h.under_min_isr == 2


def test_problems_name_what_is_wrong_and_are_bounded() -> None:
    image = _image()
    layers = ConfigLayers(image.configs, None, {})
    problems = unhealthy_partitions(image, layers, 10)
    assert [(p["topic"], p["partition"]) for p in problems] == [("offline", 0), ("shrunk", 0), ("shrunk", 1)]
    assert problems[0]["offline"] and not problems[0]["under_replicated"]
    assert len(unhealthy_partitions(image, layers, 1)) == 1


def test_an_image_without_topics_is_healthy() -> None:
    image = image_of([register(1)])
    assert partition_health(image, ConfigLayers(image.configs, None, {})).healthy
