"""An S3-compatible server on this machine for the tiered-storage tests: moto's server mode
as a real process on a free 127.0.0.1 port, with one bucket, stopped by its pid.

    with s3_server(tmp_path) as props:      # the broker properties of an s3 archive
        start brokers with {**props, ...}
        with s3_unresponsive(props):        # the store hangs: requests time out
            ...
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError

from clients.cli.launcher import free_ports
from clients.waiting import wait_until

BUCKET = "ketch-archive"
REGION = "us-east-1"
# moto takes any credentials; these stand for real ones (and must never show up in a log).
ACCESS_KEY = "ketch-test-access"
SECRET_KEY = "ketch-test-secret-d41d8cd98f00b204"
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 10
ENDPOINT_KEY = "ketch.remote.storage.s3.endpoint"
# The running servers by endpoint, for s3_unresponsive.
_servers: dict[str, subprocess.Popen] = {}


def s3_properties(endpoint: str, bucket: str = BUCKET) -> dict[str, str]:
    """The broker properties of an archive in ``bucket`` at ``endpoint``."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "s3",
        ENDPOINT_KEY: endpoint,
        "ketch.remote.storage.s3.bucket": bucket,
        "ketch.remote.storage.s3.region": REGION,
        "ketch.remote.storage.s3.access.key": ACCESS_KEY,
        "ketch.remote.storage.s3.secret.key": SECRET_KEY,
    }


def admin_client(endpoint: str):
    """A plain boto3 client on the server, for setting up and looking behind the store."""
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=BotoConfig(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 1},
                          s3={"addressing_style": "path"}))


def object_keys(props: dict[str, str], prefix: str = "") -> list[str]:
    """The names of the objects under ``prefix`` in the bucket of ``props``, sorted: what
    the store holds, looked up behind the broker's back."""
    client = admin_client(props[ENDPOINT_KEY])
    try:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=props.get("ketch.remote.storage.s3.bucket", BUCKET), Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(keys)
    finally:
        client.close()


@contextmanager
def s3_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """moto's S3 server with the bucket created; yields the broker properties. Its output
    goes to ``tmp_path/moto-<attempt>.log``."""
    # A port chosen free can be taken before moto binds it: then moto exits, and another
    # port is tried.
    for attempt in range(3):
        (port,) = free_ports(1)
        endpoint = f"http://127.0.0.1:{port}"
        with open(tmp_path / f"moto-{attempt}.log", "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        try:
            if _create_bucket(endpoint, proc):
                _servers[endpoint] = proc
                yield s3_properties(endpoint)
                return
        finally:
            _servers.pop(endpoint, None)
            _stop(proc)
    raise RuntimeError(f"moto's server did not start; see {tmp_path}/moto-*.log")


@contextmanager
def s3_unresponsive(props: dict[str, str]) -> Iterator[None]:
    """The store at ``props``'s endpoint stops answering (its process SIGSTOPped: connections
    are accepted by the kernel, no request is answered, clients time out) and comes back
    with every object (SIGCONT): unlike a restart, moto keeps its in-memory objects."""
    proc = _servers[props[ENDPOINT_KEY]]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.pid, signal.SIGCONT)


def _create_bucket(endpoint: str, proc: subprocess.Popen) -> bool:
    """True once the bucket exists; False if the server exited first."""
    client = admin_client(endpoint)

    def created_or_exited() -> bool:
        if proc.poll() is None:
            client.create_bucket(Bucket=BUCKET)
        return True

    try:
        wait_until(created_or_exited, timeout_s=START_TIMEOUT_S,
                   what=f"moto at {endpoint} to create the bucket",
                   retry_on=(BotoCoreError, ConnectionError))
    finally:
        client.close()
    return proc.poll() is None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGCONT)       # a stopped process would not act on SIGTERM
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
