"""Before a Capacity Block ends: EC2's warning routed to the cluster's alarm topic and to its nodes.

Forty minutes before a Capacity Block ends, EC2 sends an EventBridge event; the instances running in it
begin to terminate ten minutes later (EC2 user guide, "Monitor Capacity Blocks using EventBridge"). The
guide's global page names the event's detail type "Capacity Block Expiration Warning"; its regional
copies (docs.amazonaws.cn) also show "Capacity Block Reservation Expiration Warning". The rule matches
both, for this block's id only (``detail.capacity-reservation-id``).

Targets: the alarm topic (when the cluster has monitoring), and every node of the cluster through Run
Command (by its ``efa-cdk:cluster`` tag): the node software's ``capacity-block-ending`` step writes the
end time where a training job can watch it (``/var/lib/efa-cdk/capacity-block-ending``) and tells every
logged-in user (``wall``), so jobs can checkpoint.
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ..core.capacity import Capacity, CapacityKind
from .acknowledgements import acknowledge, nag_resource
from .monitoring import EfaClusterMonitoring

#: EC2's detail types for the warning (the global and the regional copies of the user guide's page).
EXPIRATION_WARNINGS = ("Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning")
STEP = "/opt/efa-cdk/bin/run-steps.sh capacity-block-ending"
#: The end time as the document takes it (EC2's ``detail.end-date``, whose format AWS does not show: issue 53
#: item 5): the characters of a date GNU ``date -d`` reads (ISO 8601, RFC 3339 or 2822, "2026-11-26 12:00:00
#: UTC"), and none that could end the command's quoting; the node reads it with ``date -d`` and refuses what
#: that cannot parse.
END_DATE_PATTERN = r"^[0-9A-Za-z :.,+/-]{1,64}$"


#: The event's end date, as EventBridge inserts it into a target's input.
END_DATE = events.EventField.from_path("$.detail.end-date")


class EfaCapacityBlockEnd(Construct):
    """The warning before Capacity Block `reservation_id` ends, to the topic and to the nodes tagged
    ``efa-cdk:cluster`` = `cluster_tag`.

    Attributes:
        rule: the EventBridge rule (``Rule``).
        document: the Run Command document the nodes run (``Document``).
    """

    @staticmethod
    def of(
        scope: Construct,
        capacity: Capacity,
        cluster_tag: str,
        *,
        monitoring: EfaClusterMonitoring | None = None,
        nodes: bool = True,
    ) -> EfaCapacityBlockEnd | None:
        """The warning (``CapacityBlockEnd``) for nodes launched into `capacity` when it is a Capacity Block,
        else None: the one place every orchestrator asks."""
        if capacity.kind is not CapacityKind.CAPACITY_BLOCK:
            return None
        return EfaCapacityBlockEnd(
            scope,
            "CapacityBlockEnd",
            reservation_id=str(capacity.target),
            cluster_tag=cluster_tag,
            monitoring=monitoring,
            nodes=nodes,
        )

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        reservation_id: str,
        cluster_tag: str,
        monitoring: EfaClusterMonitoring | None = None,
        nodes: bool = True,
    ) -> None:
        """Create the rule, its document and the role EventBridge runs the command with. `nodes`: False
        when the nodes run no efa-cdk node software (then only the topic is told)."""
        super().__init__(scope, id_)
        self.document = ssm.CfnDocument(
            self,
            "Document",
            document_type="Command",
            document_format="JSON",
            content={
                "schemaVersion": "2.2",
                "description": "efa-cdk: the Capacity Block ends soon: tell this node's users and jobs",
                "parameters": {
                    "endDate": {
                        "type": "String",
                        "allowedPattern": END_DATE_PATTERN,
                        "description": "when the Capacity Block ends (EC2's event)",
                    },
                },
                "mainSteps": [
                    {
                        "action": "aws:runShellScript",
                        "name": "capacityBlockEnding",
                        "inputs": {"runCommand": [f"EFA_CDK_BLOCK_END='{{{{ endDate }}}}' {STEP}"]},
                    }
                ],
            },
        )
        self.rule = events.Rule(
            self,
            "Rule",
            description=f"efa-cdk: EC2's warning before Capacity Block {reservation_id} ends",
            event_pattern=events.EventPattern(
                source=["aws.ec2"],
                detail_type=list(EXPIRATION_WARNINGS),
                detail={"capacity-reservation-id": [reservation_id]},
            ),
        )
        if nodes:
            self.rule.add_target(_RunCommand(self, self.document, cluster_tag))
        #: An alarm when EventBridge could not deliver the warning (:meth:`_undelivered`).
        self.failed_alarm = self._undelivered(reservation_id, monitoring)
        if monitoring is not None:
            # recent aws-cdk-lib's SnsTopic target grants this itself (the statements merge); the lowest
            # release the package supports is not assumed to
            monitoring.allow_publisher("events.amazonaws.com")
            self.rule.add_target(
                targets.SnsTopic(
                    monitoring.topic,
                    message=events.RuleTargetInput.from_text(
                        f"Capacity Block {reservation_id} ends at {END_DATE}: EC2 begins terminating its "
                        "instances 10 minutes after this warning. Checkpoint now."
                    ),
                )
            )

    def _undelivered(self, reservation_id: str, monitoring: EfaClusterMonitoring | None) -> cloudwatch.Alarm:
        """An alarm on the rule's FailedInvocations (AWS/Events, by RuleName: a Run Command the document
        refused, a role without its grant), to the alarm topic where the cluster has one: a warning that does
        not arrive must not be silent."""
        alarm = cloudwatch.Alarm(
            self,
            "FailedAlarm",
            metric=cloudwatch.Metric(
                namespace="AWS/Events",
                metric_name="FailedInvocations",
                statistic="Sum",
                period=Duration.minutes(5),
                dimensions_map={"RuleName": self.rule.rule_name},
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"EC2's warning that Capacity Block {reservation_id} ends did not reach its "
            "targets (EventBridge FailedInvocations): the nodes were not told to checkpoint",
        )
        if monitoring is not None:
            alarm.add_alarm_action(cw_actions.SnsAction(monitoring.topic))
        return alarm


@jsii.implements(events.IRuleTarget)
class _RunCommand:
    """Run Command on the cluster's nodes, by tag, with the event's end date as the document's parameter
    (EventBridge's Run Command target: ``RunCommandParameters``, the input is the parameters' JSON)."""

    def __init__(self, scope: Construct, document: ssm.CfnDocument, cluster_tag: str) -> None:
        self.scope, self.document, self.cluster_tag = scope, document, cluster_tag

    def bind(self, rule: Any, id: str | None = None) -> events.RuleTargetConfig:
        stack = Stack.of(self.scope)
        document_arn = stack.format_arn(service="ssm", resource="document", resource_name=self.document.ref)
        role = iam.Role(
            self.scope,
            "RunCommandRole",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description="efa-cdk: EventBridge runs the Capacity Block warning on the cluster's nodes",
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ssm:SendCommand"], resources=[document_arn])
        )
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ssm:SendCommand"],
                resources=[instances],
                conditions={"StringEquals": {"aws:ResourceTag/efa-cdk:cluster": self.cluster_tag}},
            )
        )
        # the cluster's instances by their tag: Run Command targets them so, their ids come later
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{nag_resource(self.scope, instances)}]")
        return events.RuleTargetConfig(
            arn=document_arn,
            role=role,
            run_command_parameters=events.CfnRule.RunCommandParametersProperty(
                run_command_targets=[
                    events.CfnRule.RunCommandTargetProperty(
                        key="tag:efa-cdk:cluster", values=[self.cluster_tag]
                    )
                ]
            ),
            input=events.RuleTargetInput.from_object(
                {"endDate": [events.EventField.from_path("$.detail.end-date")]}
            ),
        )
