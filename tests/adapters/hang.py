"""Never answers a transcript containing HANG."""
import time

from common import echo, serve, text_of


def on_parse(msg, n):
    if "HANG" in text_of(msg):
        while True:
            time.sleep(3600)
    return echo(msg)


serve(on_parse)
