"""Dies before saying hello."""
import sys

sys.stderr.write("no_hello.py: missing dependency\n")
sys.exit(1)
