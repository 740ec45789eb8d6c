"""What a cluster is watched with after day one: the CloudWatch agent's configuration, the metrics
the node software publishes, and the dashboard's widgets. Pure Python (JSON documents); the
constructs in :mod:`efa_constructs.cdk.monitoring` put them in the template.

Sources:

* EFA metrics: Amazon CloudWatch user guide, "Collect EFA metrics" (CloudWatch-Agent-EFA): the
  agent's ``efa`` section under ``metrics_collected``; metric names ``efa_*`` below, reported as
  deltas, with the dimensions ``device``, ``port`` and ``eniId``.
* NVIDIA GPU metrics: Amazon CloudWatch user guide, "Collect NVIDIA GPU metrics": the agent's
  ``nvidia_gpu`` section; a measurement ``utilization_gpu`` is emitted as ``nvidia_smi_utilization_gpu``.
* The agent's configuration file: "Manually create or edit the CloudWatch agent configuration file"
  (``append_dimensions`` with ``${aws:InstanceId}``, ``aggregation_dimensions``, ``namespace``).
"""

from __future__ import annotations

from typing import Any

from .catalogue import AcceleratorKind

#: How often each node re-runs its health check by default (minutes): the leader's fabric sweep on a
#: schedule runs at these ticks.
HEALTH_MINUTES = 5

#: Every metric the agent's ``efa`` section emits (CloudWatch user guide, "Collect EFA metrics").
EFA_METRICS = (
    "efa_tx_bytes",
    "efa_rx_bytes",
    "efa_tx_pkts",
    "efa_rx_pkts",
    "efa_rx_dropped",
    "efa_send_bytes",
    "efa_send_wrs",
    "efa_recv_bytes",
    "efa_recv_wrs",
    "efa_rdma_read_bytes",
    "efa_rdma_read_resp_bytes",
    "efa_rdma_read_wrs",
    "efa_rdma_read_wr_err",
    "efa_rdma_write_bytes",
    "efa_rdma_write_recv_bytes",
    "efa_rdma_write_wrs",
    "efa_rdma_write_wr_err",
    "efa_retrans_bytes",
    "efa_retrans_pkts",
    "efa_retrans_timeout_events",
    "efa_impaired_remote_conn_events",
    "efa_unresponsive_remote_events",
)
#: The grey-failure counters: a link that works but badly. Any of them above zero is worth a look.
GREY_FAILURE_METRICS = (
    "efa_retrans_timeout_events",
    "efa_unresponsive_remote_events",
    "efa_impaired_remote_conn_events",
    "efa_rx_dropped",
)
#: NVIDIA GPU measurements collected where the node has NVIDIA GPUs (cheap: the agent runs nvidia-smi).
NVIDIA_MEASUREMENTS = (
    "utilization_gpu",
    "utilization_memory",
    "memory_used",
    "temperature_gpu",
    "power_draw",
)
#: What the node software itself publishes (health-check.sh, benchmarks.sh: put-metric-data).
HEALTH_METRIC = "EfaHealthy"  # 1 healthy, 0 not; dimension InstanceId
UNHEALTHY_METRIC = "EfaUnhealthyNodes"  # 1 per failing check, no dimension: the Sum is the count
#: 1 when an Auto Scaling node that should be replaced is held back by the group's replacement limit.
HELD_BACK_METRIC = "EfaReplacementsHeldBack"
BENCHMARK_METRICS = ("BenchmarkPeakGBps", "BenchmarkLineRateFraction")  # dimension Benchmark
#: The devices' problems at each check, per mend they ask for (dimension Mend: watch, reset, reboot,
#: replace; node/boot/mend.sh).
DEVICE_FAULT_METRIC = "EfaDeviceFaults"
#: The tag a node keeps on its own instance while a device of it is at fault: the fault, its reading and the
#: mend taken or pending (node/boot/mend.sh); ``efa-cdk status`` shows it.
DEVICE_FAULT_TAG = "efa-cdk:device-fault"
NODE_METRICS = (HEALTH_METRIC, UNHEALTHY_METRIC, HELD_BACK_METRIC, *BENCHMARK_METRICS, DEVICE_FAULT_METRIC)


def emitted_metrics(accelerator: AcceleratorKind) -> frozenset[str]:
    """Every metric name that lands in the cluster's namespace for nodes with this accelerator."""
    gpu = (
        {f"nvidia_smi_{m}" for m in NVIDIA_MEASUREMENTS}
        if accelerator is AcceleratorKind.NVIDIA_GPU
        else set()
    )
    return frozenset({*EFA_METRICS, *NODE_METRICS, *gpu})


def agent_config(namespace: str, log_group: str, accelerator: AcceleratorKind) -> dict[str, Any]:
    """The CloudWatch agent's configuration: EFA counters per node and for the whole cluster (the
    ``InstanceId`` and empty aggregations), GPU figures on NVIDIA nodes, and the node software's logs."""
    collected: dict[str, Any] = {"efa": {"measurement": list(EFA_METRICS), "metrics_collection_interval": 60}}
    if accelerator is AcceleratorKind.NVIDIA_GPU:
        collected["nvidia_gpu"] = {
            "measurement": list(NVIDIA_MEASUREMENTS),
            "metrics_collection_interval": 60,
        }
    files = [
        {"file_path": path, "log_group_name": log_group, "log_stream_name": f"{{instance_id}}/{name}"}
        for path, name in (
            ("/var/log/efa-cdk.log", "boot"),
            ("/var/log/efa-cdk-health.log", "health"),
            ("/var/log/efa-cdk-devices.log", "devices"),  # the devices' mends (mend.sh)
        )
    ]
    return {
        "agent": {"metrics_collection_interval": 60, "run_as_user": "root"},
        "metrics": {
            "namespace": namespace,
            "append_dimensions": {"InstanceId": "${aws:InstanceId}"},
            "aggregation_dimensions": [["InstanceId"], []],
            "metrics_collected": collected,
        },
        "logs": {"logs_collected": {"files": {"collect_list": files}}},
    }


def _search(namespace: str, dims: str, metric: str, stat: str) -> str:
    return f"SEARCH('{{\"{namespace}\",{dims}}} MetricName=\"{metric}\"', '{stat}', 60)"


def _graph(
    title: str, x: int, y: int, expressions: list[tuple[str, str]], region: str, **extra: Any
) -> dict[str, Any]:
    metrics = [[{"expression": e, "label": label, "id": f"e{i}"}] for i, (e, label) in enumerate(expressions)]
    return {
        "type": "metric",
        "x": x,
        "y": y,
        "width": 12,
        "height": 6,
        "properties": {"title": title, "region": region, "view": "timeSeries", "metrics": metrics, **extra},
    }


def _heading(cluster: str) -> dict[str, Any]:
    """The dashboard's first row: what it shows and where each figure comes from."""
    markdown = (
        f"## EFA cluster {cluster}\nThroughput and errors from the CloudWatch agent's `efa` metrics; "
        "health from each node's timer; benchmarks from the leader (on demand: the BenchmarkDocument output)."
    )
    return {"type": "text", "x": 0, "y": 0, "width": 24, "height": 2, "properties": {"markdown": markdown}}


def dashboard_body(namespace: str, region: str, cluster: str) -> dict[str, Any]:
    """The cluster's dashboard (CloudWatch dashboard body structure): throughput per node, the
    grey-failure counters, node health and the benchmark figures against line rate."""
    per_node = "InstanceId"
    widgets = [
        _heading(cluster),
        _graph(
            "EFA throughput per node (bytes/min, rx + tx)",
            0,
            2,
            [
                (_search(namespace, per_node, "efa_rx_bytes", "Sum"), "rx"),
                (_search(namespace, per_node, "efa_tx_bytes", "Sum"), "tx"),
            ],
            region,
        ),
        _graph(
            "RDMA bytes per node (read, write)",
            12,
            2,
            [
                (_search(namespace, per_node, "efa_rdma_read_bytes", "Sum"), "read"),
                (_search(namespace, per_node, "efa_rdma_write_bytes", "Sum"), "write"),
            ],
            region,
        ),
        _graph(
            "Grey failures, whole cluster (any above 0 deserves a look)",
            0,
            8,
            [
                (f"SEARCH('{{\"{namespace}\"}} MetricName=\"{m}\"', 'Sum', 60)", m)
                for m in GREY_FAILURE_METRICS
            ],
            region,
        ),
        _graph(
            "Node health (1 healthy; unhealthy nodes)",
            12,
            8,
            [
                (_search(namespace, per_node, HEALTH_METRIC, "Minimum"), "healthy"),
                (f"SEARCH('{{\"{namespace}\"}} MetricName=\"{UNHEALTHY_METRIC}\"', 'Sum', 300)", "unhealthy"),
            ],
            region,
        ),
        *_benchmark_and_device_widgets(namespace, region),
    ]
    return {"widgets": widgets}


def _benchmark_and_device_widgets(namespace: str, region: str) -> list[dict[str, Any]]:
    """The dashboard's lower rows: the benchmarks against line rate, and the devices' faults by mend."""
    return [
        _graph(
            "Benchmarks: peak bus bandwidth as a fraction of line rate",
            0,
            14,
            [(_search(namespace, "Benchmark", "BenchmarkLineRateFraction", "Maximum"), "fraction")],
            region,
            yAxis={"left": {"min": 0, "max": 1}},
        ),
        _graph(
            "Benchmarks: peak bus bandwidth (GB/s)",
            12,
            14,
            [(_search(namespace, "Benchmark", "BenchmarkPeakGBps", "Maximum"), "GB/s")],
            region,
        ),
        _graph(
            "Device faults by the mend they ask for (reset, reboot, replace; watch: counted only)",
            0,
            20,
            [(_search(namespace, "Mend", DEVICE_FAULT_METRIC, "Sum"), "faults")],
            region,
        ),
    ]


def dashboard_svg(body: dict[str, Any]) -> str:
    """A picture of the dashboard's layout (24-column grid), drawn from its body: for docs/operate.md."""
    unit_x, unit_y = 40, 30
    height = max(w["y"] + w["height"] for w in body["widgets"]) * unit_y
    svg = 'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="13"'
    parts = [f'<svg {svg} width="{24 * unit_x}" height="{height}">']
    for w in body["widgets"]:
        x, y, wd, ht = w["x"] * unit_x, w["y"] * unit_y, w["width"] * unit_x, w["height"] * unit_y
        title = w["properties"].get("title") or w["properties"]["markdown"].splitlines()[0].lstrip("# ")
        fill = "#eef3f8" if w["type"] == "metric" else "#f7f7f7"
        parts.append(
            f'<rect x="{x + 2}" y="{y + 2}" width="{wd - 4}" height="{ht - 4}" fill="{fill}" stroke="#557"/>'
        )
        parts.append(f'<text x="{x + 10}" y="{y + 22}">{_xml(title)}</text>')
        for i, m in enumerate(w["properties"].get("metrics", [])):
            line = f"{m[0]['label']}: {_metric_of(m[0]['expression'])}"
            parts.append(f'<text x="{x + 16}" y="{y + 46 + 18 * i}" fill="#335">{_xml(line)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _metric_of(expression: str) -> str:
    return expression.split('MetricName="', 1)[1].split('"', 1)[0]


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
