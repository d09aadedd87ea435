#!/usr/bin/env bash
# Renders a conform HTML report page to a PNG with headless Chromium, to look at it before
# publishing (by hand, and in the nightly workflow).
#
#   scripts/screenshot-report.sh PAGE_DIR_OR_INDEX_HTML [OUT.png] [WIDTHxHEIGHT]
#
# Defaults: OUT.png beside the page (screenshot.png), 1400x2400. Needs chromium (Debian:
# apt-get install -y chromium) or google-chrome; CHROMIUM=/path/to/binary overrides.
# The page is self-contained, and the flags keep the browser off the network as well.
set -euo pipefail

page=${1:?usage: $0 PAGE_DIR_OR_INDEX_HTML [OUT.png] [WIDTHxHEIGHT]}
[ -d "$page" ] && page="$page/index.html"
[ -f "$page" ] || { echo "$0: $page: no such page" >&2; exit 2; }
out=${2:-"$(dirname "$page")/screenshot.png"}
size=${3:-1400x2400}

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
  for b in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
  done
fi
[ -n "$browser" ] || { echo "$0: no chromium found (apt-get install -y chromium)" >&2; exit 2; }

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
abs_page=$(cd "$(dirname "$page")" && pwd)/$(basename "$page")
abs_out=$(cd "$(dirname "$out")" 2>/dev/null && pwd || { mkdir -p "$(dirname "$out")" && cd "$(dirname "$out")" && pwd; })/$(basename "$out")

"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size="${size/x/,}" \
  --screenshot="$abs_out" "file://$abs_page" 2>/dev/null
[ -s "$abs_out" ] || { echo "$0: $browser wrote no screenshot" >&2; exit 1; }
echo "$abs_out"
