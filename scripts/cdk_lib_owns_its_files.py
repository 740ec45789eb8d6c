"""Exit 0 when every file aws-cdk-lib installed is aws-cdk-lib's own copy; else name the ones another
package overwrote and exit 1. With `--mend UV`, first reinstall aws-cdk-lib alone with that uv (its files
then land last), then check again: scripts/setup and scripts/test-floor run it so after each install.

Why: aws-cdk-lib ships `aws_cdk/cloud_assembly_schema/__init__.py` (its types are
`aws-cdk-lib.cloud_assembly_schema.*`), and so does the standalone `aws-cdk.cloud-assembly-schema`, which
aws-cdk-lib depends on (its types are `@aws-cdk/cloud-assembly-schema.*`; aws-cdk publishes the package twice,
aws/aws-cdk#32998). uv installs packages in parallel, so either copy may land last. With the standalone one,
jsii cannot map aws-cdk-lib's `MetadataEntry` and `assertions.Annotations` fails with "Unknown interface:
aws-cdk-lib.cloud_assembly_schema.MetadataEntry" (seen on a fresh clone: 12 tests failed).

Run with the venv's python: `.venv/bin/python scripts/cdk_lib_owns_its_files.py [--mend .venv/bin/uv]`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import subprocess
import sys


def overwritten() -> list[str]:
    """aws-cdk-lib's files whose content no longer matches its RECORD."""
    dist = importlib.metadata.distribution("aws-cdk-lib")
    out = []
    for entry in dist.files or []:
        if entry.hash is None or entry.hash.mode != "sha256" or not str(entry).startswith("aws_cdk/"):
            continue
        digest = hashlib.sha256(entry.locate().read_bytes()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry.hash.value:
            out.append(str(entry))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--mend" and overwritten():
        version = importlib.metadata.version("aws-cdk-lib")
        subprocess.run(
            [sys.argv[2], "pip", "install", "--quiet", "--compile-bytecode", "--python", sys.executable,
             "--no-deps", "--reinstall-package", "aws-cdk-lib", f"aws-cdk-lib=={version}"],
            check=True,
        )  # fmt: skip
    changed = overwritten()
    for path in changed:
        print(f"aws-cdk-lib's {path} was overwritten by another package", file=sys.stderr)
    sys.exit(1 if changed else 0)
