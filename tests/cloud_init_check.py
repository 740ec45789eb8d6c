"""A node's user data as cloud-init reads it, with cloud-init's own code (Debian's python3-cloudinit).

Usage: /usr/bin/python3 tests/cloud_init_check.py USER_DATA FSTAB_DIR [--mount-fails]
Prints JSON: the parts' content types and transfer encodings after cloud-init's UserDataProcessor, the
shell parts' text as its shell handler would write it, the content types its part handlers claim, the
cloud-config's schema errors (strict), and what cc_mounts does with the cloud-config: the /etc/fstab it
writes (to FSTAB_DIR/fstab), the directories it makes, the commands it runs, and the warnings it logs.
Nothing on this machine is changed: cc_mounts' fstab path, ensure_dir and subp are redirected. With
--mount-fails, `mount -a` fails as it does when the EFS cannot be reached.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import yaml
from cloudinit import helpers, subp, util
from cloudinit.config import cc_mounts
from cloudinit.config.schema import SchemaValidationError, get_schema, validate_cloudconfig_schema
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.handlers.shell_script import ShellScriptPartHandler
from cloudinit.user_data import UserDataProcessor


class _Distro:
    def uses_systemd(self) -> bool:
        return True


class _Cloud:
    distro = _Distro()

    def device_name_to_device(self, name: str) -> None:
        return None  # no ephemeral or swap devices: only the configured mounts


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


def main(user_data: Path, fstab_dir: Path, mount_fails: bool = False) -> dict[str, object]:
    paths = helpers.Paths({"cloud_dir": str(fstab_dir / "cloud")})
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
    made: list[str] = []
    ran: list[list[str]] = []
    cc_mounts.FSTAB_PATH = str(fstab_dir / "fstab")
    util.ensure_dir = lambda path, mode=None: made.append(path)  # type: ignore[assignment]

    def run(cmd: list[str], *args: object, **kwargs: object) -> tuple[str, str]:
        ran.append(list(cmd))
        if mount_fails and cmd[:2] == ["mount", "-a"]:
            raise subp.ProcessExecutionError(cmd=cmd, exit_code=32, stderr="mount.nfs4: Connection timed out")
        return "", ""

    subp.subp = run  # type: ignore[assignment]
    log = logging.getLogger("cc_mounts")
    warnings: list[str] = []
    log.addHandler(_Collect(warnings))
    for config in configs:
        cc_mounts.handle("mounts", config, _Cloud(), log, [])
    fstab = Path(cc_mounts.FSTAB_PATH)
    out["fstab"] = fstab.read_text() if fstab.exists() else ""
    out["made"], out["ran"], out["warnings"] = made, ran, warnings
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), "--mount-fails" in sys.argv[3:])))
