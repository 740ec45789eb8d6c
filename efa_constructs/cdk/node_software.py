"""`NodeSoftwareInstallation` (the node software of a cluster: key, count, scripts, permissions,
user data) and `BenchmarkReport` (the leader's benchmark results, as a wait condition's data)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, CfnOutput, CfnResource, CfnWaitCondition, CfnWaitConditionHandle, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..core.benchmarks import Benchmark
from ..core.settings import NodeEnv
from ..core.software import EfaUserData
from ._shared import NodeScripts
from .acknowledgements import REASONS, acknowledge
from .arguments import checked


class NodeSoftware:
    """What an :class:`EfaCluster`'s nodes run at boot: efa-cdk's node software (the default), your own
    user data, or nothing. One class with factory methods, like aws-cdk-lib's ``ec2.MachineImage``:
    ``NodeSoftware.efa()``, ``NodeSoftware.efa(EfaUserData(benchmarks=[...]))``,
    ``NodeSoftware.custom(user_data)``, ``NodeSoftware.none()``.
    """

    __slots__ = ("_config", "_user_data")

    def __init__(self, config: EfaUserData | None, user_data: ec2.UserData | None) -> None:
        """Use the factory methods."""
        self._config, self._user_data = config, user_data

    @staticmethod
    def efa(config: EfaUserData | None = None) -> NodeSoftware:
        """efa-cdk's node software: install and verify EFA, passwordless SSH, the hostfile, the benchmarks;
        every node signals the stack (``cdk deploy`` fails with the node's reason when EFA does not work).

        Args:
            config: its steps and benchmarks (:class:`EfaUserData`). Default: ``EfaUserData()``.
        """
        return NodeSoftware(config or EfaUserData(), None)

    @staticmethod
    def custom(user_data: ec2.UserData) -> NodeSoftware:
        """Your own user data and nothing of efa-cdk's: no signal (the stack does not wait for the nodes),
        no monitoring, no container step. To add commands to efa-cdk's software instead:
        ``NodeSoftware.efa(EfaUserData().add_commands(...))``."""
        return NodeSoftware(None, user_data)

    @staticmethod
    def none() -> NodeSoftware:
        """An empty user data: the image as it boots."""
        return NodeSoftware(None, None)

    @property
    def config(self) -> EfaUserData | None:
        """efa-cdk's node software, or None."""
        return self._config

    @property
    def user_data(self) -> ec2.UserData | None:
        """Your own user data, or None."""
        return self._user_data

    def __repr__(self) -> str:
        if self._config is not None:
            return "NodeSoftware.efa(...)"
        return "NodeSoftware.custom(...)" if self._user_data is not None else "NodeSoftware.none()"


class BenchmarkReport(Construct):
    """Where the leader reports its benchmarks: a wait-condition handle (``Handle``) and the wait
    condition (``Resource``), which waits for every node resource and then for one signal.

    Args:
        nodes: the resources that launch the nodes (instances or the Auto Scaling group).
        timeout_minutes: how long CloudFormation waits for the report.
    """

    @checked
    def __init__(
        self, scope: Construct, id_: str, *, nodes: Sequence[CfnResource], timeout_minutes: int
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        self.handle = CfnWaitConditionHandle(self, "Handle")
        self.wait_condition = CfnWaitCondition(
            self, "Resource", handle=self.handle.ref, count=1, timeout=str(timeout_minutes * 60)
        )
        for node in nodes:
            self.wait_condition.node.add_dependency(node)

    @property
    def url(self) -> str:
        """The pre-signed URL the leader posts its results to (a token)."""
        return self.handle.ref

    @property
    def results(self) -> str:
        """The report: ``{"benchmarks": "<JSON list of results>"}`` (a token)."""
        return Token.as_string(self.wait_condition.attr_data)

    def add_output(self, scope: Construct, id_: str = "BenchmarkResults") -> CfnOutput:
        """A stack output with the results."""
        output = CfnOutput(
            scope,
            id_,
            value=self.results,
            description="Leader's cross-node benchmarks (JSON; /var/lib/efa-cdk/benchmarks.json on node 0)",
        )
        stack = Stack.of(scope)
        acknowledge(stack, "CloudFormation-Validate::F6101")
        # The same finding in a user's own stock cfn-lint (E6101): outputs carry no metadata, so the
        # suppression is the template's, for that one rule, with its reason next to it.
        stack.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E6101"]}})
        stack.add_metadata("efa-cdk:cfn-lint-E6101", REASONS["CloudFormation-Validate::F6101"])
        return output


class NodeSoftwareInstallation(Construct):
    """The node software of one cluster, wired to its nodes' role and user data.

    Creates the cluster's SSH key pair (``SshKey``; private key in SSM Parameter Store), the
    node-count parameter the nodes read (``NodeCount``: no launch template depends on the count), the
    parameter the leader marks its generation formed in (``Formed``: later nodes of that generation join
    the hostfiles), the newest generation's benchmark results (``Results``),
    the scripts asset (``Scripts``), the role's permissions for them, and renders the bootstrap into
    the user data. The builder is staged here: steps added to it afterwards raise.

    Args:
        software: the node software (:class:`EfaUserData`).
        settings: the node's settings (``EFA_CDK_*``) from its type, layout and cluster.
        role: the nodes' role. user_data: the nodes' user data (commands are added to it).
        node_count: the cluster size. parameter_path: the SSM path prefix for the count.
        benchmarks: the benchmarks the leader runs. benchmark_url: where it reports them.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        software: EfaUserData,
        settings: NodeEnv,
        role: iam.IRole,
        user_data: ec2.UserData,
        node_count: int,
        parameter_path: str,
        benchmarks: Sequence[Benchmark],
        benchmark_url: str | None,
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        self.ssh_key = ec2.KeyPair(self, "SshKey", type=ec2.KeyPairType.ED25519)
        cluster = scope.node.path

        def parameter(id_: str, name: str, value: str, description: str) -> ssm.StringParameter:
            return ssm.StringParameter(
                self,
                id_,
                parameter_name=f"{parameter_path}/{name}",
                simple_name=False,
                string_value=value,
                description=description,
            )

        self.node_count_parameter = parameter(
            "NodeCount",
            "node-count",
            str(node_count),
            f"Number of nodes in EFA cluster {cluster} (read by the nodes at boot)",
        )
        # The generation of nodes that formed (node/boot/hostfile.sh), once its leader has given every
        # node its hostfile: a node of that generation that boots later (a replacement, a scale-out)
        # joins; a new generation (a new launch template, a new Auto Scaling group) forms anew.
        self.formed_parameter = parameter(
            "Formed", "formed", "no", f"The generation of EFA cluster {cluster}'s nodes that formed"
        )
        # The leader's benchmark results of the newest generation (the BenchmarkResults output is the
        # creation's): written by the node, read by `efa-cdk status`.
        self.results_parameter = parameter(
            "Results",
            "benchmark-results",
            "none",
            f"Benchmark results of EFA cluster {cluster}'s newest generation (JSON)",
        )
        scripts = NodeScripts(self, "Scripts", software.stage())
        self._grant(role, scripts)
        node_settings: NodeEnv = {
            **settings,
            "EFA_CDK_KEY_PAIR_ID": self.ssh_key.key_pair_id,
            "EFA_CDK_NODE_COUNT_PARAMETER": self.node_count_parameter.parameter_name,
            "EFA_CDK_FORMED_PARAMETER": self.formed_parameter.parameter_name,
            "EFA_CDK_RESULTS_PARAMETER": self.results_parameter.parameter_name,
        }
        if benchmark_url is not None:
            node_settings["EFA_CDK_BENCHMARK_URL"] = benchmark_url
        script = software.render(node_settings, scripts_s3_url=scripts.url, benchmarks=benchmarks)
        user_data.add_commands(script.split("\n", 1)[1])  # for_linux() writes the #! line

    def _grant(self, role: iam.IRole, scripts: NodeScripts) -> None:
        """What the node software does with the nodes' role: read the SSH key and the cluster's
        parameters (the newest results too: the fabric sweep's verdict), write the formed generation and
        results, read the scripts, signal the stack, and describe instances and their topology
        (read-only, no resource)."""
        stack = Stack.of(self)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EfaNodeSoftware",
                actions=["ssm:GetParameter"],
                resources=[
                    stack.format_arn(
                        service="ssm",
                        resource="parameter",
                        resource_name=f"ec2/keypair/{self.ssh_key.key_pair_id}",
                    ),
                    self.node_count_parameter.parameter_arn,
                    self.formed_parameter.parameter_arn,
                    # the health check reads whether the leader's newest fabric sweep named its node
                    self.results_parameter.parameter_arn,
                ],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EfaClusterFormed",
                actions=["ssm:PutParameter"],
                resources=[self.formed_parameter.parameter_arn, self.results_parameter.parameter_arn],
            )
        )
        scripts.grant_read(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["cloudformation:SignalResource"], resources=[Aws.STACK_ID])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"], resources=["*"]
            )
        )
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]")
