"""The package as a user installs it: built, checked, installed from the wheel into a fresh venv next
to an aws-cdk-lib the project does not pin, then used.

1. ``python -m build`` (sdist, then the wheel from the sdist) and ``twine check --strict``.
2. A fresh venv (on the lowest supported Python when the machine has it) with ``aws-cdk-lib==`` USER_CDK
   installed first, as an existing app would have it, then the wheel: the app's aws-cdk-lib must stay.
3. The user's app (tests/user_app.py, copied out of the project) synthesizes: an EfaCluster in the
   app's own VPC, an EfaLaunchTemplate under aws-cdk-lib's AutoScalingGroup, EfaNodegroups on both EKS
   modules, an EfaPcsCluster.
4. ``efa-cdk`` runs from PATH (the venv's bin, no activation); ``template-diff`` without its extra
   refuses in one line naming ``pip install 'efa-cdk[diff]'``, ``preflight`` naming ``[account]``,
   ``catalogue refresh`` likewise naming
   ``efa-cdk[refresh]``; importing the package loads no aws_cdk.
5. The EKS example (docs/examples) without the ``eks`` extra stops in one line naming it; with
   ``efa-cdk[eks]`` installed from the same wheel, it synthesizes.

Usage: python tests/packaging_check.py WORKDIR   (run by tests/test_packaging.py in the background)
Prints one JSON object (the findings) as its last line. Uses uv (installed by scripts/setup).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.docs_check import copy_tracked  # noqa: E402

#: The aws-cdk-lib of the user's app: inside the supported range, neither the floor nor constraints.txt's pin.
USER_CDK = "2.272.0"

# Whether aws_cdk is loaded after importing the package, then after touching a construct.
LAZY = """
import sys
import efa_constructs
before = "aws_cdk" in sys.modules
efa_constructs.EfaCluster
print(before, "aws_cdk" in sys.modules)
"""


def _uv() -> str:
    for candidate in (Path(sys.executable).parent / "uv", ROOT / ".venv" / "bin" / "uv"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("uv")
    if found is None:
        sys.exit("uv is missing: run scripts/setup --dev")
    return found


def _lowest_python() -> str:
    """Python 3.10 (the lowest requires-python admits) where this machine has one, else this Python."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in [shutil.which("python3.10"), *map(str, sorted(pyenv.glob("3.10*/bin/python3.10")))]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return sys.executable


def _run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def main(workdir: Path) -> None:
    uv = _uv()
    found: dict[str, object] = {}
    # 1. build and check, from a copy of the project's tracked files (the build writes egg-info beside them)
    src = workdir / "src"
    copy_tracked(src)
    dist = workdir / "dist"
    build = _run(sys.executable, "-m", "build", "--installer", "uv", "--outdir", dist, src)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = dist.glob("*.whl")
    twine = _run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    found["twine"] = [twine.returncode, twine.stdout.strip()]
    with zipfile.ZipFile(wheel) as zf:
        found["wheel_files"] = names = sorted(zf.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        found["metadata"] = zf.read(metadata).decode()

    # 2. the user's venv: their aws-cdk-lib first, then the wheel
    python = _lowest_python()
    venv = workdir / "venv"
    _run(uv, "venv", "--quiet", "--python", python, venv, check=True)
    vpy = venv / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", vpy, f"aws-cdk-lib=={USER_CDK}", check=True)
    install = _run(uv, "pip", "install", "--python", vpy, wheel)
    assert install.returncode == 0, install.stderr[-2000:]
    versions = _run(
        vpy,
        "-c",
        "import importlib.metadata as m, sys; print(sys.version_info[:2], m.version('aws-cdk-lib'))",
    )
    found["venv"] = versions.stdout.strip()

    # 3. the user's app, outside the project
    app = workdir / "app"
    app.mkdir()
    shutil.copy2(ROOT / "tests" / "user_app.py", app / "app.py")
    node = Path(shutil.which("node") or "/usr/bin/node").parent
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "PYTHONPATH": "",
        "VIRTUAL_ENV": "",
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin:{node}",
    }
    synth = _run(vpy, "app.py", app / "out", cwd=app, env=env)
    assert synth.returncode == 0, synth.stderr[-3000:]
    found["template"] = str(app / "out" / "UserApp.template.json")

    # 4. the command from PATH
    layout = _run("efa-cdk", "layout", "trn1.32xlarge", cwd=app, env=env)
    found["layout"] = [layout.returncode, layout.stdout]
    diff = _run("efa-cdk", "template-diff", cwd=app, env=env)
    found["template_diff"] = [diff.returncode, diff.stderr.strip()]
    refresh = _run("efa-cdk", "catalogue", "refresh", "--to", app / "types.json", cwd=app, env=env)
    found["refresh_without_extra"] = [refresh.returncode, refresh.stderr.strip()]
    preflight = _run("efa-cdk", "preflight", cwd=app, env=env)
    found["preflight_without_extra"] = [preflight.returncode, preflight.stderr.strip()]
    lazy = _run(vpy, "-c", LAZY, cwd=app, env=env, check=True)
    found["lazy"] = lazy.stdout.strip()

    # 5. the EKS example without, then with, its extra
    example = app / "eks_example.py"
    shutil.copy2(ROOT / "docs" / "examples" / "eks_efa_nodegroup.py", example)
    without = _run(vpy, example, cwd=app, env={**env, "CDK_OUTDIR": str(app / "eks-out")})
    found["eks_without_extra"] = [without.returncode, without.stderr.strip()]
    _run(uv, "pip", "install", "--quiet", "--python", vpy, f"{wheel}[eks]", check=True)
    with_extra = _run(vpy, example, cwd=app, env={**env, "CDK_OUTDIR": str(app / "eks-out")})
    found["eks_with_extra"] = [with_extra.returncode, with_extra.stderr.strip()[-2000:]]
    found["eks_template"] = str(app / "eks-out" / "EksEfaExample.template.json")
    print(json.dumps(found))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
