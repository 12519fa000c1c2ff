#!/usr/bin/env python3
"""Starts test authorization servers (server.py) by fork, with the imports already done.

A test process starts hundreds of servers (one per fixture). Each `python server.py` spent
~0.35 s of CPU importing Flask, Authlib, joserfc and cryptography before it bound its port; the
suites run three times in CI (plain, ASan, TSan) on a machine that is CPU-bound throughout, so
that import was minutes of the run. This process imports server.py once and forks a server for
each request, which then runs `server.main(argv)` exactly as `python server.py argv` would (its
own state file, RSA key, port and log).

    zygote.py --socket PATH

Protocol (Unix stream socket at PATH, one connection per server): the client sends one JSON
line `{"argv": [...], "stderr": "/path/to/log"}`; the forked server answers `PID <n>\\n` on that
connection and keeps it open while it runs, so the client sees EOF when the server has exited
(and may signal the pid while it has not: the zygote reaps its servers only after they exit). When the client closes its end, the server stops as
on SIGTERM (saving its state). The zygote exits on SIGTERM or when its parent goes away.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server  # noqa: E402  (the heavy imports happen here, once)
import logging  # noqa: E402,F401  (server.main imports it; done here so each fork has it)


def serve_one(conn: socket.socket, request: dict) -> None:
    """In the forked child: become the server of `request` and never return."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        log = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        os.dup2(log, 2)
        os.close(devnull)
        os.close(log)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        conn.sendall(f"PID {os.getpid()}\n".encode())

        def watch_client():
            # The client closed its end (stopped us, or its process ended): stop as on SIGTERM.
            try:
                while conn.recv(64):
                    pass
            except OSError:
                pass
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch_client, daemon=True).start()
        code = server.main(request["argv"]) or 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException as error:  # noqa: BLE001  (reported in the server's log)
        print(f"zygote: the server failed: {error!r}", file=sys.stderr, flush=True)
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def reap() -> None:
    # Waited for, not ignored (SIG_IGN): a waited-for child's CPU time counts in ours, so `time`
    # around a test run still sees what the servers cost.
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] != "--socket":
        print("usage: zygote.py --socket PATH", file=sys.stderr)
        return 64
    path = sys.argv[2]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    parent = os.getppid()
    stopping = []
    # SIGTERM from the test process as it exits (it then waits for us, so our servers' CPU time
    # counts in its own); a forked server replaces this handler with its own.
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("READY", flush=True)
    while os.getppid() == parent and not stopping:
        try:
            readable, _, _ = select.select([listener], [], [], 0.5)
        except InterruptedError:
            readable = []
        reap()
        if not readable:
            continue
        conn, _ = listener.accept()
        try:
            conn.settimeout(10)
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                line += chunk
            request = json.loads(line)
            conn.settimeout(None)
        except (OSError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            serve_one(conn, request)
        conn.close()
    # Our parent is gone or going: leave nothing behind in its temporary directory.
    os.unlink(path)
    folder = os.path.dirname(path)
    log = os.path.join(folder, "zygote.log")
    if os.path.exists(log) and os.path.getsize(log) == 0:
        os.unlink(log)
    try:
        os.rmdir(folder)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
