"""conform, installed from its wheel: the `conform` command is on PATH; this module finds it
for tools that run it from Python (`python -m conform` runs it too). The adapter kit is the
`conform_adapter` package."""

import os
import shutil
import sys
import sysconfig

__all__ = ["find_conform_bin"]


def find_conform_bin():
    """The path of the `conform` executable installed with this package."""
    exe = "conform" + (sysconfig.get_config_var("EXE") or "")
    for scheme in (sysconfig.get_default_scheme(), "posix_user" if os.name == "posix" else "nt_user"):
        try:
            path = os.path.join(sysconfig.get_path("scripts", scheme), exe)
        except KeyError:
            continue
        if os.path.isfile(path):
            return path
    found = shutil.which(exe, path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if found:
        return found
    raise FileNotFoundError(f"{exe} is not installed beside {sys.executable}")
