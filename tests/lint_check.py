"""Stock cfn-lint (no filters: what a user's own CI runs) over templates, in a process of its own.

Usage: python tests/lint_check.py TEMPLATES.json   (a {stack name: template} map, written by the
`templates` fixture). Prints {stack name: [finding, ...]} as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers import lint

if __name__ == "__main__":
    templates = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps({name: lint(template, stock=True) for name, template in templates.items()}))
