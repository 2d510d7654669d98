#!/bin/sh
# Install dnsd (this checkout) into a virtual environment, VENV (default .venv/).
# Debian 12 and other PEP 668 systems refuse `pip install` into the system Python
# ("externally-managed-environment"); a venv is the supported way, and needs no root.
# Extra arguments go to pip (e.g. '.[plots]' is not one: use EXTRAS=plots).
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
target=.
[ -z "${EXTRAS:-}" ] || target=".[$EXTRAS]"

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    # Debian without python3-venv has no ensurepip: a venv without pip, filled by the
    # system's pip below (pip --python), or a clear message when there is none.
    rm -rf "$VENV"
    "$PYTHON" -m venv --without-pip "$VENV"
  fi
fi
if [ -x "$VENV/bin/pip" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" "$target"
elif "$PYTHON" -m pip --version >/dev/null 2>&1; then
  "$PYTHON" -m pip --python "$VENV/bin/python" install -q --disable-pip-version-check "$@" "$target"
else
  echo "no pip for $VENV: install Debian's python3-venv (apt-get install python3-venv) and run this again" >&2
  rm -rf "$VENV"
  exit 1
fi
echo "dnsd installed in $VENV: $VENV/bin/dnsd"
