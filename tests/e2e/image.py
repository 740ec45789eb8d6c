"""The container cluster's image, built without a registry: a Debian root file system from Debian's
archive (debootstrap, minbase) with libfabric-bin, openmpi-bin and openssh-server, the shape of the EC2
user guide's "install the EFA software in a container" image (here Debian's libfabric, whose tcp
provider stands in for efa). Built once and kept by content: the tar's name is the hash of the recipe
and of debootstrap's version, under ~/.cache/efa-cdk-e2e (XDG_CACHE_HOME); a second run, or a second
checkout, takes it from there. Each node imports it into its own Docker engine (`docker import`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
PACKAGES = ("libfabric-bin", "openmpi-bin", "openssh-server", "openssh-client")


def missing() -> list[str]:
    """What this machine lacks to build and run the image."""
    needs = {"dockerd (docker.io)": "dockerd", "docker (docker.io)": "docker", "debootstrap": "debootstrap"}
    return [
        k for k, exe in needs.items() if shutil.which(exe) is None and not Path("/usr/sbin", exe).exists()
    ]


def build() -> tuple[Path, str]:
    """The image's root file system tar and its tag (``efa-cdk-e2e/efa:<recipe hash>``); built when
    not cached. Raises RuntimeError with debootstrap's last lines when the archive cannot be reached."""
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "debootstrap"], capture_output=True, text=True, check=False
    ).stdout
    recipe = f"{SUITE} {MIRROR} minbase {' '.join(PACKAGES)} debootstrap {version}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "efa-cdk-e2e"
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / f"efa-image-{key}.tar"
    with (cache / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once: one builds, the other waits and reuses it
        if not tar.exists():
            work = Path(tempfile.mkdtemp(prefix="efa-image-", dir=cache))
            try:
                run = subprocess.run(
                    ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                     str(work / "rootfs"), MIRROR],
                    capture_output=True, text=True, check=False, timeout=900,
                )  # fmt: skip
                if run.returncode != 0:
                    raise RuntimeError(f"debootstrap failed: {(run.stdout + run.stderr)[-600:]}")
                partial = work / "image.tar"
                subprocess.run(["tar", "-C", str(work / "rootfs"), "-cf", str(partial), "."], check=True)
                partial.rename(tar)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return tar, f"efa-cdk-e2e/efa:{key}"
