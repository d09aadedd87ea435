"""Prints a line that is not JSON for a transcript containing GARBAGE."""
from common import echo, send, serve, text_of
import sys


def on_parse(msg, n):
    if "GARBAGE" in text_of(msg):
        sys.stdout.write("Traceback? no: this is not JSON\n")
        sys.stdout.flush()
        return None
    return echo(msg)


serve(on_parse)
