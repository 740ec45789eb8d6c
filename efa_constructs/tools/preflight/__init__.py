"""`efa-cdk preflight`: the synthesized stacks checked against the AWS account before `cdk deploy`.

Most first deploys of an EFA cluster fail on the account, not the template: a vCPU quota of 0 for the
family, a type not offered in the zone, a Capacity Block that has not started or holds too few
instances, a missing key pair, image or CDK bootstrap stack. Each check reads what the template asks
for (cdk.out) and what the account has (boto3), and says one line: PASS, WARN or FAIL, what it found
and the fix. The calls and the IAM permission each needs are in :data:`PERMISSIONS`.

The package's rooms, each with its test file (tests/test_preflight_<room>.py): :mod:`.model` (what is read
and said), :mod:`.templates` and :mod:`.pcluster` (node groups and file systems read from templates),
:mod:`.aws_errors` (the AWS error policy), :mod:`.base`, :mod:`.capacity`, :mod:`.network` and
:mod:`.checks` (the checks), :mod:`.register` (the register of checks), :mod:`.session` (session, region,
the assembly's templates) and :mod:`.command` (the command).
"""

from .aws_errors import _failure
from .checks import Preflight
from .command import main
from .model import (
    ACCOUNT,
    BOOTSTRAP_VERSION_PARAMETER,
    FILE_SYSTEM,
    LUSTRE_COUNT_QUOTA,
    LUSTRE_STORAGE_QUOTA,
    NODE_GROUP,
    PERMISSIONS,
    QUALIFIER,
    Check,
    LustreAsk,
    NodeGroup,
    PreflightError,
    quota_name,
)
from .pcluster import parallelcluster_configs, parallelcluster_groups
from .register import RULES, Rule, rules_table, rules_text
from .session import _every_template, session_for, templates
from .templates import assembly_exports, bootstrap_required, lustre_file_systems, node_groups

__all__ = [
    "ACCOUNT",
    "BOOTSTRAP_VERSION_PARAMETER",
    "FILE_SYSTEM",
    "LUSTRE_COUNT_QUOTA",
    "LUSTRE_STORAGE_QUOTA",
    "NODE_GROUP",
    "PERMISSIONS",
    "QUALIFIER",
    "RULES",
    "Check",
    "LustreAsk",
    "NodeGroup",
    "Preflight",
    "PreflightError",
    "Rule",
    "_every_template",
    "_failure",
    "assembly_exports",
    "bootstrap_required",
    "lustre_file_systems",
    "main",
    "node_groups",
    "parallelcluster_configs",
    "parallelcluster_groups",
    "quota_name",
    "rules_table",
    "rules_text",
    "session_for",
    "templates",
]
