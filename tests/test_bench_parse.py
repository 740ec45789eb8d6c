"""The benchmark parsers the leader runs, on real tool output (tests/fixtures/benchmarks/README.md).

What this proves: the figures reported to the stack outputs are the ones a person reading the
same logs would quote, and broken runs (sockets instead of EFA, wrong values, no table) are
reported as failures instead of as numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.node import bench_parse

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
SCRIPT = Path(bench_parse.__file__)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_nccl_tests_on_two_p4d() -> None:
    r = bench_parse.parse_nccl_tests(fixture("nccl-tests-2x-p4d.txt"), line_rate_gbps=400)
    assert r == {
        "benchmark": "nccl-tests",
        "ok": True,
        "peak_gbytes_s": 32.84,  # in-place busbw at 1 GiB, the largest figure in the table
        "avg_gbytes_s": 7.80,
        "line_rate_fraction": round(32.84 * 8 / 400, 3),
        "rows": 28,
        "provider": "efa",
    }


def test_nccl_tests_over_sockets_is_a_failure() -> None:
    text = fixture("nccl-tests-2x-p4d.txt").replace("NET/OFI Selected Provider is efa", "NET/Socket : Using")
    r = bench_parse.parse_nccl_tests(text)
    assert r["ok"] is False
    assert "not efa" in r["reason"] and "sockets" in r["reason"]


def test_nccl_tests_with_another_provider_is_a_failure() -> None:
    text = fixture("nccl-tests-2x-p4d.txt").replace("Selected Provider is efa", "Selected Provider is tcp", 1)
    assert "efa, tcp" in bench_parse.parse_nccl_tests(text)["reason"]


def test_nccl_tests_with_wrong_values_is_a_failure() -> None:
    text = fixture("nccl-tests-2x-p4d.txt").replace(
        "Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED"
    )
    assert bench_parse.parse_nccl_tests(text) == {
        "benchmark": "nccl-tests",
        "ok": False,
        "reason": "all_reduce_perf reported wrong values",
    }


def test_nccl_tests_newer_root_column() -> None:
    """nccl-tests >= 2.13 prints a `root` column (-1 for all-reduce) and `#wrong` counts."""
    rows = "\n".join(
        [
            "NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)",
            "  1048576   262144  float  sum  -1   303.15  3.46  6.49  0   301.20  3.48  6.53  0",
            "  2097152   524288  float  sum  -1   410.00  5.11  9.59  0   409.00  5.13  9.61  0",
            "# Avg bus bandwidth    : 8.05",
        ]
    )
    r = bench_parse.parse_nccl_tests(rows)
    assert (r["ok"], r["peak_gbytes_s"], r["rows"], r["avg_gbytes_s"]) == (True, 9.61, 2, 8.05)


def test_nccom_test_on_two_trainium_instances() -> None:
    r = bench_parse.parse_nccom_test(fixture("nccom-test-2x-trn1.txt"), line_rate_gbps=800)
    assert (r["ok"], r["peak_gbytes_s"], r["avg_gbytes_s"], r["rows"]) == (True, 47.09, 9.39, 28)
    assert r["line_rate_fraction"] == round(47.09 * 8 / 800, 3)


def test_fi_pingpong_table() -> None:
    r = bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt"), line_rate_gbps=100)
    assert r == {
        "benchmark": "fi_pingpong",
        "ok": True,
        "peak_gbytes_s": 2.36,  # 2359.00 MB/sec at 1 MiB messages
        "line_rate_fraction": round(2.359 * 8 / 100, 3),
        "rows": 6,
        "provider": "efa",
        "latency_us": 1362.35,
        "latency_bytes": 64,
    }


@pytest.mark.parametrize(
    "parser", [bench_parse.parse_nccl_tests, bench_parse.parse_nccom_test, bench_parse.parse_fi_pingpong]
)
def test_an_error_message_is_not_a_result(parser: object) -> None:
    r = parser("fi_getinfo(): -61 (No data available)\n")  # type: ignore[operator]
    assert r["ok"] is False and "no result rows" in r["reason"]


def test_signal_body_success_and_failure() -> None:
    good = bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt"))
    body = bench_parse.signal_body([good])
    assert body["Status"] == "SUCCESS" and body["UniqueId"] == "benchmarks"
    assert json.loads(body["Data"]) == [good]
    bad = bench_parse.failed("nccl-tests", "all_reduce_perf not found")
    body = bench_parse.signal_body([good, bad])
    assert body["Status"] == "FAILURE"
    assert body["Reason"] == "nccl-tests: all_reduce_perf not found"
    assert bench_parse.signal_body([])["Status"] == "FAILURE"
    relaxed = bench_parse.signal_body([good, bad], strict=False)  # the problem is data, the stack stays
    assert relaxed["Status"] == "SUCCESS" and relaxed["Reason"] == "nccl-tests: all_reduce_perf not found"
    assert json.loads(relaxed["Data"])[1] == bad


def test_signal_body_stays_small() -> None:
    """The project's budget for a wait condition's data is 1,024 characters (written here, not read from
    the module: a changed constant must fail this test). A normal report fits whole; a large one keeps
    the figures only."""
    huge = [{"benchmark": "x" * 50, "ok": True, "peak_gbytes_s": 1.0, "extra": "y" * 2000}]
    data = bench_parse.signal_body(huge)["Data"]
    assert len(data) <= 1024 and json.loads(data) == [
        {"benchmark": "x" * 50, "ok": True, "peak_gbytes_s": 1.0}
    ]
    normal = [{"benchmark": "nccl-tests", "ok": True, "peak_gbytes_s": 32.84, "rows": 28, "provider": "efa"}]
    assert json.loads(bench_parse.signal_body(normal)["Data"]) == normal


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_command_line_as_the_node_runs_it(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "nccom-test",
            str(FIXTURES / "nccom-test-2x-trn1.txt"),
            "--line-rate-gbps",
            "800",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(run.stdout)
    assert result["peak_gbytes_s"] == 47.09
    (tmp_path / "r.json").write_text(run.stdout)
    body = subprocess.run(
        [sys.executable, str(SCRIPT), "signal-body", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(body.stdout)["Status"] == "SUCCESS"
    failed = subprocess.run(
        [sys.executable, str(SCRIPT), "fi_pingpong", str(FIXTURES / "nccom-test-2x-trn1.txt")],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1 and json.loads(failed.stdout)["ok"] is False


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
@pytest.mark.parametrize("content", ["", "{not json", '["a list"]'])
def test_an_empty_or_unreadable_result_file_is_a_failed_benchmark_not_a_traceback(
    tmp_path: Path, content: str
) -> None:
    """Issue 41 item 18 (an empty file): a parser that crashed leaves its result file empty; the signal
    body still answers (the stack's wait condition waits otherwise), naming that benchmark, and the
    metric data skips it. Run as the node runs it, through the command line."""
    good = tmp_path / "fi_pingpong.json"
    good.write_text(json.dumps(bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt"))))
    (tmp_path / "nccl-tests.json").write_text(content)
    files = [str(good), str(tmp_path / "nccl-tests.json")]

    def run(*args: str) -> Any:
        done = subprocess.run([sys.executable, str(SCRIPT), *args, *files], capture_output=True, text=True)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return json.loads(done.stdout)

    strict = run("signal-body")
    assert strict["Status"] == "FAILURE" and strict["Reason"].startswith("nccl-tests: no readable result")
    relaxed = run("signal-body", "--not-strict")
    assert relaxed["Status"] == "SUCCESS" and [r["ok"] for r in json.loads(relaxed["Data"])] == [True, False]
    metrics = run("metric-data")  # the good result's figures only
    assert {m["Dimensions"][0]["Value"] for m in metrics} == {"fi_pingpong"}


def test_hccl_demo_reads_the_nw_bandwidth_line() -> None:
    from efa_constructs.node.bench_parse import parse_hccl_demo

    text = (Path(__file__).parent / "fixtures" / "benchmarks" / "hccl_demo-2x-dl1.txt").read_text()
    result = parse_hccl_demo(text, line_rate_gbps=400)
    assert (
        result["ok"]
        and result["peak_gbytes_s"] == 21.73
        and result["line_rate_fraction"] == round(21.73 * 8 / 400, 3)
    )
    assert parse_hccl_demo("hcclAllReduce failed")["ok"] is False


# Issue 60 (mutants that outlived the tests): each test below failed against one surviving mutant.


@pytest.mark.parametrize("size, expected", [("1.5k", 1536), ("2m", 2 << 20), ("1g", 1 << 30), ("3", 3)])
def test_fi_pingpong_sizes_read_as_fabtests_prints_them(size: str, expected: int) -> None:
    """fabtests prints a size with size_str() (libfabric fabtests/common/shared.c): k = 1 << 10,
    m = 1 << 20, g = 1 << 30, one decimal below 10 ("1.5k", one of its test_size entries)."""
    row = f"{size:<7} 10      =10      1.2k        0.03s      0.05    1362.35       0.00\n"
    r = bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt").splitlines()[0] + "\n" + row)
    assert r["latency_bytes"] == expected


def test_a_truncated_nccl_row_is_not_a_result() -> None:
    """A row cut short (a job killed mid-line) starts with two numbers like a result row; it is skipped,
    not read past its end."""
    whole = bench_parse.parse_nccl_tests(fixture("nccl-tests-2x-p4d.txt"), line_rate_gbps=400)
    cut = fixture("nccl-tests-2x-p4d.txt") + "\n   2147483648     536870912     float     sum      -1\n"
    assert bench_parse.parse_nccl_tests(cut, line_rate_gbps=400) == whole


def test_no_line_rate_given_means_no_fraction_claimed() -> None:
    assert "line_rate_fraction" not in bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt"))
    assert "line_rate_fraction" not in bench_parse.parse_nccl_tests(fixture("nccl-tests-2x-p4d.txt"))


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_command_line_parses_hccl_demo_as_a_dl1_node_runs_it() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "hccl_demo", str(FIXTURES / "hccl_demo-2x-dl1.txt"), "--line-rate-gbps",
         "400"], capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["peak_gbytes_s"] == 21.73


def test_an_all_good_signal_says_benchmarks_done() -> None:
    good = bench_parse.parse_fi_pingpong(fixture("fi_pingpong-efa.txt"))
    assert bench_parse.signal_body([good])["Reason"] == "benchmarks done"


def test_metric_data_is_what_the_dashboard_searches_for() -> None:
    """Every entry carries the one dimension the dashboard's SEARCH schema names ({namespace,Benchmark},
    core/monitoring.py: a metric with other dimensions is not found) and a unit from CloudWatch's
    StandardUnit enum (botocore's cloudwatch model): Count for a count, None for GB/s and fractions."""
    import botocore.session

    sweep = {"benchmark": "fabric-sweep", "ok": False, "slow_nodes": ["ip-10-0-0-7"], "median_gbps": 180.5}
    lustre = {"benchmark": "lustre", "ok": True, "write_gbytes_s": 9.5, "read_gbytes_s": 12.25}
    nccl = {"benchmark": "nccl-tests", "ok": True, "peak_gbytes_s": 32.84, "line_rate_fraction": 0.657}

    def entry(metric: str, benchmark: str, value: float, unit: str = "None") -> dict[str, Any]:
        return {"MetricName": metric, "Dimensions": [{"Name": "Benchmark", "Value": benchmark}],
                "Value": value, "Unit": unit}  # fmt: skip

    assert bench_parse.metric_data([sweep, lustre, nccl]) == [
        entry("FabricSweepSlowNodes", "fabric-sweep", 1, "Count"),
        entry("FabricSweepMedianGbps", "fabric-sweep", 180.5),
        entry("LustreWriteGBps", "lustre", 9.5),
        entry("LustreReadGBps", "lustre", 12.25),
        entry("BenchmarkPeakGBps", "nccl-tests", 32.84),
        entry("BenchmarkLineRateFraction", "nccl-tests", 0.657),
    ]
    model = botocore.session.get_session().get_service_model("cloudwatch")
    units = set(model.shape_for("StandardUnit").enum)
    assert {m["Unit"] for m in bench_parse.metric_data([sweep, lustre, nccl])} <= units
