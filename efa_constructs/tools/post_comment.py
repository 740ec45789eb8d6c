"""Post the review's comment on its pull request, or update the one this workflow posted before.

Standard library only: the pull-request workflow (``efa-cdk pr-review --write-workflow``) runs this file as
the step of a job that holds a token that can write and checks nothing out, so no code of the pull request
runs beside the token; ``efa-cdk pr-review --post`` calls the same functions.

GitHub's REST API, "REST API endpoints for issue comments" (docs.github.com/en/rest/issues/comments): a pull
request's comments are its issue's (``GET``/``POST /repos/{owner}/{repo}/issues/{number}/comments``,
``PATCH /repos/{owner}/{repo}/issues/comments/{id}``), each with its author's ``user.login``. The comment is
found by its first line (:data:`MARKER`) *and* its author (:data:`BOT_LOGIN`, what ``GITHUB_TOKEN`` posts
as): another user's comment that carries the marker is never edited. A comment holds at most 65,536
characters (:data:`LIMIT`); a longer body is cut, and says so.

Environment: ``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` (owner/name), ``PR_NUMBER`` (else read from
``GITHUB_EVENT_PATH``), ``GITHUB_API_URL``, ``BOT_LOGIN``, ``REVIEW_DIR`` (``comment.md`` and
``verdict.json``, default ``review``), ``ALLOW_LOSS`` (``true``: a loss does not fail). Exit 3 when the
verdict fails and no label allows it, 1 when there is no review to post; a comment GitHub refused (a fork's
read-only token) is said, and the verdict stands without it.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MARKER = "<!-- efa-cdk template-diff -->"
#: The login GitHub Actions' ``GITHUB_TOKEN`` comments as.
BOT_LOGIN = "github-actions[bot]"
LIMIT = 65536
#: The pull-request label that lets a stateful loss through.
ALLOW_LABEL = "efa-cdk:allow-stateful-loss"
#: This step's exit codes: efa-cdk's own (efa_constructs/tools/exits.py's table, which this standalone file
#: cannot import; tests/test_review_workflow.py holds them equal).
OK, FOUND, STATEFUL_LOSS = 0, 1, 3


class GitHub:
    """One pull request's comments through GitHub's REST API."""

    def __init__(self, api: str, repository: str, number: int, token: str, login: str = BOT_LOGIN) -> None:
        self.api, self.repository, self.number, self.token, self.login = api, repository, number, token, login

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.api.rstrip('/')}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def mine(self, comment: Any) -> bool:
        """A comment this workflow posted: its author is :attr:`login` and it starts with the marker."""
        if not isinstance(comment, dict):
            return False
        author = (comment.get("user") or {}).get("login")
        return author == self.login and str(comment.get("body") or "").startswith(MARKER)

    def upsert(self, body: str) -> str:
        """Update the comment this workflow posted before, else add one; its address."""
        issue = f"/repos/{self.repository}/issues"
        page = 1
        while True:
            comments = self._call("GET", f"{issue}/{self.number}/comments?per_page=100&page={page}")
            found = next((c for c in comments if self.mine(c)), None)
            if found is not None:
                return str(
                    self._call("PATCH", f"{issue}/comments/{int(found['id'])}", {"body": body})["html_url"]
                )
            if len(comments) < 100:
                break
            page += 1
        return str(self._call("POST", f"{issue}/{self.number}/comments", {"body": body})["html_url"])


def bounded(body: str, limit: int = LIMIT) -> str:
    """The body as GitHub takes it: at most `limit` characters, a cut one saying so."""
    if len(body) <= limit:
        return body
    note = "\n\n_…cut to fit a GitHub comment: the job's summary and artifact hold all of it._\n"
    return body[: limit - len(note)].rsplit("\n", 1)[0] + note


def post(body: str, github: GitHub) -> str:
    """Post or update the comment; one line of what happened (a refusal, e.g. a fork's read-only token,
    is said, not raised: the verdict stands without the comment)."""
    try:
        return f"comment: {github.upsert(bounded(body))}"
    except urllib.error.HTTPError as err:
        hint = " (a pull request from a fork gets a read-only token)" if err.code in (401, 403, 404) else ""
        return f"comment not posted: GitHub answered {err.code} {err.reason}{hint}"
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as err:
        return f"comment not posted: GitHub not reached or not understood ({getattr(err, 'reason', err)})"


def _number(env: dict[str, str]) -> int | None:
    given = env.get("PR_NUMBER", "")
    if given.isdigit():
        return int(given)
    try:
        event = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text())
        number = (event.get("pull_request") or {}).get("number")
    except (KeyError, OSError, ValueError):
        return None
    return number if isinstance(number, int) else None


def main(env: dict[str, str] | None = None) -> int:
    """The post job's step: post review/comment.md, then exit by review/verdict.json's verdict."""
    env = dict(os.environ if env is None else env)
    folder = Path(env.get("REVIEW_DIR") or "review")
    try:
        body = (folder / "comment.md").read_text(encoding="utf-8", errors="replace")[: 4 * LIMIT]
        verdict = json.loads((folder / "verdict.json").read_text(encoding="utf-8")[:65536])
    except (OSError, ValueError) as err:
        print(
            f"efa-cdk review: no review to post in {folder} ({err}): the review job did not finish",
            file=sys.stderr,
        )
        return FOUND
    number = _number(env)
    missing = [k for k in ("GITHUB_TOKEN", "GITHUB_REPOSITORY") if not env.get(k)]
    if missing or number is None:
        print(
            f"efa-cdk review: cannot post: {', '.join(missing) or 'no pull request number'}", file=sys.stderr
        )
        return FOUND
    github = GitHub(
        env.get("GITHUB_API_URL") or "https://api.github.com",
        env["GITHUB_REPOSITORY"],
        number,
        env["GITHUB_TOKEN"],
        env.get("BOT_LOGIN") or BOT_LOGIN,
    )
    said = post(body, github)
    print(f"efa-cdk review: {said}")
    fails = isinstance(verdict, dict) and verdict.get("fails") is True
    if fails and env.get("ALLOW_LOSS") != "true":
        print(
            "efa-cdk review: FAILS: a stateful loss or a refused change; "
            f"add the label {ALLOW_LABEL} once meant"
        )
        return STATEFUL_LOSS
    return OK


if __name__ == "__main__":
    sys.exit(main())
