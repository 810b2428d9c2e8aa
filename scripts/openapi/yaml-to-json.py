#!/usr/bin/env python3
"""Writes Sources/AuthGateway/openapi.json from openapi.yaml (the gateway serves the JSON at
GET /openapi.json). `--check` exits 1 when the committed JSON is not what the YAML gives.

Usage: yaml-to-json.py [--check]   (needs PyYAML: scripts/check-openapi.sh runs it in its venv)
"""
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "Sources/AuthGateway/openapi.yaml"
TARGET = ROOT / "Sources/AuthGateway/openapi.json"


def main() -> int:
    document = yaml.safe_load(SOURCE.read_text())
    text = json.dumps(document, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
    if "--check" in sys.argv[1:]:
        if not TARGET.exists() or TARGET.read_text() != text:
            print("yaml-to-json: FAIL: Sources/AuthGateway/openapi.json is stale: run scripts/openapi/yaml-to-json.py")
            return 1
        print("yaml-to-json: OK - openapi.json matches openapi.yaml")
        return 0
    TARGET.write_text(text)
    print(f"yaml-to-json: wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
