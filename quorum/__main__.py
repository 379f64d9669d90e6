"""``python -m quorum --config server.properties``: run one controller.

Logs go to stderr. SIGTERM or SIGINT stops the listener, the poll loop and pysyncobj
cleanly (the journal is synced on the way out); SIGKILL is what the journal's fsyncs are
for. See quorum/config.py for the configuration keys.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import sys
import time
from typing import Any, Callable

from clients.data_dir_lock import DataDirInUseError, lock_data_dir
from clients.http_api import AdminHttpServer, ControllerAdmins, HttpAuthError, http_security
from clients.process_exit import exit_after_clean_shutdown
from clients.security.client_auth import ClientSecurity, listener_client_properties
from metadata_log.authorizer import StandardAuthorizer
from quorum.admin_http import ControllerAccess, ControllerMetrics, ControllerView
from quorum.controller import ControllerConfig, QuorumController
from quorum.config import ConfigError, ControllerProcessConfig, load
from quorum.joining import (
    ForeignDirectoryError, JoiningFetcher, controller_directory_id, discover_voters,
)
from quorum.membership import CAUGHT_UP_WINDOW_MS_DEFAULT, VoterMembership
from quorum.raft import GIL_SWITCH_INTERVAL_S, RaftQuorum, RaftSettings, RemovedVoterError
from quorum.voters import VoterSet
from quorum.network import KafkaServer, ListenerConfigError, listener_security
from quorum.server import ControllerApis, ControllerDriver

log = logging.getLogger("quorum")


def controller_factory(config: ControllerProcessConfig) -> Callable[[], QuorumController]:
    """A fresh pure QuorumController (also after loading a snapshot)."""
    controller_config = ControllerConfig(**config.controller_settings)  # type: ignore[arg-type]
    return lambda: QuorumController(controller_config, random.Random())


async def serve(config: ControllerProcessConfig, stop: asyncio.Event,
                factory: Callable[[], Any] | None) -> None:
    settings = RaftSettings(cluster_secret=config.cluster_secret,
                            election_timeout_min_s=config.election_timeout_min_ms / 1000,
                            election_timeout_max_s=config.election_timeout_max_ms / 1000,
                            pre_vote=config.pre_vote)
    directory_id = controller_directory_id(config.metadata_log_dir, config.node_id)
    # This controller's login on the controllers' listener (sasl.mechanism.controller.protocol
    # and the listener's JAAS username/password, as a broker logs in to the controllers): its
    # joining fetch and its HTTP API's calls to other nodes use it.
    client = listener_client_properties(config.properties, config.listener.name,
                                        config.listener.security_protocol,
                                        "sasl.mechanism.controller.protocol")
    try:
        controller_security = ClientSecurity.from_config(client.get)
    except ValueError as e:
        raise SystemExit(f"controller listener {config.listener.name}: {e}") from None
    raft_voters, listeners = config.raft_addresses(), dict(config.voters)
    if config.joining:
        # The voters now, which may differ from the configured ones (quorum/joining.py).
        found = await discover_voters(config.voters, security=controller_security)
        if found:
            raft_voters = {nid: f"{h}:{p}" for nid, (_, (h, p)) in found.items()
                           if nid != config.node_id}
            listeners = {nid: kafka for nid, (kafka, _) in found.items() if nid != config.node_id}
    quorum = RaftQuorum(node_id=config.node_id, raft_address=config.raft_address,
                        voters=raft_voters, data_dir=config.metadata_log_dir,
                        settings=settings, directory_id=directory_id)
    driver = ControllerDriver(quorum, factory, write_timeout_ms=config.write_timeout_ms,
                              poll_interval_ms=config.poll_interval_ms,
                              snapshot_bytes=config.snapshot_bytes)
    static = VoterSet.static(config.voters, {n: config.raft_voters[n] for n in config.voters})
    membership = VoterMembership(quorum, static, directory_id,
                                 last_caught_up_ms=lambda replica_id: apis.last_caught_up_ms(replica_id),
                                 caught_up_voters=lambda: quorum.caught_up_voters(
                                     int(time.time() * 1000), CAUGHT_UP_WINDOW_MS_DEFAULT),
                                 change_timeout_s=config.write_timeout_ms / 1000)
    quorum.on_directory_seen = membership.directory_seen
    authorizer = None if config.authorizer is None else StandardAuthorizer(config.authorizer)
    apis = ControllerApis(config.node_id, quorum, driver, config.voters,
                          cluster_id=config.cluster_id, authorizer=authorizer,
                          membership=membership, raft_port_offset=config.raft_port_offset)
    quorum.register(membership)
    joining = None
    if config.joining:
        joining = asyncio.get_running_loop().create_task(JoiningFetcher(
            config.node_id, listeners, lambda: config.node_id in membership.current().ids,
            security=controller_security).run())
    access = ControllerAccess(driver, authorizer)
    try:
        # TLS and SASL as listener.security.protocol.map says; SCRAM users from this
        # controller's image, PLAIN users from its JAAS table (how brokers log in before
        # any SCRAM credential exists).
        security = listener_security(config.listener, config.properties, access.scram_credential)
    except ListenerConfigError as e:
        raise SystemExit(str(e)) from None
    listener = KafkaServer(apis, config.listener_host, config.listener_port,
                           on_connection_closed=apis.connection_closed, listener=security)
    metrics = ControllerMetrics(quorum, driver, lambda: listener.connection_count)
    view = ControllerView(config.node_id, config.cluster_id, quorum, driver, config.properties)
    # The HTTP API's calls log in to the controllers, and to the brokers, with `client`.
    admins = ControllerAdmins(",".join(f"{h}:{p}" for h, p in config.voters.values()),
                              view.live_broker_endpoints, f"ketch-controller-{config.node_id}-admin",
                              broker_client=client, controller_client=client)
    try:
        http_sec = http_security(config.properties, config.listener.name, access.scram_credential,
                                 access.authorize)
    except HttpAuthError as e:
        raise SystemExit(f"HTTP admin API: {e}") from None
    http = (AdminHttpServer(view, admins, metrics.exposition, config.listener_host, config.http_port,
                            security=http_sec)
            if config.http_port >= 0 else None)
    try:
        port = await listener.start()
        driver.start()
        metrics.process.start()
        log.info("controller %d listening on %s:%d, raft on %s, data in %s", config.node_id,
                 config.listener_host, port, config.raft_address, config.metadata_log_dir)
        if http is not None:
            http_port = await http.start()
            log.info("controller %d HTTP admin API and /metrics on %s:%d", config.node_id,
                     config.listener_host, http_port)
        await stop.wait()
        log.info("controller %d stopping", config.node_id)
    finally:
        if http is not None:
            await http.stop()
        await admins.close()
        await metrics.process.stop()
        if joining is not None:
            joining.cancel()
        await listener.stop()
        await driver.stop()
        await quorum.close()


def main(argv: list[str] | None = None) -> int:
    if not __debug__:
        print("quorum: refusing to run under python -O: assertions guard invariants", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="python -m quorum", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="server.properties of this controller")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # pysyncobj's tick thread wins the GIL back sooner from a busy event loop (quorum/raft.py).
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        config = load(args.config)
    except ConfigError as e:
        print(f"quorum: bad configuration: {e}", file=sys.stderr)
        return 2
    try:
        # Before the journal is opened: a second controller on this directory would
        # replay and append to the live Raft journal.
        lock_data_dir(config.metadata_log_dir)
    except (DataDirInUseError, OSError) as e:
        print(f"quorum: {e}", file=sys.stderr)
        return 1

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop, controller_factory(config))

    try:
        asyncio.run(run())
    except (RemovedVoterError, ForeignDirectoryError) as e:
        print(f"quorum: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # Not sys.exit: the interpreter's teardown would add ~0.6 s to every stop (see there).
    exit_after_clean_shutdown(main())
