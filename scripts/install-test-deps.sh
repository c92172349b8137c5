#!/usr/bin/env bash
# What the test suite drives besides Python packages, all idempotent:
# - the real Claude Code, Codex and Gemini CLIs from the npm registry (install-clients.sh);
# - a real redis-server (Debian's package) for the Redis store tests, installed when
#   missing and this user may (root with apt-get); otherwise those tests skip and say so;
# - a real PostgreSQL (Debian's postgresql) for the PostgreSQL usage ledger tests, the same way
#   (the tests run initdb and postgres themselves, as the postgres user under root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-clients.sh
if ! command -v redis-server >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
        echo "install-test-deps: $(redis-server --version | cut -d' ' -f1-3)"
    else
        echo "install-test-deps: redis-server missing (install Debian's redis-server);" \
            "the Redis store tests will skip"
    fi
else
    echo "install-test-deps: $(redis-server --version | cut -d' ' -f1-3) already installed"
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
        echo "install-test-deps: PostgreSQL $(ls /usr/lib/postgresql | sort -n | tail -1) installed"
    else
        echo "install-test-deps: PostgreSQL missing (install Debian's postgresql);" \
            "the PostgreSQL ledger tests will skip"
    fi
else
    echo "install-test-deps: PostgreSQL already installed"
fi
