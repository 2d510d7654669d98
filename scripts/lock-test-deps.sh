#!/usr/bin/env bash
# Rewrite tests/constraints.txt with the newest releases that `pip install -e .[test]`
# resolves to today. Run `make test-latest` first: commit the new lock only when it passes.
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
trap 'rm -f "$report"' EXIT
python3 -m pip install -q --disable-pip-version-check --dry-run --ignore-installed \
  --report "$report" '.[test]'
{
  sed -n '1,/^$/p' tests/constraints.txt | grep '^#'
  python3 - "$report" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
pins = sorted(
    (i["metadata"]["name"], i["metadata"]["version"])
    for i in report["install"]
    if i["metadata"]["name"] != "dnsd"
)
print("".join(f"{name}=={version}\n" for name, version in sorted(pins, key=lambda p: p[0].lower())), end="")
PY
} > tests/constraints.txt.new
mv tests/constraints.txt.new tests/constraints.txt
echo "tests/constraints.txt: $(grep -vc '^#' tests/constraints.txt) packages pinned"
