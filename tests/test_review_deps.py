"""Issue 58 point 1: each revision is synthesized with its own dependencies, so that a dependency upgrade
shows what it changes (tests/review_deps_check.py: aws-cdk-lib 2.240.0 -> 2.275.0 from the registry, in a
user's app); and which files say a revision's dependencies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from efa_constructs.tools.revision_env import Environment, changed_packages, dependency_files, environment
from tests.conftest import background_result


@pytest.mark.waits
def test_an_aws_cdk_lib_bump_is_shown_with_what_it_changes(request: pytest.FixtureRequest) -> None:
    run, _ = background_result(request.node.nodeid)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert {"name": "aws-cdk-lib", "base": "2.240.0", "head": "2.275.0"} in report["dependencies"]
    assert report["environments"] == {"base": "requirements.txt", "head": "requirements.txt"}
    data = report["stacks"]["Data"]
    (function,) = [
        r for r in data["modified"] if r.startswith("CustomS3AutoDeleteObjectsCustomResourceProviderHandler")
    ]
    assert "Runtime" in data["modified"][function] and data["stateful_losses"] == []
    # the environments were built by this run, one a revision
    assert "setting up HEAD~1's dependencies from requirements.txt" in run.stderr
    assert "setting up HEAD's dependencies from requirements.txt" in run.stderr


def test_which_files_say_a_revisions_dependencies(tmp_path: Path) -> None:
    assert dependency_files(tmp_path) == []
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\ndependencies=[]\n")
    assert dependency_files(tmp_path) == ["pyproject.toml"]
    (tmp_path / "constraints.txt").write_text("six==1.16.0\n")
    assert dependency_files(tmp_path) == ["pyproject.toml", "constraints.txt"]
    (tmp_path / "requirements.txt").write_text("-r base.txt\n-c pins/lock.txt\naws-cdk-lib\n")
    (tmp_path / "base.txt").write_text("constructs\n")
    (tmp_path / "pins").mkdir()
    (tmp_path / "pins" / "lock.txt").write_text("constructs==10.8.1\n")
    assert dependency_files(tmp_path) == ["requirements.txt", "constraints.txt", "base.txt", "pins/lock.txt"]
    assert dependency_files(tmp_path, ["base.txt"]) == ["base.txt"]


def test_a_revision_with_no_dependency_file_runs_with_this_python(tmp_path: Path) -> None:
    env = environment(tmp_path, "HEAD", None, tmp_path)
    assert env.python == sys.executable and "no dependency file" in env.origin and "pytest" in env.packages


def test_a_dependency_that_does_not_install_is_one_line(tmp_path: Path) -> None:
    from efa_constructs.core.errors import EfaConfigError

    (tmp_path / "requirements.txt").write_text("no-such-package-efa-cdk-test==0.0.1\n")
    with pytest.raises(EfaConfigError) as err:
        environment(tmp_path, "HEAD~1", None, tmp_path)
    assert err.value.code == "efa-cdk:diff-dependencies-failed" and "\n" not in str(err.value)
    assert "HEAD~1: requirements.txt" in str(err.value)


def test_what_differs_between_two_environments() -> None:
    base = Environment("p", {"aws-cdk-lib": "2.240.0", "constructs": "10.8.1", "gone": "1"})
    head = Environment("p", {"aws-cdk-lib": "2.275.0", "constructs": "10.8.1", "new": "2"})
    assert changed_packages(base, head) == [
        ("aws-cdk-lib", "2.240.0", "2.275.0"),
        ("gone", "1", ""),
        ("new", "", "2"),
    ]


def test_two_runs_building_one_environment_share_it_and_neither_loses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in a fresh clone's CI: two reviews at once (the tests' background checks; two pull requests on
    one runner) built the same cached environment; the later one replaced the earlier's while it
    synthesized (No module named 'aws_cdk'). Now one builds, the other waits and uses it."""
    import threading
    import time

    from efa_constructs.tools import revision_env

    monkeypatch.setenv("EFA_CDK_CACHE", str(tmp_path / "cache"))
    builds: list[Path] = []

    def build(tree: Path, files: list[str], target: Path, say: str) -> None:
        builds.append(target)
        (target / "bin").mkdir(parents=True)
        time.sleep(0.5)  # a real build takes a minute: the other run arrives meanwhile
        (target / "bin" / "python").symlink_to(sys.executable)

    monkeypatch.setattr(revision_env, "_build", build)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "requirements.txt").write_text("aws-cdk-lib==2.240.0\n")
    found: list[str] = []
    runs = [
        threading.Thread(target=lambda: found.append(environment(tree, "HEAD", None, tmp_path).python))
        for _ in range(2)
    ]
    for run in runs:
        run.start()
        time.sleep(0.1)
    for run in runs:
        run.join()
    assert len(builds) == 1 and len(found) == 2 and len(set(found)) == 1
    assert Path(found[0]).exists()  # still there for both
