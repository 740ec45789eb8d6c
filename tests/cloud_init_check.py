"""A node's user data as cloud-init reads it, with cloud-init's own code (Debian's python3-cloudinit).

Usage: /usr/bin/python3 tests/cloud_init_check.py USER_DATA SANDBOX
Prints JSON: the parts' content types and transfer encodings after cloud-init's UserDataProcessor, the
shell parts' text as its shell handler would write it, the content types its part handlers claim, the
cloud-config's schema errors (strict), and what its modules make of the cloud-config, in the order a
first boot runs them: bootcmd (run for real, before anything is written: its exit status), write_files
(the files written under SANDBOX, with their modes) and runcmd (the script it writes for the final
stage, under SANDBOX). Nothing outside SANDBOX is written.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import yaml
from cloudinit import helpers, subp, util
from cloudinit.config import cc_bootcmd, cc_runcmd, cc_write_files
from cloudinit.config.schema import SchemaValidationError, get_schema, validate_cloudconfig_schema
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.handlers.shell_script import ShellScriptPartHandler
from cloudinit.user_data import UserDataProcessor


class _Distro:
    default_owner = "root:root"  # write_files' owner when an entry names none


class _Cloud:
    """What the modules ask of the cloud: the distro's default owner (write_files), the instance id
    (bootcmd's INSTANCE_ID) and the instance's scripts directory (runcmd's script), under the sandbox."""

    distro = _Distro()

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox

    def get_instance_id(self) -> str:
        return "i-0123456789abcdef0"

    def get_ipath(self, name: str) -> str:
        path = self.sandbox / "instance" / name
        path.mkdir(parents=True, exist_ok=True)
        return str(path)


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


def main(user_data: Path, sandbox: Path) -> dict[str, object]:
    paths = helpers.Paths({"cloud_dir": str(sandbox / "cloud")})
    message = UserDataProcessor(paths).process(user_data.read_bytes())
    parts = [p for p in message.walk() if not p.is_multipart()]
    handled = {*CloudConfigPartHandler(paths).list_types(), *ShellScriptPartHandler(paths).list_types()}
    out: dict[str, object] = {
        "types": [p.get_content_type() for p in parts],
        "handled": sorted(handled),
        "encodings": [p.get("Content-Transfer-Encoding", "7bit") for p in parts],
        "shell": [
            p.get_payload(decode=True).decode() for p in parts if p.get_content_type() == "text/x-shellscript"
        ],
    }
    configs = [
        yaml.safe_load(p.get_payload(decode=True))
        for p in parts
        if p.get_content_type() == "text/cloud-config"
    ]
    errors = []
    for config in configs:
        try:
            validate_cloudconfig_schema(config, get_schema(), strict=True, log_details=False)
        except SchemaValidationError as err:
            errors.append(str(err))
    out["schema_errors"] = errors
    log = logging.getLogger("cloud_init_check")
    warnings: list[str] = []
    log.addHandler(_Collect(warnings))
    cloud = _Cloud(sandbox)
    bootcmd_ok = True
    # bootcmd runs for real (as cloud-init runs it, in this environment): only under a scratch root, with the
    # caller's stand-ins first on PATH, never against this machine's /etc and firewall
    assert os.environ.get("EFA_CDK_ROOT"), (
        "run with EFA_CDK_ROOT set to a scratch root (and stand-ins on PATH)"
    )
    for config in configs:  # bootcmd first, as on a first boot: nothing written yet
        try:
            cc_bootcmd.handle("bootcmd", config, cloud, log, [])
        except subp.ProcessExecutionError:
            bootcmd_ok = False
    out["bootcmd_ok"] = bootcmd_ok
    nologin = Path(os.environ["EFA_CDK_ROOT"], "etc/nologin")
    out["nologin_after_bootcmd"] = nologin.read_text() if nologin.exists() else None
    written: dict[str, str] = {}
    real_write = util.write_file

    def write(path: str, content: object, mode: int = 0o644, omode: str = "wb", **kw: object) -> None:
        if path.startswith(str(sandbox)):  # runcmd's script, in the instance directory
            real_write(path, content, mode=mode, omode=omode)
            return
        real_write(str(sandbox / "root" / path.lstrip("/")), content, mode=mode, omode=omode)
        written[path] = oct(mode)

    util.write_file = write  # type: ignore[assignment]
    util.chownbyname = lambda *a, **k: None  # type: ignore[assignment]
    for config in configs:
        cc_write_files.handle("write_files", config, cloud, log, [])
        cc_runcmd.handle("runcmd", config, cloud, log, [])
    out["written"] = written
    runcmd = Path(cloud.get_ipath("scripts")) / "runcmd"
    out["runcmd"] = runcmd.read_text() if runcmd.exists() else ""
    out["warnings"] = warnings
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
