"""install-efa.sh against a real gpg and a real download (curl, file://), not stubs.

The EFA installer cannot be downloaded here, so a locally built tarball signed with a test key
stands in for it (the one stand-in). What this proves with real gpg: the pinned AWS fingerprint
refuses the test key (fail closed, nothing runs); the same files with the test key's fingerprint
pinned install; a tarball changed after signing is refused even with the right key.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from efa_constructs.core.software import EFA_INSTALLER_FINGERPRINT, EFA_INSTALLER_VERSION
from tests.helpers import Node

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="this machine lacks gpg")
TARBALL = f"aws-efa-installer-{EFA_INSTALLER_VERSION}.tar.gz"


def _signed_installer(node: Node, tmp: Path) -> str:
    """The stub tarball, signed by a fresh test key; the files in a directory served as file://.
    Returns the test key's fingerprint."""
    node.installer_tarball(sha256="")  # signature only, as for 1.51.0
    served = tmp / "served"
    served.mkdir()
    shutil.copy(node.stub_dir / "downloads" / TARBALL, served / TARBALL)
    home = tmp / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--batch", "--homedir", str(home), "--passphrase", "", "--pinentry-mode", "loopback"]
    new_key = ["--quick-gen-key", "efa-cdk test <test@example.invalid>", "ed25519", "sign", "never"]
    subprocess.run([*gpg, *new_key], check=True, capture_output=True)
    colons = subprocess.run(
        [*gpg, "--with-colons", "--fingerprint"], check=True, capture_output=True, text=True
    )
    fingerprint = next(line.split(":")[9] for line in colons.stdout.splitlines() if line.startswith("fpr"))
    key = subprocess.run([*gpg, "--armor", "--export"], check=True, capture_output=True).stdout
    (served / "aws-efa-installer.key").write_bytes(key)
    subprocess.run([*gpg, "--detach-sign", "-o", str(served / f"{TARBALL}.sig"), str(served / TARBALL)],
                   check=True, capture_output=True)  # fmt: skip
    for stub in ("gpg", "curl"):  # the real ones from here on
        (node.stub_dir / "bin" / stub).unlink()
    node.efa_installed(False)
    node.setting("EFA_CDK_INSTALLER_URL", f"file://{served}")
    return fingerprint


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    yield Node(tmp_path, "c5n.18xlarge")
    # key generation started a gpg-agent for the test keyring: stop it
    kill = ["gpgconf", "--homedir", str(tmp_path / "gnupg"), "--kill", "gpg-agent"]
    subprocess.run(kill, capture_output=True)


def test_the_pinned_aws_key_refuses_a_tarball_signed_by_another_key(node: Node, tmp_path: Path) -> None:
    test_key = _signed_installer(node, tmp_path)
    r = node.run("install-efa")
    assert r.returncode == 1
    assert f"has fingerprint {test_key}, expected {EFA_INSTALLER_FINGERPRINT}; not installing" in r.log
    assert not (node.root / "installer-ran").exists()


def test_a_tarball_signed_by_the_pinned_key_installs(node: Node, tmp_path: Path) -> None:
    node.setting("EFA_CDK_INSTALLER_FINGERPRINT", _signed_installer(node, tmp_path))
    r = node.run("install-efa")
    assert r.returncode == 0, r.log
    assert "signature by" in r.log and (node.root / "installer-ran").exists()


def test_a_tarball_changed_after_signing_is_refused(node: Node, tmp_path: Path) -> None:
    node.setting("EFA_CDK_INSTALLER_FINGERPRINT", _signed_installer(node, tmp_path))
    with open(tmp_path / "served" / TARBALL, "ab") as fh:
        fh.write(b"\0")
    r = node.run("install-efa")
    assert r.returncode == 1 and "does not verify against key" in r.log
    assert not (node.root / "installer-ran").exists()
