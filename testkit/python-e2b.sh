#!/usr/bin/env bash
# Prints the path of a Python with E2B's Python SDK (pinned), made once in a virtualenv under the
# cache directory (outside the work tree): the gateway's tests drive it as agents' Python code would.
set -euo pipefail
. "$(dirname "$0")/../local-cluster/env.sh"
E2B_PY_VERSION=2.63.0
venv=$CUBEPOD_CACHE/python-e2b-$E2B_PY_VERSION
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import e2b" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "e2b==$E2B_PY_VERSION" >&2
fi
# The runner of E2B's own Python tests (test/e2b/run.ts), at the versions they were run with.
if ! "$venv/bin/python" -c "import pytest, pytest_asyncio, pytest_timeout" 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    pytest==9.2.0 pytest-asyncio==1.5.0 pytest-timeout==2.4.0 >&2
fi
echo "$venv/bin/python"
