#!/usr/bin/env python3
"""Parse benchmark logs into compact JSON, and build the wait-condition signal body.

Runs on the nodes (Python 3 standard library only) and in the tests, on real tool output.

    bench_parse.py nccl-tests LOG --line-rate-gbps G     all_reduce_perf (NCCL_DEBUG=INFO)
    bench_parse.py nccom-test LOG --line-rate-gbps G     Neuron nccom-test all-reduce
    bench_parse.py fi_pingpong LOG --line-rate-gbps G    libfabric fi_pingpong client
    bench_parse.py signal-body RESULT.json...            {"Status", "Reason", "UniqueId", "Data"}

Each result has: benchmark, ok, and when ok the peak and average figures in GB/s, the fraction
of the line rate the peak reached, and the provider the tool confirmed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

_TAG = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")  # mpirun --tag-output prefix
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kmgt]?)$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: CloudFormation keeps a wait condition's data for the stack output; stay well inside it.
MAX_DATA_CHARS = 1024
#: What each result keeps when all of them do not fit: the figures status and the outputs show.
SHORT_KEYS = (
    "benchmark",
    "ok",
    "peak_gbytes_s",
    "slow_nodes",
    "slow_links",
    "write_gbytes_s",
    "read_gbytes_s",
    "efa_share",
)


def _lines(text: str) -> list[str]:
    return [_TAG.sub("", line).rstrip() for line in text.splitlines()]


def _float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _first_float(pattern: str, lines: list[str]) -> float | None:
    return next((float(m.group(1)) for x in lines if (m := re.search(pattern, x))), None)


def _summary(
    name: str, peak: float, avg: float | None, line_rate_gbps: float, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"benchmark": name, "ok": True, "peak_gbytes_s": round(peak, 2)}
    if avg is not None:
        out["avg_gbytes_s"] = round(avg, 2)
    if line_rate_gbps > 0:
        out["line_rate_fraction"] = round(peak * 8 / line_rate_gbps, 3)
    out.update(extra)
    return out


def failed(name: str, reason: str) -> dict[str, Any]:
    """A result for a benchmark that did not produce figures."""
    return {"benchmark": name, "ok": False, "reason": reason}


def _nccl_row(line: str) -> list[float] | None:
    """The out-of-place and in-place busbw of one all_reduce_perf result row, or None for another line."""
    tok = line.split()
    if len(tok) < 12 or not tok[0].isdigit() or not tok[1].isdigit():
        return None
    rest = tok[4:]
    if len(rest) == 9:  # newer nccl-tests print a "root" column
        rest = rest[1:]
    return [v for v in (_float(rest[2]), _float(rest[6])) if v is not None]


def _average(pattern: str, lines: list[str]) -> float | None:
    """The "Avg bus bandwidth" figure a test prints (`pattern` captures it), or None."""
    return next((float(m.group(1)) for m in (re.search(pattern, x) for x in lines) if m), None)


def parse_nccl_tests(text: str, line_rate_gbps: float = 0) -> dict[str, Any]:
    """all_reduce_perf output: peak busbw over both columns, "Avg bus bandwidth", provider."""
    lines = _lines(text)
    rows = [r for r in map(_nccl_row, lines) if r is not None]
    peak = max((v for r in rows for v in r), default=0.0)
    providers = {
        m.group(1).lower() for m in (re.search(r"Selected provider is (\w+)", x, re.I) for x in lines) if m
    }
    if not rows:
        return failed("nccl-tests", "no result rows in the all_reduce_perf output")
    if any("Out of bounds values" in x and not x.rstrip().endswith("OK") for x in lines):
        return failed("nccl-tests", "all_reduce_perf reported wrong values")
    if providers != {"efa"}:
        found = ", ".join(sorted(providers)) or "none (NCCL used sockets)"
        return failed("nccl-tests", f"NCCL's libfabric provider was {found}, not efa")
    avg = _average(r"Avg bus bandwidth\s*:\s*([\d.]+)", lines)
    return _summary("nccl-tests", peak, avg, line_rate_gbps, rows=len(rows), provider="efa")


def parse_nccom_test(text: str, line_rate_gbps: float = 0) -> dict[str, Any]:
    """nccom-test output: peak busbw column and "Avg bus bandwidth: X GB/s"."""
    lines = _lines(text)
    peak, rows = 0.0, 0
    for line in lines:
        tok = line.split()
        if len(tok) == 6 and tok[0].isdigit() and tok[1].isdigit():
            value = _float(tok[5])
            if value is not None:
                peak, rows = max(peak, value), rows + 1
    avg = _average(r"Avg bus bandwidth:\s*([\d.]+)", lines)
    if rows == 0:
        return failed("nccom-test", "no result rows in the nccom-test output")
    # nccom-test runs with FI_PROVIDER=efa exported: libfabric then offers no other provider.
    return _summary("nccom-test", peak, avg, line_rate_gbps, rows=rows, provider="efa")


def _bytes(token: str) -> int | None:
    match = _SIZE.match(token.lower())
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def parse_fi_pingpong(text: str, line_rate_gbps: float = 0, provider: str = "efa") -> dict[str, Any]:
    """fi_pingpong table: peak MB/sec (as GB/s) and the latency of the smallest message; `provider`
    is the one it was run with (``-p``)."""
    rows: list[tuple[int, float, float]] = []
    for line in _lines(text):
        tok = line.split()
        if len(tok) != 8 or tok[0] == "bytes":
            continue
        size, mbps, usec = _bytes(tok[0]), _float(tok[5]), _float(tok[6])
        if size is not None and mbps is not None and usec is not None:
            rows.append((size, mbps, usec))
    if not rows:
        return failed("fi_pingpong", "no result rows in the fi_pingpong output")
    peak = max(r[1] for r in rows) / 1000
    smallest = min(rows)
    return _summary(
        "fi_pingpong",
        peak,
        None,
        line_rate_gbps,
        rows=len(rows),
        provider=provider,
        latency_us=smallest[2],
        latency_bytes=smallest[0],
    )


def parse_hccl_demo(text: str, line_rate_gbps: float = 0) -> dict[str, Any]:
    """run_hccl_demo.py output (HabanaAI/hccl_demo README, "Results"): the "[BENCHMARK] NW Bandwidth :
    X GB/s" and "Algo Bandwidth" lines of the all_reduce run; NW bandwidth is the bus figure."""
    nw = [float(m.group(1)) for m in re.finditer(r"NW Bandwidth\s*:\s*([0-9.]+)\s*GB/s", text)]
    algo = [float(m.group(1)) for m in re.finditer(r"Algo Bandwidth\s*:\s*([0-9.]+)\s*GB/s", text)]
    if not nw:
        return failed("hccl_demo", "no [BENCHMARK] NW Bandwidth line in the hccl_demo output")
    return _summary("hccl_demo", max(nw), None, line_rate_gbps, algo_gbytes_s=max(algo) if algo else None)


PARSERS = {
    "nccl-tests": parse_nccl_tests,
    "nccom-test": parse_nccom_test,
    "fi_pingpong": parse_fi_pingpong,
    "hccl_demo": parse_hccl_demo,
}


def signal_body(results: list[dict[str, Any]], *, strict: bool = True) -> dict[str, str]:
    """The JSON a wait-condition handle takes.

    Strict: SUCCESS only when every benchmark produced figures. Not strict: a benchmark problem is
    data (``ok: false`` with its reason, and in Reason), and the signal is SUCCESS, so a cluster whose
    every node verified EFA is not rolled back because, say, nccl-tests is missing from its image.
    """
    ok = bool(results) and (all(r.get("ok") for r in results) or not strict)
    data = json.dumps(results, separators=(",", ":"), sort_keys=True)
    if len(data) > MAX_DATA_CHARS:
        data = json.dumps([{k: r[k] for k in SHORT_KEYS if k in r} for r in results])
    bad = "; ".join(f"{r['benchmark']}: {r.get('reason', 'failed')}" for r in results if not r.get("ok"))
    return {
        "Status": "SUCCESS" if ok else "FAILURE",
        "Reason": bad or "benchmarks done",
        "UniqueId": "benchmarks",
        "Data": data,
    }


def metric_data(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CloudWatch ``put-metric-data`` entries for the results that produced figures: peak bus
    bandwidth (GB/s) and its fraction of line rate, per benchmark; the fabric sweep's count of slow
    nodes and its median pair (Gbps)."""
    out = []
    for r in results:
        if r.get("benchmark") == "fabric-sweep" and "slow_nodes" in r:  # the sweep: what it named
            dims = [{"Name": "Benchmark", "Value": "fabric-sweep"}]
            out.append(
                {
                    "MetricName": "FabricSweepSlowNodes",
                    "Dimensions": dims,
                    "Value": len(r["slow_nodes"]),
                    "Unit": "Count",
                }
            )
            out.append(
                {
                    "MetricName": "FabricSweepMedianGbps",
                    "Dimensions": dims,
                    "Value": r["median_gbps"],
                    "Unit": "None",
                }
            )
        if r.get("benchmark") == "lustre" and r.get("ok"):  # the storage benchmark's aggregates
            dims = [{"Name": "Benchmark", "Value": "lustre"}]
            out += [
                {
                    "MetricName": f"Lustre{p.capitalize()}GBps",
                    "Dimensions": dims,
                    "Value": r[f"{p}_gbytes_s"],
                    "Unit": "None",
                }
                for p in ("write", "read")
            ]
        if not r.get("ok") or "peak_gbytes_s" not in r:
            continue
        dims = [{"Name": "Benchmark", "Value": r["benchmark"]}]
        out.append(
            {
                "MetricName": "BenchmarkPeakGBps",
                "Dimensions": dims,
                "Value": r["peak_gbytes_s"],
                "Unit": "None",
            }
        )
        if r.get("line_rate_fraction") is not None:
            out.append(
                {
                    "MetricName": "BenchmarkLineRateFraction",
                    "Dimensions": dims,
                    "Value": r["line_rate_fraction"],
                    "Unit": "None",
                }
            )
    return out


def _result_file(path: str) -> dict[str, Any]:
    """One benchmark's result file, or a failed result naming it when the parser left it empty or
    unreadable (a parser that crashed): the wait condition still gets an answer, never a traceback."""
    name = os.path.basename(path).removesuffix(".json")
    try:
        with open(path, encoding="utf-8") as fh:
            result = json.load(fh)
    except (OSError, ValueError) as err:
        return failed(name, f"no readable result ({type(err).__name__}: the parser wrote nothing usable)")
    if not isinstance(result, dict) or "benchmark" not in result or "ok" not in result:
        return failed(name, "no readable result (not a benchmark result object)")
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: parse one log, or build the signal body from result files."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kind", choices=[*PARSERS, "signal-body", "metric-data"])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--line-rate-gbps", type=float, default=0)
    parser.add_argument("--provider", default="efa", help="fi_pingpong: the provider it ran with")
    parser.add_argument("--image", help="the container image the benchmark ran in (recorded in the result)")
    parser.add_argument(
        "--not-strict", action="store_true", help="signal-body: report benchmark problems as data (SUCCESS)"
    )
    args = parser.parse_args(argv)
    if args.kind in ("signal-body", "metric-data"):
        results = [_result_file(path) for path in args.files]
        body = (
            signal_body(results, strict=not args.not_strict)
            if args.kind == "signal-body"
            else metric_data(results)
        )
        print(json.dumps(body))
        return 0
    with open(args.files[0], encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if args.kind == "fi_pingpong":
        result = parse_fi_pingpong(text, args.line_rate_gbps, args.provider)
    else:
        result = PARSERS[args.kind](text, args.line_rate_gbps)
    if args.image:
        result["image"] = args.image
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
