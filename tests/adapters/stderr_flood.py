"""Writes 256 KiB to stderr on every request, then answers correctly."""
import sys

from common import echo, serve

LINE = "log: " + "x" * 1019 + "\n"


def on_parse(msg, n):
    sys.stderr.write(LINE * 256)
    sys.stderr.flush()
    return echo(msg)


serve(on_parse)
