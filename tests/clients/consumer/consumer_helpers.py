"""Helpers for the Ketch consumer's process tests."""
from __future__ import annotations

import os
import subprocess
import sys

from groups_helpers import REPO, ConsumerProcess

HERE = os.path.dirname(os.path.abspath(__file__))


class KetchMember(ConsumerProcess):
    """``ketch_member.py`` in a subprocess; the events and close/kill/reap of
    ConsumerProcess (same report format)."""

    def __init__(self, workdir: str, bootstrap: str, group: str, topic: str, client_id: str,
                 assignor: str = "range", instance_id: str | None = None,
                 session_timeout_ms: int = 6000) -> None:
        self.client = "ketch"
        self.client_id = client_id
        self.out = os.path.join(workdir, f"{client_id}.jsonl")
        self.err = os.path.join(workdir, f"{client_id}.stderr")
        argv = [sys.executable, os.path.join(HERE, "ketch_member.py"), "--bootstrap", bootstrap,
                "--group", group, "--topic", topic, "--client-id", client_id, "--out", self.out,
                "--assignor", assignor, "--session-timeout-ms", str(session_timeout_ms)]
        if instance_id is not None:
            argv += ["--instance-id", instance_id]
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.err, "ab") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                                         env=env, start_new_session=True)
