"""Synthesis cost: whole processes first, then by cluster size and node-group mode.

Run with `scripts/bench-synth` (a benchmark that prints figures, not a test).

1. Whole processes, each run RUNS times and reported as the median wall time (perf_counter around
   subprocess.run): `import aws_cdk` alone, `import aws_cdk` plus the project (app.py's imports),
   the whole app (`python app.py`, all ready stacks), and the floor: a one-resource CDK app (one SQS
   queue). The ratio whole app / floor is the figure to watch.
2. The catalogue lookups the app makes while it builds its stacks (cProfile's call count).
3. In one Python process, so the CDK's Node process starts once ("Node start"); the empty app's
   synth is the floor every stack pays. Each configuration synthesizes a fresh App holding one ready
   stack (Trn1EfaCluster's trn1.32xlarge, default node software), timed with perf_counter.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

SIZES = (2, 16, 128, 1024)
MODES = ("explicit", "asg")
RUNS = 5
ROOT = Path(__file__).resolve().parent.parent
FLOOR_APP = """
import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
app = cdk.App()
sqs.Queue(cdk.Stack(app, "Floor"), "Queue")
app.synth()
"""


def median_wall(command: list[str], **extra: str) -> float:
    """Median wall time of RUNS runs of `command` (after one warm-up run), in seconds.

    With cdk.json's context passed as the CDK CLI passes it (CDK_CONTEXT_JSON), so the feature flags
    (and the resources they add) are those of `cdk synth`; `extra` is added to the environment.
    """
    times = []
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "CDK_OUTDIR": out, "CDK_CONTEXT_JSON": json.dumps(context), **extra}
        for i in range(RUNS + 1):
            t0 = time.perf_counter()
            subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
            if i:
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def processes() -> None:
    py = sys.executable
    cdk_only = median_wall([py, "-c", "import aws_cdk"])
    project = median_wall([py, "-c", "import aws_cdk, app"])
    whole = median_wall([py, "app.py"])
    # aws-cdk-lib's built-in CloudFormation validation (2.270 and later; the tests turn it off, see
    # tests/conftest.py): its engine starts in every process, then checks each template
    unchecked = median_wall([py, "app.py"], CDK_VALIDATION="false")
    floor = median_wall([py, "-c", FLOOR_APP])
    print(f"Whole processes, median of {RUNS} runs (wall s):")
    print(
        f"  import aws_cdk {cdk_only:.2f}; + the project's imports {project:.2f} (+{project - cdk_only:.2f})"
    )
    print(
        f"  whole app (every ready stack) {whole:.2f}; one-resource app (floor) {floor:.2f}; "
        f"ratio {whole / floor:.2f}x"
    )
    print(f"  whole app without aws-cdk-lib's built-in validation (CDK_VALIDATION=false) {unchecked:.2f}")


def lookups() -> None:
    """How often the catalogue is read (``core.catalogue.instance_type`` calls, counted by cProfile) while
    the app builds its ready stacks: each orchestrator resolves its node once (issue 36)."""
    import cProfile
    import pstats

    import aws_cdk as cdk

    import app as ready_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as out:
        built = cdk.App(outdir=out, context=context)
        profile.enable()
        ready_app.build(built)
        profile.disable()
    calls = sum(
        counts[1]
        for (path, _, name), counts in pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
        if path.endswith(str(Path("core", "catalogue", "__init__.py"))) and name == "instance_type"
    )
    stacks = sum(isinstance(c, cdk.Stack) for c in built.node.children)
    print(f"Catalogue lookups building the app's {stacks} ready stacks: {calls}")


def main() -> None:
    start = time.perf_counter()
    import aws_cdk as cdk

    node_start = time.perf_counter() - start
    from efa_constructs.core.errors import EfaConfigError
    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    context = json.loads((Path(__file__).resolve().parent.parent / "cdk.json").read_text())["context"]

    def timed(build: Any) -> tuple[float, dict[str, Any] | None, int]:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            app = cdk.App(outdir=out, context=context)
            name = build(app)
            assembly = app.synth()
            elapsed = time.perf_counter() - t0
            if name is None:
                return elapsed, None, 0
            path = Path(assembly.get_stack_by_name(name).template_full_path)
            return elapsed, json.loads(path.read_text()), path.stat().st_size

    def cluster(n: int, mode: str) -> Any:
        def build(app: Any) -> str:
            params = ClusterParams.from_context(
                {"node_count": str(n), "node_group": mode, "availability_zone": "us-east-1a"},
                default_instance_type="trn1.32xlarge",
            )
            return str(EfaClusterStack(app, "Trn1EfaCluster", params=params).stack_name)

        return build

    # Warm-up, not reported: the first use of each jsii module loads it into the Node process.
    for mode in MODES:
        timed(cluster(2, mode))
    floor, _, _ = timed(lambda app: None)
    print(f"Node start (import aws_cdk): {node_start:.2f} s; empty app synth (floor): {floor:.3f} s")
    print(f"{'mode':<9} {'nodes':>5} {'synth s':>8} {'resources':>9} {'template bytes':>14}")
    for mode in MODES:
        for n in SIZES:
            build = cluster(n, mode)

            try:
                elapsed, template, size = timed(build)
            except EfaConfigError as err:
                print(f"{mode:<9} {n:>5} {'refused':>8}  {str(err).split(':')[0]} ({err.why})")
                continue
            assert template is not None
            print(f"{mode:<9} {n:>5} {elapsed:>8.2f} {len(template['Resources']):>9} {size:>14,}")


if __name__ == "__main__":
    processes()
    lookups()
    main()
