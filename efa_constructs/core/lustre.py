"""FSx for Lustre: the rules AWS documents for a file system and its clients, over TCP or over EFA.

Every number here is read from the FSx for Lustre user guide (November 2026), page named at its use.
The file systems are PERSISTENT_2 on SSD: the only deployment type EFA serves (page "efa-file-systems",
Considerations), and the one :class:`~efa_constructs.cdk.storage.EfaSharedStorage` has always made.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalogue import InstanceType
from .errors import EfaConfigError

#: PERSISTENT_2 SSD throughput tiers, MB/s per TiB ("managing-throughput-capacity").
THROUGHPUT_TIERS = (125, 250, 500, 1000)
#: The tier a file system gets unless asked (what EfaSharedStorage has always made).
DEFAULT_THROUGHPUT = 250
#: Without EFA: 1,200 GiB, or a multiple of 2,400 GiB ("increase-storage-capacity").
TCP_FIRST_GIB, TCP_STEP_GIB = 1200, 2400
#: With EFA the capacity grows in steps of 4,800 MB/s, so the step in GiB depends on the tier
#: ("increase-storage-capacity", EFA-enabled file systems).
EFA_STEP_GIB = {125: 38400, 250: 19200, 500: 9600, 1000: 4800}
#: At most 1,024 EFA connections per file system over all its clients; each client interface the setup
#: configures is one ("configure-efa-clients", step 4).
MAX_EFA_CONNECTIONS = 1024
#: The EFA interfaces AWS's client setup configures, by instance type ("configure-efa-clients", step 4
#: table); other types: 2 with several network cards, 1 with one.
EFA_CLIENT_INTERFACES = {
    "p6-b300.48xlarge": 16,
    "p6e-gb200.36xlarge": 8,
    "p6-b200.48xlarge": 8,
    "p5en.48xlarge": 8,
    "p5e.48xlarge": 8,
    "p5.48xlarge": 8,
}
#: "EFA is supported on Nitro v4 (or higher) EC2 instances that support EFA, excluding the trn2 instance
#: family" ("configure-efa-clients"). A Trn2 UltraServer's nodes are trn2u instances of the same
#: hardware (EC2 user guide, "Amazon EC2 UltraServers"): refused alike, until AWS says otherwise.
NOT_EFA_CLIENTS = frozenset({"trn2", "trn2u"})
#: The oldest Nitro System version FSx serves over EFA (same page); each type's version is the catalogue's
#: (the EC2 user guide's EFA tables: P4d, P4de, P3dn, DL1, C5n... are Nitro v3). A type the catalogue has no
#: version for (newer than those tables) is not refused.
MIN_EFA_CLIENT_NITRO = 4
#: The clients FSx for Lustre names for GPUDirect Storage ("configure-efa-clients", Install the GDS driver):
#: P5, P5e, P5en, P6-B200 and P6e-GB200 (issue 53 item 7: the page's list as read then; it was refused).
GDS_FAMILIES = frozenset({"p5", "p5e", "p5en", "p6-b200", "p6e-gb200"})
#: What FSx quotes per client ("efa-file-systems"; "performance"), for the docs and the refusals.
PER_CLIENT_GBPS = {"tcp": 100, "efa": 700, "efa+gds": 1200}


def efa_client_interfaces(it: InstanceType) -> int:
    """The EFA interfaces a client of type `it` talks to the file system over (AWS's setup's default)."""
    return EFA_CLIENT_INTERFACES.get(it.name, 2 if len(it.network_cards) > 1 else 1)


@dataclass(frozen=True)
class LustreSpec:
    """What FSx for Lustre file system to make: `capacity_gib` at `throughput` MB/s/TiB, over EFA or not.

    :meth:`check` refuses what FSx would refuse at deploy, one clear line each."""

    capacity_gib: int
    throughput: int = DEFAULT_THROUGHPUT
    efa: bool = False
    #: Its EFA clients read and write with GPUDirect Storage (the GDS driver and gdscheck on every node).
    gds: bool = False
    #: The four options as the caller names them, for the refusals (EfaSharedStorage: fsx_lustre_*).
    names: tuple[str, str, str, str] = field(
        default=("capacity_gib", "throughput", "efa", "gds"), compare=False
    )

    def check(self) -> None:
        """Refuse a tier FSx does not sell, a size it does not make (steps differ with EFA), and GDS
        without EFA."""
        if self.gds and not self.efa:
            raise EfaConfigError(
                self.names[3],
                code="efa-cdk:fsx-gds-needs-efa",
                value=True,
                why="GPUDirect Storage reaches FSx for Lustre over EFA only (FSx for Lustre user guide, "
                "efa-file-systems)",
                fix=f"set {self.names[2]}=True as well, or leave {self.names[3]} off",
                context_fix="-c fsx_lustre_efa=true, or drop -c fsx_lustre_gds",
            )
        if self.throughput not in THROUGHPUT_TIERS:
            raise EfaConfigError(
                self.names[1],
                code="efa-cdk:fsx-throughput-tier",
                value=self.throughput,
                why="a PERSISTENT_2 SSD file system's throughput is one of 125, 250, 500 or 1000 MB/s per "
                "TiB (FSx for Lustre user guide, managing-throughput-capacity)",
                fix="choose 125, 250, 500 or 1000",
            )
        if self.efa:
            step = EFA_STEP_GIB[self.throughput]
            # at the highest tier there is no smaller step to offer (issue 53 item 18)
            top = self.throughput == max(THROUGHPUT_TIERS)
            smaller = (
                "" if top else f"; a higher tier has smaller steps (1000 MB/s/TiB: {EFA_STEP_GIB[1000]} GiB)"
            )
            if self.capacity_gib <= 0 or self.capacity_gib % step:
                raise EfaConfigError(
                    self.names[0],
                    code="efa-cdk:fsx-efa-capacity-step",
                    value=self.capacity_gib,
                    why=f"an EFA-enabled file system at {self.throughput} MB/s/TiB grows in steps of "
                    f"{step:,} GiB (FSx for Lustre user guide, increase-storage-capacity): far larger "
                    "than without EFA",
                    fix=f"use {step} or a multiple{smaller}; or {self.names[2]}=False",
                    context_fix=f"-c fsx_lustre_capacity_gib={step}, or -c fsx_lustre_efa=false",
                )
        elif self.capacity_gib != TCP_FIRST_GIB and (
            self.capacity_gib <= 0 or self.capacity_gib % TCP_STEP_GIB
        ):
            raise EfaConfigError(
                self.names[0],
                code="efa-cdk:fsx-capacity-size",
                value=self.capacity_gib,
                why="an FSx for Lustre (PERSISTENT_2) file system is 1200 GiB or a multiple of 2400 GiB",
                fix="use 1200, 2400, 4800, ...",
            )

    def check_clients(self, it: InstanceType, clients: int) -> None:
        """Refuse EFA clients AWS does not serve over EFA, and more EFA connections than a file system takes
        (`clients`: the most nodes that can mount it at once)."""
        if not self.efa:
            return
        older = it.nitro_version is not None and it.nitro_version < MIN_EFA_CLIENT_NITRO
        if it.family in NOT_EFA_CLIENTS or older:
            what = f"{it.name} (Nitro v{it.nitro_version}, EC2 user guide)" if older else it.family
            raise EfaConfigError(
                self.names[2],
                code="efa-cdk:fsx-efa-client-type",
                value=self.efa,  # the option's own value; the type is in why
                why=f"the nodes are {it.name}, and FSx for Lustre serves no {what} client over EFA (FSx for "
                "Lustre user guide, "
                f"configure-efa-clients: Nitro v{MIN_EFA_CLIENT_NITRO} or later, excluding the trn2 family)",
                fix=f"{self.names[2]}=False: {it.family} nodes reach Lustre over TCP, up to "
                f"{PER_CLIENT_GBPS['tcp']} Gbps each",
                context_fix="-c fsx_lustre_efa=false",
            )
        if self.gds and it.family not in GDS_FAMILIES:
            raise EfaConfigError(
                self.names[3],
                code="efa-cdk:fsx-gds-client-type",
                value=self.gds,
                why=f"the nodes are {it.name}, and FSx for Lustre names P5, P5e, P5en, P6-B200 and P6e-GB200 "
                "instances for GPUDirect Storage (FSx for Lustre user guide, configure-efa-clients)",
                fix=f"{self.names[3]}=False: {it.name} nodes read and write over EFA without GDS",
                context_fix="-c fsx_lustre_gds=false",
            )
        per_client = efa_client_interfaces(it)
        if per_client * clients > MAX_EFA_CONNECTIONS:
            raise EfaConfigError(
                self.names[2],
                code="efa-cdk:fsx-efa-connections",
                value=self.efa,
                why=f"{clients} {it.name} clients with {per_client} EFA interfaces each make "
                f"{per_client * clients} "
                f"EFA connections; a file system takes {MAX_EFA_CONNECTIONS} over all its clients (FSx for "
                "Lustre user guide, configure-efa-clients)",
                fix=f"at most {MAX_EFA_CONNECTIONS // per_client} nodes of {it.name} mount one EFA-enabled "
                f"file system; make more file systems, or {self.names[2]}=False",
            )


def check_mount(
    spec: LustreSpec,
    *,
    node_software: bool,
    client_zone: str | None,
    file_system_zone: str | None,
) -> None:
    """Refuse a cluster that could not mount the file system as asked: without the node software nothing
    mounts it; over EFA, FSx serves clients in the file system's Availability Zone only ("efa-file-systems",
    Prerequisites). None: a zone known only at deploy."""
    if not node_software:
        raise EfaConfigError(
            "lustre",
            code="efa-cdk:lustre-needs-node-software",
            value="node_software without efa-cdk's steps",
            why="the node software's lustre-client step installs the client, configures LNet and mounts it; "
            "without it no node mounts the file system",
            fix="keep NodeSoftware.efa(), or mount it from your own user data and leave lustre out",
        )
    if spec.efa and client_zone and file_system_zone and client_zone != file_system_zone:
        raise EfaConfigError(
            "lustre",
            code="efa-cdk:fsx-efa-zone",
            value=f"file system in {file_system_zone}, nodes in {client_zone}",
            why="FSx for Lustre serves EFA clients in the file system's Availability Zone only (FSx for "
            "Lustre user guide, efa-file-systems)",
            fix=f"put the nodes in a subnet of {file_system_zone}, where the file system is (a file system "
            f"this app makes: make it in the nodes' subnet, in {client_zone})",
        )
