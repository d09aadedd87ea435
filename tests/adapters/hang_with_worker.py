"""On a transcript "... HANG_WORKER <file>": starts a worker process, appends its pid to <file>,
then never answers. conform must kill the worker along with the adapter."""
import subprocess
import time

from common import echo, serve, text_of


def on_parse(msg, n):
    text = text_of(msg)
    if "HANG_WORKER" in text:
        path = text.split("HANG_WORKER", 1)[1].strip()
        worker = subprocess.Popen(["sleep", "600"])
        with open(path, "a") as f:
            f.write(f"{worker.pid}\n")
        while True:
            time.sleep(3600)
    return echo(msg)


serve(on_parse)
