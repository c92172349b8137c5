#!/usr/bin/env bash
# Install the real coding-agent CLIs that tests/e2e/test_real_clients.py drives
# (Claude Code, Codex and Gemini CLI) from the npm registry into .clients/
# (git-ignored).
#
# Idempotent: does nothing when the pinned versions are already installed.
# Override the pins with CLAUDE_CODE_VERSION / CODEX_VERSION / GEMINI_CLI_VERSION; the
# tests find the binaries in .clients/node_modules/.bin/. All are installed in one npm
# call: npm removes what a later call does not name.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.330}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
GEMINI_CLI_VERSION="${GEMINI_CLI_VERSION:-0.61.0}"
PREFIX=.clients
BIN="$PREFIX/node_modules/.bin"

# installed NAME VERSION: the binary runs and reports that version
installed() {
    local out
    out="$("$BIN/$1" --version 2>/dev/null)" || return 1
    [[ " $out " == *" $2 "* ]]
}

if installed claude "$CLAUDE_CODE_VERSION" && installed codex "$CODEX_VERSION" \
    && installed gemini "$GEMINI_CLI_VERSION"; then
    echo "install-clients: claude $CLAUDE_CODE_VERSION, codex $CODEX_VERSION and" \
        "gemini $GEMINI_CLI_VERSION already in $PREFIX"
    exit 0
fi

command -v npm >/dev/null || { echo "install-clients: npm not found" >&2; exit 1; }
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" \
    "@google/gemini-cli@$GEMINI_CLI_VERSION"

# Claude Code's postinstall copies its native binary over a placeholder; an npm that
# skips install scripts leaves the placeholder, so run the step ourselves.
if ! installed claude "$CLAUDE_CODE_VERSION"; then
    node "$PREFIX/node_modules/@anthropic-ai/claude-code/install.cjs"
fi

for pair in "claude $CLAUDE_CODE_VERSION" "codex $CODEX_VERSION" "gemini $GEMINI_CLI_VERSION"; do
    # shellcheck disable=SC2086
    if ! installed $pair; then
        echo "install-clients: ${pair% *} ${pair#* } did not install correctly" >&2
        exit 1
    fi
done
echo "install-clients: $("$BIN/claude" --version), $("$BIN/codex" --version)," \
    "gemini $("$BIN/gemini" --version)"
