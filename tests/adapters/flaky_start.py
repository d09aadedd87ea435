"""Starts slowly or not at all, and its first copy dies on its first request.

Usage: flaky_start.py STATE_DIR DELAY_SECONDS FAILING_STARTS [--first-lives]
Each start takes the next number (1, 2, …) by creating STATE_DIR/start-N; starts listed in
FAILING_STARTS (comma-separated, `2-` for "2 and every later one", `none`) exit before the hello; every
other start sleeps DELAY_SECONDS before answering it. With --first-lives the first copy does
not die.
"""
import os
import sys
import time

from common import echo, serve

state, delay, failing = sys.argv[1], float(sys.argv[2]), sys.argv[3]
first_dies = "--first-lives" not in sys.argv[4:]

n = 1
while True:
    try:
        os.close(os.open(os.path.join(state, f"start-{n}"), os.O_CREAT | os.O_EXCL))
        break
    except FileExistsError:
        n += 1


def fails(n):
    for part in filter(lambda p: p != "none", failing.split(",")):
        if part.endswith("-") and n >= int(part[:-1]) or part == str(n):
            return True
    return False


if fails(n):
    sys.stderr.write(f"flaky_start.py: start {n} fails on purpose\n")
    sys.exit(1)
time.sleep(delay)


def on_parse(msg, k):
    if n == 1 and k == 1 and first_dies:
        sys.stderr.write("flaky_start.py: the first copy dies on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    return echo(msg)


serve(on_parse)
