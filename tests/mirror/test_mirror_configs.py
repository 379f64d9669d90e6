"""The ketch.mirror.* topic configs at the controller: judged together on CreateTopics and
IncrementalAlterConfigs (metadata_log.mirror_topics)."""
from __future__ import annotations

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log.mirror_topics import MirrorState, mirror_config
from tests.quorum.controller.harness import Harness

TOPIC = 2


def alter(h: Harness, name: str, **values: str) -> tuple[int, str | None]:
    IAC = M.IncrementalAlterConfigsRequest
    request = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=TOPIC, resource_name=name,
        configs=[IAC.AlterableConfig(name="ketch.mirror." + k.replace("_", "."), config_operation=0,
                                     value=v) for k, v in values.items()])])
    r = h.commit(h.controller.handle_incremental_alter_configs(request, h.now_ms)).responses[0]
    return r.error_code, r.error_message


def create_link(h: Harness, name: str) -> None:
    IAC = M.IncrementalAlterConfigsRequest
    request = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=64, resource_name=name,
        configs=[IAC.AlterableConfig(name="bootstrap.servers", config_operation=0,
                                     value="127.0.0.1:9")])])
    assert h.commit(h.controller.handle_incremental_alter_configs(
        request, h.now_ms)).responses[0].error_code == ErrorCode.NONE


def test_a_mirror_of_an_unknown_link_is_refused() -> None:
    h = Harness()
    h.start_broker(1)
    bad = h.create_topic("m", configs={"ketch.mirror.link": "nope"})
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "'nope' does not exist" in bad.error_message
    assert h.create_topic("t").error_code == ErrorCode.NONE
    code, message = alter(h, "t", link="nope")
    assert code == ErrorCode.INVALID_CONFIG and "does not exist" in message


def test_a_state_or_source_without_a_link_is_refused_on_create_and_alter() -> None:
    h = Harness()
    h.start_broker(1)
    bad = h.create_topic("a", configs={"ketch.mirror.state": "active"})
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "ketch.mirror.link" in bad.error_message
    assert h.create_topic("t").error_code == ErrorCode.NONE
    code, message = alter(h, "t", source_topic="x")
    assert code == ErrorCode.INVALID_CONFIG and "ketch.mirror.link" in message
    assert alter(h, "t", state="bogus")[0] == ErrorCode.INVALID_CONFIG


def test_a_mirror_created_then_promoted_then_restored() -> None:
    h = Harness()
    h.start_broker(1)
    create_link(h, "L")
    created = h.create_topic("m", configs={"ketch.mirror.link": "L",
                                           "ketch.mirror.source.topic": "src"})
    assert created.error_code == ErrorCode.NONE
    assert mirror_config("m", h.image.configs.topic("m")).state is MirrorState.ACTIVE
    assert alter(h, "m", state="promoted") == (ErrorCode.NONE, None)
    mirror = mirror_config("m", h.image.configs.topic("m"))
    assert mirror is not None and mirror.state is MirrorState.PROMOTED and not mirror.read_only
    assert alter(h, "m", state="active") == (ErrorCode.NONE, None)
    assert mirror_config("m", h.image.configs.topic("m")).source_topic == "src"
    # A link used by an active mirror cannot be deleted (linkops's rule) ...
    IAC = M.IncrementalAlterConfigsRequest
    delete = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=64, resource_name="L",
        configs=[IAC.AlterableConfig(name="bootstrap.servers", config_operation=1, value=None)])])
    assert h.commit(h.controller.handle_incremental_alter_configs(
        delete, h.now_ms)).responses[0].error_code == ErrorCode.INVALID_REQUEST
    # ... but once promoted it can, and the promoted topic's other configs stay alterable.
    assert alter(h, "m", state="promoted")[0] == ErrorCode.NONE
    assert h.commit(h.controller.handle_incremental_alter_configs(
        delete, h.now_ms)).responses[0].error_code == ErrorCode.NONE
    IAC2 = IAC.AlterConfigsResource
    retention = IAC(validate_only=False, resources=[IAC2(
        resource_type=TOPIC, resource_name="m",
        configs=[IAC.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])])
    assert h.commit(h.controller.handle_incremental_alter_configs(
        retention, h.now_ms)).responses[0].error_code == ErrorCode.NONE
    assert alter(h, "m", state="active")[0] == ErrorCode.INVALID_CONFIG     # link gone
