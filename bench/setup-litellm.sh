#!/usr/bin/env bash
# Bench-only virtualenv with LiteLLM, for bench/litellm_compare.py (never a runtime or
# test dependency of proxai_asgi). litellm 1.100.0 resolves against the registry here;
# newer releases pin a certifi version the registry lacks.
#
#     bash bench/setup-litellm.sh            # creates bench/.venv-litellm
#     bench/.venv-litellm/bin/python -m bench.litellm_compare
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/bench/.venv-litellm"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "litellm==1.100.0" uvicorn
"$VENV/bin/python" -m pip install --quiet -e "$ROOT"
# Optional profiler (pyinstrument) for profiling the proxy; skipped quietly if the registry lacks it.
"$VENV/bin/python" -m pip install --quiet pyinstrument || echo "pyinstrument not available; cProfile only"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m
print("litellm", m.version("litellm"), "| proxai-asgi", m.version("proxai-asgi"))
PY
