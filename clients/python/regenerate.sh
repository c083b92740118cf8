#!/usr/bin/env bash
# Rewrite the generated modules of kbgate_client from the gateway's OpenAPI document
# (run from the repository's root: `bash clients/python/regenerate.sh`).
set -euo pipefail
here=clients/python
package=$here/src/kbgate_client
spec=$(mktemp)
trap 'rm -f "$spec"' EXIT
uv run python -c 'import json, sys
from gateway.http.app import create_app
from settings.config import load_config
app = create_app(load_config({}, platform_key="k" * 30))
json.dump(app.openapi_schema.to_schema(), sys.stdout)' > "$spec"
tidy() { uv run ruff check --fix --quiet --select I --stdin-filename "$1" - | uv run ruff format --quiet --stdin-filename "$1" -; }
python3 $here/codegen.py "$spec" models | tidy $package/models.py > $package/models.py.new
python3 $here/codegen.py "$spec" operations | tidy $package/operations.py > $package/operations.py.new
python3 $here/codegen.py $package/_async_client.py sync | tidy $package/_sync_client.py > $package/_sync_client.py.new
for name in models operations _sync_client; do mv "$package/$name.py.new" "$package/$name.py"; done
