"""`python -m conform ARGS` runs the installed conform command."""

import os
import sys

from conform import find_conform_bin

if __name__ == "__main__":
    path = find_conform_bin()
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([path, *sys.argv[1:]]))
    os.execvp(path, [path, *sys.argv[1:]])
