#!/usr/bin/env bash
# The demo page's browser tests, from a fresh machine (CI runs this from
# scripts/test.sh as root):
#   1. Debian's Chromium (apt-get install chromium chromium-driver) if
#      /usr/bin/chromium is missing — never `npx playwright install`;
#   2. scripts/prepare.sh: the packed brevis-decoder tarball, `npm ci`, the
#      fixtures and www/public/;
#   3. `vite build`, then node --test tests/page.test.mjs (playwright-core
#      drives /usr/bin/chromium headless against www/dist served on 127.0.0.1).
# Screenshots and the measured decode throughput land in www/test-artifacts/.
#
#   www/run-tests.sh [BREVIS_BIN]      (default: target/release/brevis)
set -euo pipefail
WWW=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[www-test] %s\n' "$*" >&2; }

if [[ ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    log "no /usr/bin/chromium: run as root, or apt-get install -y chromium chromium-driver"
    exit 1
  fi
  log "apt-get install chromium chromium-driver"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver > /dev/null
fi
log "$(/usr/bin/chromium --version 2>/dev/null | head -1)"

"$WWW/scripts/prepare.sh" "$@"
cd "$WWW"
log "vite build"
npx --no-install vite build --logLevel warn
log "node --test tests/page.test.mjs"
rm -rf test-artifacts
node --test tests/page.test.mjs
log "screenshots and throughput.json in www/test-artifacts/"
