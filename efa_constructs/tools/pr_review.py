"""``efa-cdk pr-review``: the template diff where a change is decided, in its pull request.

One command, the same in any CI: synthesize base and head (:func:`template_diff.run`), write the Markdown
comment (:mod:`.diff_render`) to a file, append it to the GitHub Actions job summary when there is one,
and with ``--post`` put it on the pull request as one comment, found again on the next push by its hidden
marker and updated instead of adding another. It fails (exit 3) when a stateful resource is deleted or
replaced, unless ``--allow-loss`` (the workflow passes it when the pull request carries the label
:data:`ALLOW_LABEL`). No AWS credentials; GitHub's token only to post.

GitHub's REST API, "REST API endpoints for issue comments" (docs.github.com/en/rest/issues/comments): a pull
request's comments are its issue's (``GET``/``POST /repos/{owner}/{repo}/issues/{number}/comments``,
``PATCH /repos/{owner}/{repo}/issues/comments/{id}``). A job summary holds at most 1 MiB per step
(GitHub Actions docs, "Adding a job summary").
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import EfaConfigError
from .diff_render import MARKER
from .template_diff import DiffReport

#: The pull-request label that lets a stateful loss through (the workflow reads it).
ALLOW_LABEL = "efa-cdk:allow-stateful-loss"
#: The most a step's job summary holds (GitHub Actions docs, "Adding a job summary": 1 MiB).
SUMMARY_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class PullRequest:
    """Where to post: the API, the repository (``owner/name``), the pull request's number, the token."""

    api: str
    repository: str
    number: int
    token: str

    @staticmethod
    def from_environment(env: dict[str, str] | None = None) -> PullRequest:
        """The pull request of a GitHub Actions run (``GITHUB_EVENT_PATH``'s ``pull_request``), or one line
        saying what is missing."""
        env = dict(os.environ if env is None else env)
        missing = [k for k in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH") if not env.get(k)]
        if missing:
            raise EfaConfigError(
                "--post",
                code="efa-cdk:pr-review-no-pull-request",
                value=", ".join(missing),
                why="posting needs a GitHub Actions run of a pull request, and these are not set",
                fix="run it in the workflow (efa-cdk pr-review --write-workflow), GITHUB_TOKEN set; or "
                "leave out --post and post the comment file yourself",
            )
        event = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text())
        number = (event.get("pull_request") or {}).get("number")
        if not isinstance(number, int):
            raise EfaConfigError(
                "--post",
                code="efa-cdk:pr-review-not-a-pull-request",
                value=env.get("GITHUB_EVENT_NAME", "(unknown event)"),
                why="the run's event names no pull request to comment on",
                fix="run the workflow on: pull_request",
            )
        api = env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
        return PullRequest(api, env["GITHUB_REPOSITORY"], number, env["GITHUB_TOKEN"])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.api}{path}",
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

    def upsert(self, body: str) -> str:
        """Update the comment that carries :data:`MARKER`, else add one; its address."""
        issue = f"/repos/{self.repository}/issues"
        page = 1
        while True:
            comments = self._call("GET", f"{issue}/{self.number}/comments?per_page=100&page={page}")
            mine = next((c for c in comments if MARKER in (c.get("body") or "")), None)
            if mine is not None:
                return str(self._call("PATCH", f"{issue}/comments/{mine['id']}", {"body": body})["html_url"])
            if len(comments) < 100:
                break
            page += 1
        return str(self._call("POST", f"{issue}/{self.number}/comments", {"body": body})["html_url"])


def post(body: str, pull: PullRequest) -> str:
    """Post or update the comment; one line of what happened (a refusal, e.g. a fork's read-only token,
    is said, not raised: the diff's verdict stands without the comment)."""
    try:
        return f"comment: {pull.upsert(body)}"
    except urllib.error.HTTPError as err:
        hint = " (a pull request from a fork gets a read-only token)" if err.code in (401, 403, 404) else ""
        return f"comment not posted: GitHub answered {err.code} {err.reason}{hint}"
    except (OSError, http.client.HTTPException) as err:  # URLError, a refused or dropped connection
        return f"comment not posted: GitHub not reached ({getattr(err, 'reason', err)})"


def review(
    report: DiffReport, comment_file: Path, allow_loss: bool, pull: PullRequest | None
) -> tuple[bool, str]:
    """Write the comment (and the job summary), post it when `pull` is given; (fails, one-line summary)."""
    comment = report.markdown()
    comment_file.write_text(comment)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(report.markdown(SUMMARY_LIMIT))
    changed = [s for s, d in report.stacks.items() if not d.empty]
    losses = sum(len(d.stateful_losses) for d in report.stacks.values())
    line = (
        f"efa-cdk pr-review: {len(changed)} of {len(report.stacks)} stacks change; {losses} stateful losses; "
        f"{len(report.widenings)} widenings; comment in {comment_file}"
    )
    if pull is not None:
        line += f"; {post(comment, pull)}"
    fails = report.stateful_loss and not allow_loss
    if report.stateful_loss:
        line += (
            "; the loss is allowed (--allow-loss)"
            if allow_loss
            else f"; FAILS: add the label {ALLOW_LABEL} (or --allow-loss) once the loss is meant"
        )
    return fails, line


def workflow() -> str:
    """The GitHub Actions workflow a user copies (``pr-review --write-workflow``)."""
    return resources.files("efa_constructs.tools").joinpath("pr-review.yml").read_text()
