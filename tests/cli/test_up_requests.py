"""The channel between ``ketch up --add-controller`` / ``--remove-controller`` and the
``ketch up`` running in a directory (clients/cli/up_requests.py), in one process: this
test holds the directory's lock and plays the running launcher. No cluster runs."""
from __future__ import annotations

import io
import json
import os
import threading

from clients.cli.up_requests import RequestInbox, ask
from clients.data_dir_lock import lock_data_dir
from clients.waiting import wait_until


def _formatted(tmp_path) -> str:
    directory = str(tmp_path / "d")
    os.makedirs(directory)
    with open(os.path.join(directory, "cluster.json"), "w") as f:
        json.dump({"dir": directory, "cluster_id": "c", "nodes": []}, f)
    return directory


def _ask(directory: str, body: dict, timeout_s: float = 10.0) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = ask(directory, body, timeout_s, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_no_cluster_directory_and_no_running_cluster_are_refused_in_one_line(tmp_path) -> None:
    code, out, err = _ask(str(tmp_path / "nothing"), {"op": "add-controller"})
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "is not a `ketch up` cluster directory" in err
    directory = _formatted(tmp_path)
    code, out, err = _ask(directory, {"op": "add-controller"})
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert f"no cluster runs in {directory}: start it with `ketch up --dir {directory}`" in err
    assert not os.path.exists(os.path.join(directory, "requests"))     # nothing written


def test_the_running_launcher_takes_a_request_reports_progress_and_answers(tmp_path) -> None:
    directory = _formatted(tmp_path)
    lock = lock_data_dir(directory)
    try:
        inbox = RequestInbox(directory)
        answered: list[tuple[int, str, str]] = []
        asking = threading.Thread(target=lambda: answered.append(
            _ask(directory, {"op": "remove-controller", "controller_id": 1002})))
        asking.start()
        taken = wait_until(lambda: inbox.take(), 10, "the request to arrive")
        assert [r.body for r in taken] == [{"op": "remove-controller", "controller_id": 1002}]
        assert inbox.take() == []                   # claimed once
        taken[0].progress("ketch: working on it")
        taken[0].finish(0, "ketch: done")
        asking.join(10)
        assert answered == [(0, "ketch: working on it\nketch: done\n", "")]
        assert os.listdir(inbox.dir) == []          # nothing left behind

        refused: list[tuple[int, str, str]] = []
        asking = threading.Thread(target=lambda: refused.append(_ask(directory, {"op": "add-controller"})))
        asking.start()
        taken = wait_until(lambda: inbox.take(), 10, "the second request")
        taken[0].finish(1, "ketch up: --add-controller: because")
        asking.join(10)
        assert refused == [(1, "", "ketch up: --add-controller: because\n")]
    finally:
        lock.release()


def test_a_launcher_that_stops_before_answering_is_reported(tmp_path) -> None:
    directory = _formatted(tmp_path)
    lock = lock_data_dir(directory)
    inbox = RequestInbox(directory)
    answered: list[tuple[int, str, str]] = []
    asking = threading.Thread(target=lambda: answered.append(_ask(directory, {"op": "add-controller"})))
    asking.start()
    wait_until(lambda: inbox.take(), 10, "the request to arrive")
    lock.release()                                  # the launcher is gone
    asking.join(10)
    code, out, err = answered[0]
    assert code == 1 and len(err.splitlines()) == 1
    assert "stopped before it answered the add-controller" in err


def test_an_unreadable_request_is_claimed_as_an_unknown_one_and_a_withdrawn_one_skipped(tmp_path) -> None:
    directory = _formatted(tmp_path)
    inbox = RequestInbox(directory)
    with open(os.path.join(inbox.dir, "garbage.json"), "w") as f:
        f.write("{not json")
    taken = inbox.take()
    assert [r.body for r in taken] == [{}]          # the launcher answers it: unknown request
    taken[0].finish(2, "ketch up: unknown request None")
    with open(os.path.join(inbox.dir, "garbage.result")) as f:
        assert json.load(f) == {"code": 2, "message": "ketch up: unknown request None"}
    os.unlink(os.path.join(inbox.dir, "garbage.result"))
    assert os.listdir(inbox.dir) == [] and inbox.take() == []
