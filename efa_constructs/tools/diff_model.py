"""The template diff's model: what happens to each resource, and why, before anything is rendered.

The lowest room of the pull-request review: :mod:`.change_rules` (where a verdict comes from),
:mod:`.template_diff` (which computes them) and :mod:`.diff_render` (which shows them) all read it, and it
reads none of them. A verdict is an :class:`Impact`, ordered by severity as aws-cdk's own diff engine
(``@aws-cdk/cloudformation-diff``, ``ResourceImpact`` and its ``worstImpact``) orders its own, with one
kind that engine does not have: :attr:`Impact.ROLL`, an update CloudFormation makes in place while the
service replaces the nodes behind it.

A reason is a :class:`Why`: our words and the template's text kept apart (:class:`Lit`), so that whatever a
template holds is shown as data (escaped, in a code span) and never read as part of the report.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Lit(str):
    """Text that came from a template, a node or a user's app: shown as data, never as markup."""

    __slots__ = ()


class Why(tuple[str, ...]):
    """A reason: our words (``str``) and template text (:class:`Lit`) in order; ``str()`` joins them."""

    def __new__(cls, *parts: str | Why) -> Why:
        flat: list[str] = []
        for part in parts:
            flat.extend(part if isinstance(part, Why) else [part])
        return super().__new__(cls, flat)

    def __str__(self) -> str:
        return "".join(self)


def lits(items: Iterable[str], sep: str = ", ") -> Why:
    """Template values joined by our separator: ``a, b, c`` with each value kept as data."""
    parts: list[str] = []
    for i, item in enumerate(items):
        parts += [sep, Lit(item)] if i else [Lit(item)]
    return Why(*parts)


class Impact(enum.IntEnum):
    """What a change does to one resource, from the least to the most severe (cloudformation-diff's
    ``worstImpact`` order: NO_CHANGE, WILL_UPDATE, WILL_CREATE, WILL_ORPHAN, MAY_REPLACE, WILL_REPLACE,
    WILL_DESTROY; ROLL, its nodes replaced by their service, sits below a replacement of the resource)."""

    NONE = 0
    UPDATE = 1
    CREATE = 2
    ORPHAN = 3
    MAY_REPLACE = 4
    ROLL = 5
    REPLACE = 6
    DESTROY = 7


#: cloudformation-diff's ``ResourceImpact`` names for ours (the floor test compares the two).
CFN_DIFF_NAMES = {
    Impact.NONE: "NO_CHANGE",
    Impact.UPDATE: "WILL_UPDATE",
    Impact.CREATE: "WILL_CREATE",
    Impact.ORPHAN: "WILL_ORPHAN",
    Impact.MAY_REPLACE: "MAY_REPLACE",
    Impact.ROLL: "WILL_UPDATE",
    Impact.REPLACE: "WILL_REPLACE",
    Impact.DESTROY: "WILL_DESTROY",
}


@dataclass(frozen=True)
class Verdict:
    """What happens to one resource: the impact, why (naming the property that changed), and the source
    the verdict is read from (a schema, an API model, a vendor's document)."""

    impact: Impact
    why: Why
    source: str

    def worse(self, other: Verdict | None) -> Verdict:
        """The more severe of the two (this one on a tie)."""
        return other if other is not None and other.impact > self.impact else self


#: Resource types whose deletion or replacement loses data or an address someone relies on. Instances
#: count: their root volumes (and instance stores) go with them, and so does the group's nodes'.
STATEFUL_TYPES = frozenset(
    {
        "AWS::EC2::Instance",
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::EC2::Volume",
        "AWS::EC2::EIP",
        "AWS::EFS::FileSystem",
        "AWS::FSx::FileSystem",
        "AWS::S3::Bucket",
        "AWS::Logs::LogGroup",
        "AWS::RDS::DBInstance",
        "AWS::RDS::DBCluster",
        "AWS::DynamoDB::Table",
        "AWS::EC2::KeyPair",
        "AWS::SSM::Parameter",
        "AWS::SecretsManager::Secret",
        "AWS::ECR::Repository",
        # AWS PCS: the cluster holds Slurm's state (queued and running jobs); a node group, its nodes
        "AWS::PCS::Cluster",
        "AWS::PCS::ComputeNodeGroup",
        # Amazon EKS: the cluster (its workloads and their state); a managed node group, its nodes
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
        # the custom resources of known providers (change_rules.PROVIDERS): clusters too
        "Custom::PclusterCluster",
        "Custom::AWSCDK-EKS-Cluster",
        # a nested stack: every resource in it
        "AWS::CloudFormation::Stack",
    }
)
#: Stateful types whose loss is their nodes: (root volumes, instance stores, the jobs and pods on them).
NODE_TYPES = frozenset(
    {
        "AWS::EC2::Instance",
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::PCS::ComputeNodeGroup",
        "AWS::EKS::Nodegroup",
    }
)

#: The most characters a GitHub comment holds (its REST API refuses a longer body).
COMMENT_LIMIT = 65536


class SecurityView(Protocol):
    """What the diff and its renderer read of a security diff (:class:`.security_diff.SecurityChanges`)."""

    @property
    def empty(self) -> bool: ...

    def widenings(self) -> list[str]: ...

    def widening_reasons(self) -> list[Why]: ...

    def to_json(self) -> dict[str, Any]: ...


class NoSecurity:
    """No statement or rule changes (a stack diff before its security is read)."""

    empty = True

    def widenings(self) -> list[str]:
        """None."""
        return []

    def widening_reasons(self) -> list[Why]:
        """None."""
        return []

    def to_json(self) -> dict[str, Any]:
        """Nothing added or removed."""
        return {
            "statements": {"added": [], "removed": []},
            "rules": {"added": [], "removed": []},
            "widenings": [],
        }


@dataclass
class StackDiff:
    """What changes in one stack between two templates.

    The dictionaries by logical id are views of :attr:`verdicts` (the one record) kept for readers:
    ``replaced`` holds what will be replaced, ``may_replace`` what may be, ``rolled`` the node groups whose
    service replaces their nodes, ``orphaned`` what leaves the stack but stays in the account."""

    added: dict[str, str] = field(default_factory=dict)  # logical id -> type
    removed: dict[str, str] = field(default_factory=dict)
    modified: dict[str, list[str]] = field(default_factory=dict)  # logical id -> changed property paths
    replaced: dict[str, str] = field(default_factory=dict)  # logical id -> why
    may_replace: dict[str, str] = field(default_factory=dict)
    rolled: dict[str, str] = field(default_factory=dict)
    orphaned: dict[str, str] = field(default_factory=dict)
    #: Changes the resource's provider refuses: the deploy fails and rolls back (logical id -> why).
    refused: dict[str, str] = field(default_factory=dict)
    #: Each resource's verdict (every resource that changes, added ones included).
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    outputs_changed: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)  # root causes worth naming (a new node-scripts asset)
    #: Guards lowered: a stateful resource whose DeletionPolicy or UpdateReplacePolicy no longer keeps it.
    unguarded: dict[str, Why] = field(default_factory=dict)
    #: IAM statements and security-group rules added and removed, with what widens access.
    security: SecurityView = field(default_factory=NoSecurity)
    #: The cluster's figures: (node group, before, after), the same where it stays.
    cluster: list[tuple[str, str, str]] = field(default_factory=list)
    #: The shared file systems' figures: (file system, before, after).
    storage: list[tuple[str, str, str]] = field(default_factory=list)
    #: What the head's checks find that the base's did not (cfn-lint; synth errors and warnings).
    findings: list[str] = field(default_factory=list)
    #: Nested stacks whose templates could not be read: their resources' changes are not shown.
    unread_nested: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing changes."""
        return not (
            self.added
            or self.removed
            or self.modified
            or self.replaced
            or self.outputs_changed
            or self.refused
        )

    def _stateful(self, ids: Iterable[str]) -> list[str]:
        return sorted(r for r in ids if self.types.get(r) in STATEFUL_TYPES)

    @property
    def stateful_losses(self) -> list[str]:
        """Stateful resources destroyed, replaced (or that may be), or whose nodes their service replaces;
        not those a retained removal leaves in the account (:attr:`orphaned`)."""
        gone = [r for r in self.removed if r not in self.orphaned]
        return self._stateful([*gone, *self.replaced, *self.may_replace, *self.rolled])

    @property
    def stateful_orphans(self) -> list[str]:
        """Stateful resources taken out of the stack but kept in the account (DeletionPolicy Retain)."""
        return self._stateful(self.orphaned)


class Report(Protocol):
    """What the renderer reads of a report (:class:`.template_diff.DiffReport`)."""

    base: str
    head: str | None
    stacks: dict[str, StackDiff]
    dependencies: list[tuple[str, str, str]]
    environments: tuple[str, str]
