"""A correct, trivial adapter: every transcript is plain text. Used to measure overhead."""
from common import serve

serve()
