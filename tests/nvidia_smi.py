#!/usr/bin/env python3
"""A stand-in for ``nvidia-smi``, built from the real outputs of one H200 (tests/fixtures/nvidia-h200): what
the node's checks ask of it, answered from the recorded values, for as many GPUs as a test serves.

Its state is a folder (``$NVIDIA_SMI_DIR``):

* ``gpus.csv``: every ``--query-gpu`` field, one row a GPU, in the recorded ``--format=csv`` form (header
  with units): the recorded row, copied per GPU with its index and bus id changed (:func:`serve`), and with
  the fields a test's fault changes (:func:`with_fault`);
* ``after-reset.csv``: what the GPUs read after ``nvidia-smi -r`` (else the same as before);
* ``nvlink.txt``: ``nvidia-smi nvlink --status`` (recorded: empty, one GPU has no NVLink peer);
* ``q.xml``: ``nvidia-smi -q -x`` (the recorded XML, one GPU);
* ``apps.txt``: ``--query-compute-apps=pid --format=csv,noheader`` (a busy GPU's processes);
* ``refuse``: field names the driver does not know (as an older driver refuses newer fields);
* ``fail``: when present, every call prints it and exits 9 (no driver loaded);
* ``reset-rc``: the exit status of ``-r`` (default 0).

Every call is appended to ``calls.log``. What the real tool prints on a refused field or a reset is not
recorded: the stand-in's own words are marked ``stand-in:``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures/nvidia-h200"
RECORDED = FIXTURES / "nvidia-smi-query-gpu-all.csv"
#: What the driver prints when it is not loaded (the message nvidia-smi gives without a driver; a node with
#: the image's driver missing prints it for every command).
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running."
)


def _name(header: str) -> str:
    return re.sub(r"\s*\[.*\]$", "", header).strip()


def read(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """A ``--format=csv`` document: its header cells (with units) and one dict a GPU, by field name."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    header = rows[0]
    return header, [dict(zip([_name(h) for h in header], row, strict=True)) for row in rows[1:] if row]


def write(header: list[str], gpus: list[dict[str, str]]) -> str:
    lines = [", ".join(header)]
    lines += [", ".join(gpu[_name(h)] for h in header) for gpu in gpus]
    return "\n".join(lines) + "\n"


def serve(count: int) -> str:
    """The recorded GPU as `count` GPUs: index 0..count-1, bus ids 00000000:00:06.0, :07.0, ..."""
    header, (gpu,) = read(RECORDED.read_text())
    gpus = []
    for i in range(count):
        gpus.append({**gpu, "index": str(i), "pci.bus_id": f"00000000:00:{6 + i:02X}.0",
                     "minor_number": str(i), "uuid": gpu["uuid"][:-2] + f"{i:02x}"})  # fmt: skip
    return write(header, gpus)


def with_fault(document: str, gpu: int, **fields: str) -> str:
    """`document` with `fields` of GPU `gpu` changed, and nothing else; each field must be one the driver
    answers (a name in the recorded header), so a test cannot fault a field that does not exist."""
    header, gpus = read(document)
    for field in fields:
        assert field in gpus[gpu], f"{field} is not a --query-gpu field of the recording"
    gpus[gpu] = {**gpus[gpu], **fields}
    return write(header, gpus)


def _query(state: Path, spec: str, fmt: str) -> int:
    header, gpus = read((state / "gpus.csv").read_text())
    by_name = {_name(h): h for h in header}
    refused = (state / "refuse").read_text().split() if (state / "refuse").exists() else []
    wanted = spec.split(",")
    for field in wanted:
        if field not in by_name or field in refused:
            print(f'stand-in: Field "{field}" is not a valid field to query.')
            return 2
    options = fmt.split(",")
    if "nounits" in options:
        print("stand-in: nounits is not served")
        return 2
    lines = [] if "noheader" in options else [", ".join(by_name[f] for f in wanted)]
    lines += [", ".join(gpu[f] for f in wanted) for gpu in gpus]
    print("\n".join(lines))
    return 0


def main(args: list[str]) -> int:
    state = Path(os.environ["NVIDIA_SMI_DIR"])
    with (state / "calls.log").open("a") as log:
        log.write(" ".join(args) + "\n")
    if (state / "fail").exists():
        print((state / "fail").read_text().strip())
        return 9
    options = dict(re.match(r"^(--[a-z-]+)=(.*)$", a).groups() for a in args if re.match(r"^--[a-z-]+=", a))  # type: ignore[union-attr]
    if args == ["-L"]:
        for gpu in read((state / "gpus.csv").read_text())[1]:
            print(f"GPU {gpu['index']}: {gpu['name']} (UUID: {gpu['uuid']})")
        return 0
    if "--query-gpu" in options:
        return _query(state, options["--query-gpu"], options.get("--format", "csv"))
    if options.get("--query-remapped-rows") == "gpu_bus_id,remapped_rows.pending,remapped_rows.failure":
        for gpu in read((state / "gpus.csv").read_text())[1]:
            print(f"{gpu['pci.bus_id']}, {gpu['remapped_rows.pending']}, {gpu['remapped_rows.failure']}")
        return 0
    if "--query-compute-apps" in options:
        apps = state / "apps.txt"
        print(apps.read_text().strip() if apps.exists() else "")
        return 0
    if args == ["-q", "-x"]:
        print(
            (state / "q.xml").read_text()
            if (state / "q.xml").exists()
            else (FIXTURES / "nvidia-smi-q.xml").read_text()
        )
        return 0
    if args[:1] == ["nvlink"] and "--status" in args:
        print((state / "nvlink.txt").read_text() if (state / "nvlink.txt").exists() else "", end="")
        return 0
    if args[:1] == ["-r"]:
        rc = int((state / "reset-rc").read_text()) if (state / "reset-rc").exists() else 0
        if rc == 0 and (state / "after-reset.csv").exists():
            (state / "gpus.csv").write_text((state / "after-reset.csv").read_text())
        print("stand-in: GPUs reset" if rc == 0 else "stand-in: the GPU is in use and cannot be reset")
        return rc
    print(f"stand-in: {' '.join(args)} is not served")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
