"""Mirror topics (issue 21): a normal topic that follows a topic of another cluster.

Three topic configs make a topic a mirror; ``metadata_log._topic_configs`` defines them:

- ``ketch.mirror.link``: the cluster link (a CLUSTER_LINK config resource) to fetch
  through; "" means the topic is not a mirror.
- ``ketch.mirror.source.topic``: the source topic's name ("" = this topic's own name).
- ``ketch.mirror.state``: ``active`` (the partition leaders fetch from the source;
  read-only), ``stopped`` (not fetching, still read-only: e.g. the source topic was
  deleted), ``promoted`` (writable, not fetching; the history stays).

Transitions an operator makes with IncrementalAlterConfigs:

    active   -> stopped | promoted
    stopped  -> active  | promoted
    promoted -> active        (truncate-and-restore: follow the source again)
    (a topic with no link) -> active with a link set (truncate-and-restore of a former source)

The controller judges the three together (``mirror_config_problem``); brokers read them
per hosted partition (``mirror_config``) and refuse writes to a read-only mirror
(``read_only_message``). Pure functions only.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = [
    "MIRROR_LINK", "MIRROR_SOURCE_TOPIC", "MIRROR_STATE", "MIRROR_CONFIG_KEYS", "MirrorState",
    "MirrorConfig", "mirror_config", "mirror_config_problem", "read_only_message",
]

MIRROR_LINK = "ketch.mirror.link"
MIRROR_SOURCE_TOPIC = "ketch.mirror.source.topic"
MIRROR_STATE = "ketch.mirror.state"
MIRROR_CONFIG_KEYS = (MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE)


class MirrorState(enum.Enum):
    ACTIVE = "active"
    STOPPED = "stopped"
    PROMOTED = "promoted"


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    link: str
    source_topic: str
    state: MirrorState

    @property
    def read_only(self) -> bool:
        return self.state is not MirrorState.PROMOTED

    @property
    def fetching(self) -> bool:
        return self.state is MirrorState.ACTIVE


def mirror_config(topic: str, configs: Mapping[str, str]) -> MirrorConfig | None:
    """The topic's mirror settings from its effective configs; None: not a mirror."""
    link = configs.get(MIRROR_LINK, "")
    if not link:
        return None
    try:
        state = MirrorState(configs.get(MIRROR_STATE) or MirrorState.ACTIVE.value)
    except ValueError:      # the controller validates; a newer value reads as stopped
        state = MirrorState.STOPPED
    return MirrorConfig(link, configs.get(MIRROR_SOURCE_TOPIC) or topic, state)


def mirror_config_problem(configs: Mapping[str, str], link_exists: Callable[[str], bool],
                          current: Mapping[str, str] | None = None) -> str | None:
    """Why ``configs`` (the topic's whole set after the change; ``current``: before it,
    None on create) are not a valid mirror setting, or None. The link must exist when a
    change makes or keeps the topic a mirror that fetches or may fetch again (active or
    stopped); a promoted topic keeps its link name after the link is gone."""
    link = configs.get(MIRROR_LINK, "")
    if not link:
        others = [k for k in (MIRROR_SOURCE_TOPIC, MIRROR_STATE) if configs.get(k)]
        if others:
            return (f"{', '.join(others)} may only be set together with {MIRROR_LINK} "
                    "(the cluster link the topic mirrors through)")
        return None
    changed = current is None or any(configs.get(k) != current.get(k) for k in MIRROR_CONFIG_KEYS)
    state = configs.get(MIRROR_STATE) or MirrorState.ACTIVE.value
    if changed and state != MirrorState.PROMOTED.value and not link_exists(link):
        return f"{MIRROR_LINK}: cluster link {link!r} does not exist"
    return None


def read_only_message(topic: str, mirror: MirrorConfig) -> str:
    """What a refused Produce or DeleteRecords tells the client."""
    return (f"Topic {topic} is a read-only mirror of {mirror.link}:{mirror.source_topic} "
            f"(ketch.mirror.state={mirror.state.value}); promote it to write to it: "
            f"ketch mirror promote {topic} (IncrementalAlterConfigs "
            f"{MIRROR_STATE}=promoted)")
