"""Record what the real NVIDIA tools print on a GPU machine, and what the project's parsers read of it.

Run by ``scripts/device-check OUT`` on a machine with an NVIDIA GPU (no network needed, nothing is
downloaded or built): ``nvidia-smi -L`` (``node/accel.py gpus``, the boot check's count) beside the driver's
own count (``--query-gpu``), each GPU's own state (``node/devices.py``: the query the node asks, the XML
report, the driver's remapped rows), ``gdscheck -p`` where a CUDA toolkit has it (``node/gds.py``), and
nccl-tests'
``all_reduce_perf`` on the GPUs there where it is on PATH or in ``NCCL_TESTS_BIN`` (``node/bench_parse.py``;
it is not built here: build it yourself, from NVIDIA/nccl-tests against your NCCL). Each output is kept in
OUT as a fixture (tests/fixtures/README's form: the tool, its version) with ``parsed.json``: what each parser
read, and where it disagrees with the tool's own count. Exit 1 when a parser misread a real output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

NODE = Path(__file__).resolve().parent.parent / "efa_constructs" / "node"
sys.path.insert(0, str(NODE))  # as on a node: a parser's neighbours (devices.py's problems.py) beside it


def _node_module(name: str) -> Any:
    """One of the node's parsers, by its file: they are the standard library's alone (as on a node), so
    the package's own dependencies need not be installed where this runs."""
    spec = importlib.util.spec_from_file_location(f"efa_cdk_node_{name}", NODE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


accel, bench_parse, gds, devices = (_node_module(n) for n in ("accel", "bench_parse", "gds", "devices"))


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: int = 240) -> str | None:
    """A command's output (stdout and stderr), or None when it is not there or does not finish."""
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def _gdscheck() -> str | None:
    """gdscheck where a CUDA toolkit keeps it (the node software looks in the same places)."""
    found = sorted(Path("/usr/local").glob("cuda*/gds/tools/gdscheck"))
    return str(found[0]) if found else shutil.which("gdscheck")


def _nvidia(out: Path, report: dict[str, Any]) -> None:
    listing = _run(["nvidia-smi", "-L"])
    if listing is None:
        report["nvidia-smi"] = "not found"
        return
    (out / "nvidia-smi-L.txt").write_text(listing)
    query = _run(["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"]) or ""
    rows = [r for r in query.splitlines() if r.strip()]
    header = _run(["nvidia-smi"]) or ""
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    read = accel.nvidia_gpus(listing)
    report["nvidia-smi"] = {
        "driver": rows[0].split(",")[-1].strip() if rows else "?",
        "cuda": cuda.group(1) if cuda else "?",
        "gpus_the_driver_counts": len(rows),
        "gpus_accel_py_reads": read,
        "agrees": read == len(rows),
    }


def _devices(out: Path, report: dict[str, Any]) -> None:
    """The GPUs' own state as the node's check reads it (node/devices.py): the query it asks, and the XML
    report, must say the same; and each GPU the driver's own remapped-rows query names pending or failed
    must be named so (its bus id), and no other."""
    fields = ",".join((*devices.FIELDS, *devices.NEWER_FIELDS))
    query = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"])
    if query is None:
        report["gpu_state"] = "not found"
        return
    xml = _run(["nvidia-smi", "-q", "-x"]) or ""
    remapped = "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure"
    rows = _run(["nvidia-smi", remapped, "--format=csv,noheader"]) or ""
    links = _run(["nvidia-smi", "nvlink", "--status"]) or ""
    kept = {
        "nvidia-smi-query-gpu-devices.csv": query,
        "nvidia-smi-q.xml": xml,
        "nvidia-smi-remapped-rows.csv": rows,
        "nvidia-smi-nvlink-status.txt": links,
    }
    for name, text in kept.items():
        (out / name).write_text(text)
    from_query, from_xml = devices.gpu_problems(query), devices.gpu_problems(xml)
    driver = set()
    for row in rows.splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) == 3:
            driver |= {
                (cells[0], kind)
                for kind, flag in (("pending", cells[1]), ("failed", cells[2]))
                if flag == "Yes"
            }
    named = {
        (m.group(1), "pending" if "pending" in line else "failed")
        for line in from_query
        if "row remapping" in line and (m := re.search(r"\(([0-9A-Fa-f:.]+)\)", line))
    }
    report["gpu_state"] = {
        "problems": from_query,
        "nvlink_problems": devices.nvlink_problems(links),
        "xml_says_the_same": from_query == from_xml,
        "remapping_the_driver_names": sorted(driver),
        "agrees": from_query == from_xml and named == driver,
    }


def _gds(out: Path, report: dict[str, Any]) -> None:
    tool = _gdscheck()
    text = _run([tool, "-p"]) if tool else None
    if text is None:
        report["gdscheck"] = "not found (no CUDA toolkit with gds-tools here)"
        return
    (out / "gdscheck-p.txt").write_text(text)
    check = gds.parse(text)
    gpus = report.get("nvidia-smi", {}).get("gpus_the_driver_counts", 0) if isinstance(
        report.get("nvidia-smi"), dict) else 0  # fmt: skip
    report["gdscheck"] = {
        "release": check.release,
        "nvidia_fs": ".".join(map(str, check.nvidia_fs)),
        "fsx_lustre_line": check.fsx_lustre or "(none)",
        "gpu_lines": check.gpus,
        "agrees": check.gpus == gpus,
        "problems_for_fsx": check.problems(gpus),
    }


def _figures_agree(text: str, document: Path) -> tuple[bool | None, list[str]]:
    """Each result row's busbw as the parser reads it (bench_parse._nccl_row: out of place, in place) against
    the tool's own figures (nccl-tests' -J JSON, 2.17 and later: results[].out_of_place/in_place.bus_bw),
    row by row, within the text's rounding (two decimals, or five significant digits); None without the
    JSON (an older build)."""
    try:
        results = json.loads(document.read_text())["results"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, []
    rows = [r for r in map(bench_parse._nccl_row, bench_parse._lines(text)) if r is not None]
    misread = []
    if len(rows) != len(results):
        misread.append(f"{len(rows)} rows read, the JSON has {len(results)}")
    for read, result in zip(rows, results, strict=False):
        tool = [result["out_of_place"]["bus_bw"], result["in_place"]["bus_bw"]]
        for mine, theirs in zip(read, tool, strict=False):
            if abs(mine - theirs) > max(0.006, 5e-5 * abs(theirs)):
                misread.append(f"size {result['size']}: busbw {mine:g} read, {theirs:g} in the JSON")
    return not misread, misread


def _nccl(out: Path, report: dict[str, Any]) -> None:
    binary = os.environ.get("NCCL_TESTS_BIN") or shutil.which("all_reduce_perf")
    if not binary:
        report["all_reduce_perf"] = "not found (set NCCL_TESTS_BIN to a build of NVIDIA/nccl-tests)"
        return
    gpus = report.get("nvidia-smi", {}).get("gpus_the_driver_counts", 1) if isinstance(
        report.get("nvidia-smi"), dict) else 1  # fmt: skip
    env = {**os.environ, "NCCL_DEBUG": "INFO"}
    document = out / "all_reduce_perf.json"
    argv = [binary, "-b", "8", "-e", "256M", "-f", "2", "-g", str(max(gpus, 1))]
    text = _run([*argv, "-J", str(document)], env=env, timeout=300)
    if text is not None and not any(bench_parse._nccl_row(x) for x in bench_parse._lines(text)):
        text = _run(argv, env=env, timeout=300)  # a build without -J
    if text is None:
        report["all_reduce_perf"] = f"{binary} did not finish"
        return
    (out / "all_reduce_perf.txt").write_text(text)
    parsed = bench_parse.parse_nccl_tests(text)
    rows = sum(1 for line in bench_parse._lines(text) if bench_parse._nccl_row(line) is not None)
    nccl = re.search(r"NCCL version ([\w.+]+)", text)
    figures, misread = _figures_agree(text, document)
    report["all_reduce_perf"] = {
        "nccl": nccl.group(1) if nccl else "?",
        "rows": rows,
        # one machine, no EFA: the parser must say so (no efa provider), having read the rows
        "parser": parsed,
        "figures_match_the_json": figures if figures is not None else "no JSON (nccl-tests before 2.17?)",
        "misread": misread,
        "agrees": rows > 0
        and not parsed["ok"]
        and "not efa" in parsed.get("reason", "")
        and figures is not False,
    }


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "device-check")
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    for step in (_nvidia, _devices, _gds, _nccl):
        step(out, report)
    (out / "parsed.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    misread = [k for k, v in report.items() if isinstance(v, dict) and not v.get("agrees")]
    if misread:
        print(f"device-check: the parsers misread {', '.join(misread)}", file=sys.stderr)
    return 1 if misread else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
