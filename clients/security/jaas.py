"""The JAAS login options Kafka users write in ``sasl.jaas.config``:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-pw";

Ketch runs no login modules; it reads the options: ``user_<name>`` entries are the PLAIN
server's user table (Kafka's PlainServerCallbackHandler), ``username``/``password`` what a
client (or a broker, inter-broker) logs in with.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JaasConfig", "JaasError", "parse_jaas_config"]

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class JaasError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    options: dict[str, str]

    @property
    def users(self) -> dict[str, str]:
        """The PLAIN server's users: ``user_<name>="<password>"``."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")


def parse_jaas_config(text: str) -> JaasConfig:
    """One login module entry, as ``sasl.jaas.config`` holds it."""
    text = text.strip()
    match = re.match(r"([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if match is None:
        raise JaasError("sasl.jaas.config must start with a login module class and a flag "
                        "(e.g. org.apache.kafka.common.security.plain.PlainLoginModule required)")
    rest = text[match.end():]
    options: dict[str, str] = {}
    pos = 0
    while True:
        m = _OPTION.match(rest, pos)
        if m is None:
            break
        value = m.group(2) if m.group(2) is not None else m.group(3)
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    tail = rest[pos:].strip()
    if tail not in (";", ""):
        # Never echo the text: it holds passwords.
        raise JaasError("sasl.jaas.config: cannot parse the options after "
                        f"{len(options)} option(s) (expected name=\"value\" pairs ending with ';')")
    return JaasConfig(match.group(1), options)
