"""Each revision of an app synthesized with its own dependencies, so that an upgrade shows what it changes.

A revision's dependencies are its own files (:func:`dependency_files`: ``requirements.txt``, else the
``[project]`` dependencies of ``pyproject.toml``; ``constraints.txt`` beside either as constraints, and any
file they include with ``-r`` / ``-c``). Its environment is a virtual environment built from exactly those
files and kept under the cache (:func:`cache_root`) by their hash: the base and head of a pull request that
changes no dependency share one, and the next run reuses it (runs at once build it once: the others wait
on a lock beside it). A requirement on a local path (``-e .``, ``./lib``, ``file:``) depends on the tree
itself: that environment is built for the run and not kept.

``uv`` installs when it is there (the project's own setup pins it; ``pip install uv``), else ``pip``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import EfaConfigError

#: Where a revision's dependencies are read from, in order: the first that exists is used.
PRIMARY_FILES = ("requirements.txt", "pyproject.toml")
#: Read beside the primary file as constraints when present (exact versions, as a lock).
CONSTRAINT_FILES = ("constraints.txt",)
#: A requirement line that names a file of the tree (its environment depends on the tree: not cached).
_LOCAL = re.compile(r"^\s*(-e\s|--editable|\.|/|file:)")
_INCLUDE = re.compile(r"^\s*(-r|-c|--requirement|--constraint)[=\s]+(\S+)")


def cache_root() -> Path:
    """``$EFA_CDK_CACHE``, else ``$XDG_CACHE_HOME/efa-cdk``, else ``~/.cache/efa-cdk``."""
    given = os.environ.get("EFA_CDK_CACHE")
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "efa-cdk"


@dataclass(frozen=True)
class Environment:
    """A Python to synthesize with, what it holds (``name -> version``), and where it comes from."""

    python: str
    packages: dict[str, str] = field(default_factory=dict)
    origin: str = "the running Python"


def dependency_files(tree: Path, given: list[str] | None = None) -> list[str]:
    """The files (relative to `tree`) that say a revision's dependencies: `given` where the user named
    them, else the first of :data:`PRIMARY_FILES` with :data:`CONSTRAINT_FILES` beside it; with every file
    they include. Empty: the revision names none (it runs with the running Python)."""
    if given:
        files = [f for f in given if (tree / f).is_file()]
    else:
        primary = next((f for f in PRIMARY_FILES if (tree / f).is_file()), None)
        files = [] if primary is None else [primary, *(f for f in CONSTRAINT_FILES if (tree / f).is_file())]
    out: list[str] = []
    while files:
        name = files.pop(0)
        if name in out:
            continue
        out.append(name)
        if name.endswith(".txt"):
            base = Path(name).parent
            for line in (tree / name).read_text().splitlines():
                found = _INCLUDE.match(line)
                if found and (tree / base / found.group(2)).is_file():
                    files.append(str(base / found.group(2)))
    return out


def _local(tree: Path, files: list[str]) -> bool:
    """Whether a requirement names a path of the tree (the environment is then the tree's own)."""
    return any(
        _LOCAL.match(line)
        for f in files
        if f.endswith(".txt")
        for line in (tree / f).read_text().splitlines()
    )


def _key(tree: Path, files: list[str]) -> str:
    digest = hashlib.sha256(f"{sys.implementation.cache_tag} {sys.version}".encode())
    for name in files:
        digest.update(name.encode() + b"\0" + (tree / name).read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _installer() -> list[str] | None:
    """The uv command line to install with, or None (pip)."""
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    return [found] if found else None


def _install_args(files: list[str]) -> list[str]:
    args: list[str] = []
    for name in files:
        flag = "-c" if any(Path(name).name == c for c in CONSTRAINT_FILES) else "-r"
        args += [flag, name]
    return args


def _build(tree: Path, files: list[str], target: Path, say: str) -> None:
    """A virtual environment at `target` with what `files` ask for, installed from `tree`."""
    uv = _installer()
    print(f"template-diff: {say}", file=sys.stderr, flush=True)
    steps = (
        [[*uv, "venv", "--quiet", "--python", sys.executable, str(target)]]
        if uv
        else [[sys.executable, "-m", "venv", str(target)]]
    )
    python = str(target / "bin" / "python")
    if uv:
        install = ["pip", "install", "--quiet", "--compile-bytecode", "--python", python]
        steps.append([*uv, *install, *_install_args(files)])
    elif any(f.endswith(".toml") for f in files):
        raise RuntimeError("pyproject.toml's dependencies need uv to install (pip install uv)")
    else:
        steps.append(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *_install_args(files)]
        )
    # the platform's trust roots, as pip uses them (a corporate proxy's among them): uv's own switch, under
    # the name each of its releases reads (an older uv ignores the newer name, and the other way round)
    env = {"UV_SYSTEM_CERTS": "1", "UV_NATIVE_TLS": "1", **os.environ}
    for step in steps:
        done = subprocess.run(step, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(last)


def _packages(python: str) -> dict[str, str]:
    """What an environment holds: each distribution's name (lower case) and version."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "found = {d.metadata['Name'].lower(): d.version for d in m.distributions() if d.metadata['Name']}\n"
        "json.dump(found, sys.stdout)"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return dict(sorted(json.loads(done.stdout).items()))


@contextmanager
def _held(lock: Path) -> Iterator[None]:
    """An exclusive lock on `lock` for the block (POSIX flock; where there is none, no lock)."""
    try:
        import fcntl
    except ImportError:  # Windows: runs at once may each build the environment
        yield
        return
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_once(tree: Path, files: list[str], target: Path, revision: str, origin: str) -> None:
    """Build the environment beside `target` and move it there whole (a run stopped halfway leaves no
    environment that looks ready)."""
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        staged = building / "env"
        _build(tree, files, staged, f"setting up {revision}'s dependencies from {origin} (kept in {target})")
        (staged / ".efa-cdk-ready").write_text(origin + "\n")
        shutil.rmtree(target, ignore_errors=True)  # a leftover that never became ready
        staged.rename(target)
    except (RuntimeError, OSError) as err:
        raise EfaConfigError(
            "template-diff",
            code="efa-cdk:diff-dependencies-failed",
            value=f"{revision}: {origin}",
            why=f"its dependencies did not install: {err}",
            fix="fix that revision's dependency files, or pass --same-environment to synthesize both "
            "revisions with the running Python (a dependency change then does not show)",
        ) from None
    finally:
        shutil.rmtree(building, ignore_errors=True)


def environment(tree: Path, revision: str, given: list[str] | None, scratch: Path) -> Environment:
    """The environment that synthesizes `tree` (the revision `revision`): built from its own dependency
    files and cached by their hash (in `scratch`, not kept, when they name a path of the tree); the running
    Python when it names none."""
    files = dependency_files(tree, given)
    if not files:
        return Environment(
            sys.executable, _packages(sys.executable), "the running Python (no dependency file)"
        )
    origin = ", ".join(files)
    keep = not _local(tree, files)
    target = (cache_root() / "envs" / _key(tree, files)) if keep else scratch / f"env-{_key(tree, files)}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with _held(target.with_name(target.name + ".lock")):  # another run building it: wait, then use it
        if not (target / ".efa-cdk-ready").is_file():
            _build_once(tree, files, target, revision, origin)
    python = str(target / "bin" / "python")
    return Environment(python, _packages(python), origin)


def changed_packages(base: Environment, head: Environment) -> list[tuple[str, str, str]]:
    """(name, base version, head version) of each distribution that differs ('' where it is absent)."""
    names = sorted(set(base.packages) | set(head.packages))
    return [
        (n, base.packages.get(n, ""), head.packages.get(n, ""))
        for n in names
        if base.packages.get(n) != head.packages.get(n)
    ]
