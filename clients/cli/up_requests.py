"""Requests to a running ``ketch up`` from another ``ketch up`` on its directory
(``--add-controller``, ``--remove-controller ID``).

Only the running launcher starts and stops the cluster's nodes and writes its cluster.json
(it holds ``DIR/.lock``; ``clients/cli/launcher.py``), and its stop must stop a controller
added later too; so a second ``ketch up`` asks it, through files in ``DIR/requests/``:

    <id>.json     the request, written by the asking process (tmp file + rename)
    <id>.taken    the same file once the launcher has claimed it (a rename: claimed once)
    <id>.log      progress lines the launcher appends while it works
    <id>.result   {"code": 0 or not, "message": "..."}, written last (tmp file + rename)

The launcher looks for requests in its watch loop (twice a second) and carries them out
one at a time, as the quorum takes one voter change at a time. The asking process prints
the progress lines as they come and exits with the result's code; it gives up, saying so,
when the launcher no longer holds the directory's lock (it stopped) or after its timeout.
A launcher starting on the directory clears what earlier runs left in ``requests/``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, TextIO

from clients.data_dir_lock import holder

__all__ = ["Request", "RequestInbox", "ask"]

REQUESTS_DIR = "requests"
POLL_S = 0.1
# How long the launcher may take to claim a request (it may be starting its nodes).
CLAIM_WAIT_S = 120.0


def _write_atomically(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"         # a name take() ignores
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


@dataclass
class Request:
    """A claimed request, as the launcher carries it out."""
    path: str           # DIR/requests/<id>, without a suffix
    body: dict[str, Any]

    # Best effort: the launcher prints every line itself, and a failure to tell the asker
    # (a full disk, requests/ deleted by hand) must not stop the cluster; the asker then
    # reports that no answer came.
    def progress(self, line: str) -> None:
        try:
            with open(f"{self.path}.log", "a") as f:
                f.write(line + "\n")
        except OSError:
            pass

    def finish(self, code: int, message: str) -> None:
        try:
            _write_atomically(f"{self.path}.result", {"code": code, "message": message})
            os.unlink(f"{self.path}.taken")
        except OSError:
            pass


class RequestInbox:
    """The launcher's side: ``take()`` claims the requests waiting, oldest first."""

    def __init__(self, directory: str) -> None:
        self.dir = os.path.join(directory, REQUESTS_DIR)
        os.makedirs(self.dir, exist_ok=True)
        for name in os.listdir(self.dir):       # earlier runs' leftovers: nobody waits on them
            os.unlink(os.path.join(self.dir, name))

    def take(self) -> list[Request]:
        """Never raises: a request withdrawn meanwhile, or unreadable, is skipped."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            names = [n for n in os.listdir(self.dir) if n.endswith(".json")]
        except OSError:
            return []
        waiting = []
        for name in names:
            base = os.path.join(self.dir, name[: -len(".json")])
            try:
                waiting.append((os.stat(f"{base}.json").st_mtime_ns, base))
            except OSError:
                continue
        taken = []
        for _, base in sorted(waiting):
            try:
                os.replace(f"{base}.json", f"{base}.taken")
                with open(f"{base}.taken") as f:
                    body = json.load(f)
            except OSError:
                continue
            except ValueError:
                body = {}           # answered as an unknown request
            taken.append(Request(base, body if isinstance(body, dict) else {}))
        return taken


def ask(directory: str, body: dict[str, Any], timeout_s: float, out: TextIO = sys.stdout,
        err: TextIO = sys.stderr) -> int:
    """Hand ``body`` to the ``ketch up`` running in ``directory``, print its progress and
    its answer; the exit code. Every refusal is one line on ``err``."""
    what = body.get("op", "request")
    directory = os.path.abspath(directory)
    if not os.path.exists(os.path.join(directory, "cluster.json")):
        print(f"ketch up: {directory} is not a `ketch up` cluster directory (no cluster.json)", file=err)
        return 1
    pid = holder(directory)
    if pid is None:
        print(f"ketch up: no cluster runs in {directory}: start it with `ketch up --dir {directory}`, "
              f"then {what}", file=err)
        return 1
    inbox = os.path.join(directory, REQUESTS_DIR)
    os.makedirs(inbox, exist_ok=True)
    base = os.path.join(inbox, uuid.uuid4().hex)
    _write_atomically(f"{base}.json", body)
    claim_by = time.monotonic() + CLAIM_WAIT_S
    answer_by = time.monotonic() + CLAIM_WAIT_S + timeout_s + 30
    printed = 0
    while True:
        try:
            with open(f"{base}.log") as f:
                lines = f.read().splitlines(keepends=True)
            complete = [x for x in lines if x.endswith("\n")]
            for line in complete[printed:]:
                out.write(line)
            out.flush()
            printed = len(complete)
        except FileNotFoundError:
            pass
        if os.path.exists(f"{base}.result"):
            with open(f"{base}.result") as f:
                result = json.load(f)
            for suffix in (".log", ".result"):
                try:
                    os.unlink(base + suffix)
                except FileNotFoundError:
                    pass
            code = int(result.get("code", 1))
            print(result.get("message", ""), file=out if code == 0 else err)
            return code
        unclaimed = os.path.exists(f"{base}.json")
        if holder(directory) != pid:
            _withdraw(base)
            print(f"ketch up: the `ketch up` running in {directory} (pid {pid}) stopped before "
                  f"it answered the {what}", file=err)
            return 1
        now = time.monotonic()
        if (unclaimed and now > claim_by) or now > answer_by:
            _withdraw(base)
            print(f"ketch up: the `ketch up` running in {directory} (pid {pid}) did not answer the "
                  f"{what} in time", file=err)
            return 1
        time.sleep(POLL_S)


def _withdraw(base: str) -> None:
    """The request, if nobody claimed it yet, is withdrawn."""
    try:
        os.unlink(f"{base}.json")
    except FileNotFoundError:
        pass
