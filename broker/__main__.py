"""``python -m broker --config server.properties``: run one broker (``ketch broker`` too).

SIGTERM or SIGINT starts a controlled shutdown (leadership moves away first); a second
signal stops at once, still cleanly (flushed logs, checkpoints, clean-shutdown marker).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker.broker import Broker
from broker.config import ConfigError, from_properties
from clients.data_dir_lock import DataDirInUseError, lock_data_dir
from clients.properties import load_properties
from clients.process_exit import exit_after_clean_shutdown


def main(argv: list[str] | None = None) -> int:
    if not __debug__:
        print("ketch refuses to run under python -O: its assertions guard data", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(prog="ketch broker", description="Run one Ketch broker.")
    ap.add_argument("--config", required=True, help="server.properties with Kafka's keys")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s broker %(levelname)s %(name)s: %(message)s")
    try:
        props = load_properties(args.config)
        config = from_properties(props)
    except (OSError, ConfigError) as e:
        print(f"ketch broker: {e}", file=sys.stderr)
        return 2
    try:
        for log_dir in config.log_dirs:     # before any log is opened (Kafka's log.dirs/.lock)
            lock_data_dir(log_dir)
    except (DataDirInUseError, OSError) as e:
        print(f"ketch broker: {e}", file=sys.stderr)
        return 1
    if config.event_loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            print("ketch broker: ketch.event.loop=uvloop (the default) but uvloop is not "
                  "installed: reinstall ketch (it depends on uvloop), or set "
                  "ketch.event.loop=asyncio", file=sys.stderr)
            return 2
        return uvloop.run(_run(config, props))
    return asyncio.run(_run(config, props))


async def _run(config, props) -> int:
    broker = Broker(config, props)
    await broker.start()
    print(f"broker {config.node_id} ready on {config.advertised_host}:{broker.port}", flush=True)
    stop = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        stop.set()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    signalled = loop.create_task(stop.wait())
    failed = loop.create_task(broker.log_dir_failed.wait())
    await asyncio.wait({signalled, failed}, return_when=asyncio.FIRST_COMPLETED)
    for task in (signalled, failed):
        task.cancel()
    # A failed log dir stops the broker (the interim before KIP-858; broker.broker, step 7):
    # a controlled shutdown, then exit 1 so that a supervisor sees the failure.
    exit_code = 1 if broker.log_dir_failed.is_set() else 0
    shutdown = loop.create_task(broker.controlled_shutdown())
    while not shutdown.done():
        stop.clear()
        waiter = loop.create_task(stop.wait())
        await asyncio.wait({shutdown, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not shutdown.done():  # a second signal: skip the controlled part
            shutdown.cancel()
            await asyncio.gather(shutdown, return_exceptions=True)
            await broker.stop()
            break
        waiter.cancel()
    return exit_code


if __name__ == "__main__":
    # Not sys.exit: the interpreter's teardown would add ~0.6 s to every stop (see there).
    exit_after_clean_shutdown(main())
