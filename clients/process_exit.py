"""How a Ketch process (``python -m broker``, ``python -m quorum``, ``python -m clients.cli``)
ends once its main function has returned: logs and standard streams flushed, then
``os._exit``.

The interpreter's own teardown after that point (clearing every module and a last garbage
collection over the metadata image, the generated protocol schemas and the logs' indexes)
does no work these processes need: a node's shutdown has synced and closed its files and
closed its sockets, a command has closed its clients, none registers atexit hooks, and
their only threads left are daemons. That teardown cost a controller ~0.6 s of wall time on
a loaded machine, and local clusters stop controllers one after another. An exception out
of ``main`` (SystemExit included) never gets here: Python reports it and exits as usual."""
from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn

__all__ = ["exit_after_clean_shutdown"]


def exit_after_clean_shutdown(code: int) -> NoReturn:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # closed or broken: nothing more to write there
            pass
    os._exit(code)
