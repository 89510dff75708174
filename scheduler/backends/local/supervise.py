"""Run one rank of a job so that its exit code outlives the agent that started it.

    python scheduler/backends/local/supervise.py --log LOG --exit-file EXIT --cwd DIR -- COMMAND...

The node agent starts this in a new session, so a restarting Celery worker neither
signals nor waits for it. It runs COMMAND in DIR with stdout and stderr appended to LOG,
forwards SIGTERM and SIGINT to it, and when it ends writes ``{"code": ..., "at": ...}``
to EXIT: the return code (negative for a signal, as ``subprocess`` reports it; 127: it
could not be started) and the Unix time. The write is atomic (temp file, then rename), so a
reader sees the whole file or none.

Standard library only, and run by its path rather than with ``-m``: importing the
``scheduler.backends`` package would need Django.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType


def write_exit(path: Path, code: int) -> None:
    """Record that a rank ended with ``code`` (atomically)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"code": code, "at": time.time()}))
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    received: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if child is not None:
            child.send_signal(signum)

    # Installed before the child exists: a stop that arrives while it starts is passed on below.
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    with open(args.log, "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(args.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=args.cwd)
        except OSError as error:
            log.write(f"cannot start {args.command[0]!r}: {error}\n".encode())
            write_exit(args.exit_file, 127)
            return 0
    for signum in received:
        child.send_signal(signum)
    write_exit(args.exit_file, child.wait())
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run one rank of a job; write its exit code to a file.")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--exit-file", type=Path, required=True)
    parser.add_argument("--cwd", type=Path, required=True)
    parser.add_argument("command", nargs="+")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
