"""``efa-cdk pr-review``: the template diff where a change is decided, in its pull request.

One command, the same in any CI: synthesize base and head (:func:`template_diff.run`, each with its own
dependencies), write the Markdown comment (:mod:`.diff_render`) and its verdict (``verdict.json``) to files,
append the comment to the GitHub Actions job summary when there is one (bounded in bytes), and with
``--post`` put it on the pull request (:mod:`.post_comment`). It fails (exit 3) when a stateful resource is
deleted, replaced or rolled, or a change cannot deploy, unless ``--allow-loss`` (the pull request's label
:data:`ALLOW_LABEL`). No AWS credentials.

The workflow it writes (``--write-workflow``) runs it in a job that can only read, and posts the comment
from a second job that checks nothing out: the pull request's code never runs beside a token that can
write. Its verdict guards against mistakes, not against a hostile pull request: the code under review
decides what its own synthesis says.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..core.errors import EfaConfigError
from .post_comment import ALLOW_LABEL, BOT_LOGIN, MARKER, GitHub, post
from .template_diff import DiffReport

__all__ = ["ALLOW_LABEL", "MARKER", "SUMMARY_LIMIT", "PullRequest", "post", "review", "workflow"]

#: The most a step's job summary holds (GitHub Actions docs, "Adding a job summary": 1 MiB, in bytes).
SUMMARY_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class PullRequest:
    """Where to post: the API, the repository (``owner/name``), the pull request's number, the token."""

    api: str
    repository: str
    number: int
    token: str
    login: str = BOT_LOGIN

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
        login = env.get("BOT_LOGIN") or BOT_LOGIN
        return PullRequest(api, env["GITHUB_REPOSITORY"], number, env["GITHUB_TOKEN"], login)

    def github(self) -> GitHub:
        """The pull request's comments through :class:`.post_comment.GitHub`."""
        return GitHub(self.api, self.repository, self.number, self.token, self.login)


def review(
    report: DiffReport,
    comment_file: Path,
    allow_loss: bool,
    pull: PullRequest | None,
    verdict_file: Path | None = None,
) -> tuple[bool, str]:
    """Write the comment, its verdict (JSON) and the job summary; post the comment when `pull` is given;
    (fails, one-line summary)."""
    comment = report.markdown()
    comment_file.parent.mkdir(parents=True, exist_ok=True)
    comment_file.write_text(comment, encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(report.markdown(SUMMARY_LIMIT, in_bytes=True))
    changed = [s for s, d in report.stacks.items() if not d.empty]
    losses = sum(len(d.stateful_losses) for d in report.stacks.values())
    refused = sum(len(d.refused) for d in report.stacks.values())
    line = (
        f"efa-cdk pr-review: {len(changed)} of {len(report.stacks)} stacks change; {losses} stateful losses; "
        f"{refused} refused; {len(report.widenings)} widenings; comment in {comment_file}"
    )
    if verdict_file is not None:
        verdict_file.parent.mkdir(parents=True, exist_ok=True)
        verdict = {"fails": report.fails, "stateful_losses": losses, "refused": refused}
        verdict_file.write_text(json.dumps({**verdict, "widenings": len(report.widenings)}) + "\n")
    if pull is not None:
        line += f"; {post(comment, pull.github())}"
    fails = report.fails and not allow_loss
    if report.fails:
        line += (
            "; the loss is allowed (--allow-loss)"
            if allow_loss
            else f"; FAILS: add the label {ALLOW_LABEL} (or --allow-loss) once the loss is meant"
        )
    return fails, line


#: Where the workflow template embeds the post job's script (:mod:`.post_comment`, indented in place).
SCRIPT_MARK = "# the post step's script: efa_constructs/tools/post_comment.py"


def workflow() -> str:
    """The GitHub Actions workflow a user copies (``pr-review --write-workflow``), with the post job's
    script (:mod:`.post_comment`) written into its step."""
    files = resources.files("efa_constructs.tools")
    template = files.joinpath("pr-review.yml").read_text()
    script = files.joinpath("post_comment.py").read_text()
    line = next(x for x in template.splitlines() if x.strip() == SCRIPT_MARK)
    indent = line[: len(line) - len(line.lstrip())]
    body = "\n".join(f"{indent}{x}" if x else "" for x in script.splitlines())
    return template.replace(line, body)
