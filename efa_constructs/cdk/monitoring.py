"""`EfaClusterMonitoring`: what watches an :class:`EfaCluster` after day one.

The nodes' CloudWatch agent and health timer are node software (``node/boot/monitoring.sh``,
``health-check.sh``); this construct gives them somewhere to report and someone to tell: the log
group and the least privilege they need, one dashboard, alarms on the grey-failure counters and on
failed health checks to an SNS topic, and an SSM document that re-runs the benchmarks on demand.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..core.catalogue import AcceleratorKind
from ..core.errors import EfaConfigError
from ..core.monitoring import (
    GREY_FAILURE_METRICS,
    HEALTH_MINUTES,
    HELD_BACK_METRIC,
    UNHEALTHY_METRIC,
    agent_config,
    dashboard_body,
)
from ..core.options import check_email
from ..core.settings import NodeEnv
from .acknowledgements import acknowledge, nag_resource
from .arguments import checked

#: Fingerprint of the key that signs the CloudWatch agent's packages (CloudWatch user guide,
#: "Verify the signature of the CloudWatch agent package": 9376 16F3 450B 7D80 6CBD 9725 D581 6730 3B78 9C72).
CW_AGENT_FINGERPRINT = "937616F3450B7D806CBD9725D58167303B789C72"
#: The first CloudWatch agent that collects EFA metrics (the `efa` section): 1.300068.0, May 2026 (the
#: agent's release notes). The node step upgrades an older agent the image carries.
CW_AGENT_MIN_VERSION = "1.300068.0"


class EfaClusterMonitoring(Construct):
    """Logs (``Logs``), dashboard (``Dashboard``), alarms (``Alarm-*``) to a topic (``Alarms``,
    encrypted with its own key, ``AlarmKey``), and the on-demand benchmark document
    (``BenchmarkDocument``) of one cluster.

    Args:
        namespace: the cluster's CloudWatch namespace (its metrics only; the nodes may write nowhere else).
        cluster_name: shown on the dashboard.
        accelerator: decides the GPU metrics.
        role: the nodes' role (gets PutMetricData in the namespace and writes to the log group).
        auto_scaling_group: the node group, whose nodes may mark themselves Unhealthy. Default: none.
        alarm_email: an address subscribed to the alarms (it must confirm). Default: none.
        health_minutes: how often each node re-runs the health check. Default: 5.
        unhealthy_after: consecutive failed checks before an Auto Scaling node asks to be replaced (never
            before it was once verified). Default: 3 (15 minutes at the default interval).
        replacement_interval: at most one replacement per group in this time; a node held back by it
            publishes ``EfaReplacementsHeldBack`` (an alarm) and asks again at its next failed check.
            Default: 60 minutes.
        parameter_path: the SSM path under which the group's last replacement is kept
            (``<path>/last-replacement``). Default: a name CloudFormation generates.
        sweep_minutes: the leader's health timer runs the fabric sweep this often (EfaCluster's
            ``sweep_interval``). Default: none.
    """

    @checked
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        namespace: str,
        cluster_name: str,
        accelerator: AcceleratorKind,
        role: iam.IRole,
        auto_scaling_group: autoscaling.CfnAutoScalingGroup | None = None,
        alarm_email: str | None = None,
        health_minutes: int = HEALTH_MINUTES,
        unhealthy_after: int = 3,
        replacement_interval: Duration | None = None,
        parameter_path: str | None = None,
        sweep_minutes: int | None = None,
    ) -> None:
        """Create the construct; the arguments are described in the class docstring."""
        super().__init__(scope, id_)
        if isinstance(unhealthy_after, bool) or not isinstance(unhealthy_after, int) or unhealthy_after < 1:
            raise EfaConfigError(
                "unhealthy_after",
                code="efa-cdk:unhealthy-after-range",
                value=unhealthy_after,
                why="it counts failed health checks in a row: a whole number of at least 1",
                fix="pass e.g. unhealthy_after=3",
            )
        self.namespace = namespace
        #: In an Auto Scaling group: when the group last replaced a node ("<epoch> <instance-id>"), shared
        #: by the nodes so that a systematic fault replaces at most one node per `replacement_interval`.
        self.last_replacement = (
            ssm.StringParameter(
                self,
                "LastReplacement",
                parameter_name=f"{parameter_path}/last-replacement" if parameter_path else None,
                simple_name=False if parameter_path else None,
                string_value="none",
                description=f"efa-cdk: when {scope.node.path}'s Auto Scaling group last replaced a node",
            )
            if auto_scaling_group is not None
            else None
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.RETAIN
        )
        self._grant(role, auto_scaling_group)
        self.topic = self._topic(alarm_email)
        self.alarms = self._alarms(held_back=auto_scaling_group is not None)
        self.dashboard, self.dashboard_url = self._dashboard(namespace, cluster_name)
        self.benchmark_document = self._benchmark_document(namespace)
        #: Settings the node software needs (the monitoring step and the health timer).
        self.settings: NodeEnv = {
            "EFA_CDK_METRICS_NAMESPACE": namespace,
            "EFA_CDK_AGENT_CONFIG": Stack.of(self).to_json_string(
                agent_config(namespace, self.log_group.log_group_name, accelerator)
            ),
            "EFA_CDK_HEALTH_MINUTES": str(health_minutes),
            "EFA_CDK_CW_AGENT_FINGERPRINT": CW_AGENT_FINGERPRINT,
            "EFA_CDK_CW_AGENT_MIN_VERSION": CW_AGENT_MIN_VERSION,
            "EFA_CDK_NODE_GROUP": "asg" if auto_scaling_group is not None else "explicit",
        }
        if sweep_minutes is not None:
            self.settings["EFA_CDK_SWEEP_MINUTES"] = str(sweep_minutes)
        if self.last_replacement is not None:
            interval = replacement_interval or Duration.minutes(60)
            self.settings |= {
                "EFA_CDK_UNHEALTHY_AFTER": str(unhealthy_after),
                "EFA_CDK_REPLACE_MINUTES": str(int(interval.to_minutes())),
                "EFA_CDK_REPLACEMENT_PARAMETER": self.last_replacement.parameter_name,
            }

    def _dashboard(self, namespace: str, cluster_name: str) -> tuple[cloudwatch.CfnDashboard, str]:
        """The cluster's dashboard (``Dashboard``) and its console URL (a token)."""
        body = dashboard_body(namespace, Aws.REGION, cluster_name)
        as_json = Stack.of(self).to_json_string(body)
        dashboard = cloudwatch.CfnDashboard(self, "Dashboard", dashboard_body=as_json)
        url = Fn.join(
            "",
            [
                "https://",
                Aws.REGION,
                ".console.aws.amazon.com/cloudwatch/home?region=",
                Aws.REGION,
                "#dashboards:name=",
                dashboard.ref,
            ],
        )
        return dashboard, url

    def _benchmark_document(self, namespace: str) -> ssm.CfnDocument:
        """The Run Command document (``BenchmarkDocument``) that re-runs the benchmarks on the leader."""
        return ssm.CfnDocument(
            self,
            "BenchmarkDocument",
            document_type="Command",
            document_format="JSON",
            content={
                "schemaVersion": "2.2",
                "description": "efa-cdk: re-run the cluster's benchmarks on its leader and publish the "
                f"figures to CloudWatch ({namespace})",
                "mainSteps": [
                    {
                        "action": "aws:runShellScript",
                        "name": "benchmarks",
                        "inputs": {
                            "runCommand": ["EFA_CDK_ON_DEMAND=1 /opt/efa-cdk/bin/run-steps.sh benchmarks"],
                            "timeoutSeconds": "3600",
                        },
                    }
                ],
            },
        )

    def _grant(self, role: iam.IRole, group: autoscaling.CfnAutoScalingGroup | None) -> None:
        """PutMetricData in the cluster's namespace only; the log group; in an Auto Scaling group,
        SetInstanceHealth on that group only, and the group's last-replacement parameter."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData takes no resource; the namespace condition scopes it
                conditions={"StringEquals": {"cloudwatch:namespace": self.namespace}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn],
            )
        )
        if group is not None:
            arn = Stack.of(self).format_arn(  # ...:autoScalingGroup:<uuid>:autoScalingGroupName/<name>
                service="autoscaling",
                resource="autoScalingGroup",
                resource_name=f"*:autoScalingGroupName/{group.ref}",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            # Its own policy: the launch template waits for the role's default policy, and the group
            # for the launch template, so naming the group there would be a cycle.
            policy = iam.Policy(
                self,
                "GroupHealth",
                roles=[role],
                statements=[
                    iam.PolicyStatement(actions=["autoscaling:SetInstanceHealth"], resources=[arn]),
                    iam.PolicyStatement(
                        actions=["ssm:GetParameter", "ssm:PutParameter"],
                        resources=[self.last_replacement.parameter_arn],  # type: ignore[union-attr]
                    ),
                ],
            )
            # named as cdk-nag names it: with the stack's own region and partition when it has them
            acknowledge(policy, f"AwsSolutions-IAM5[Resource::{nag_resource(self, arn)}]")

    def _topic(self, alarm_email: str | None) -> sns.Topic:
        key = kms.Key(self, "AlarmKey", enable_key_rotation=True, description="efa-cdk alarm topic")
        # CloudWatch alarms publish to an encrypted topic only when its key lets them (SNS guide).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        self._key = key
        topic = sns.Topic(self, "Alarms", master_key=key, enforce_ssl=True)
        if alarm_email is not None and not Token.is_unresolved(alarm_email):
            check_email(alarm_email)
        if alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        return topic

    def allow_publisher(self, service: str) -> None:
        """Let another AWS service (``events.amazonaws.com``) publish to the encrypted alarm topic: its
        key must let that service use it, as it lets CloudWatch (SNS developer guide, encryption at rest)."""
        self._key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )

    def _alarms(self, *, held_back: bool) -> list[cloudwatch.Alarm]:
        """One alarm per grey-failure counter (cluster total above 0 in 5 minutes), one on failed
        health checks and, in an Auto Scaling group, one on replacements the limit held back."""
        specs = [(m, f"EFA {m} above 0 on the cluster: a link works, badly") for m in GREY_FAILURE_METRICS]
        specs.append((UNHEALTHY_METRIC, "a node failed its EFA health check (device count or libfabric)"))
        if held_back:
            specs.append(
                (
                    HELD_BACK_METRIC,
                    "an unhealthy node was not replaced: the group replaced one recently "
                    "(a fault that follows every new node?); see the nodes' efa-cdk-health.log",
                )
            )
        out = []
        for metric, why in specs:
            alarm = cloudwatch.Alarm(
                self,
                f"Alarm-{metric}",
                metric=cloudwatch.Metric(
                    namespace=self.namespace, metric_name=metric, statistic="Sum", period=Duration.minutes(5)
                ),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=why,
            )
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            out.append(alarm)
        return out

    def add_outputs(self, scope: Construct) -> None:
        """DashboardUrl, AlarmTopicArn and BenchmarkDocument outputs in `scope` (a stack)."""
        CfnOutput(
            scope, "DashboardUrl", value=self.dashboard_url, description="The cluster's CloudWatch dashboard"
        )
        CfnOutput(
            scope,
            "AlarmTopicArn",
            value=self.topic.topic_arn,
            description="Subscribe to the cluster's alarms",
        )
        CfnOutput(
            scope,
            "BenchmarkDocument",
            value=self.benchmark_document.ref,
            description="Re-run the benchmarks: aws ssm send-command --document-name <this> --targets "
            "Key=InstanceIds,Values=<node 0's id>; the figures go to the dashboard",
        )
