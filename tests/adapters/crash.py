"""Exits on its 3rd parse request (every child does: each restart crashes again later)."""
import os
import sys

from common import echo, serve


def on_parse(msg, n):
    if n == 3:
        sys.stderr.write("crash.py: exiting on request 3 on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    return echo(msg)


serve(on_parse)
