"""What ``gdscheck -p`` says of a node's GPUDirect Storage, for FSx for Lustre (issue 44).

GDS's own checker prints its driver configuration, one line per file system (``FSx Lustre : Supported``),
the ``nvidia_fs version:``, one ``GPU index N <name> bar:... supports GDS`` line per GPU, and ends with
``Platform verification succeeded`` (NVIDIA GPUDirect Storage Installation and Troubleshooting Guide,
"Verifying a Successful GDS Installation", and its sample output). A node is ready for GDS with FSx for
Lustre when: the Lustre line, where the release prints one, says GDS serves it; nvidia_fs is at least 2.24.2,
the release the FSx for Lustre user guide names ("configure-efa-clients", Install the GDS driver), compared
at the precision gdscheck prints (its ``nvidia_fs version:`` is major.minor in every recorded release,
1.0 to 1.16: the patch level is the node software's ``modinfo`` check); every GPU the node has supports GDS;
the platform verification succeeded.

Releases up to 1.15 print no line for FSx for Lustre (recorded outputs of 1.0, 1.13, 1.14 and 1.15 list
``DDN EXAScaler`` and no Lustre of their own); 1.16 prints ``FSx Lustre``. Without the line the other
three conditions decide, and the one line says the release printed none.

CLI: ``gds.py --gpus N`` (stdin: ``gdscheck -p``) prints one line, what it found, and exits 1 when the node is
not ready (the line then says why).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

#: The nvidia-fs release FSx for Lustre names for GDS ("configure-efa-clients": 2.24.2 or higher).
MIN_NVIDIA_FS = (2, 24, 2)
#: What a file system's line says when GDS serves it: ``Supported``, or since GDS 1.16 the modes libcufile
#: has for it, of which ``compat`` alone is the CPU path (GDS release notes, V1.16: "specify the modes
#: (p2pdma, nvfs, compat) supported by libcufile"; the guide's sample prints ``IBM Spectrum Scale : dmabuf,
#: compat``).
DIRECT = frozenset({"Supported", "nvfs", "p2pdma", "dmabuf"})


@dataclass(frozen=True)
class GdsCheck:
    """What one ``gdscheck -p`` said."""

    release: str
    nvidia_fs: tuple[int, ...]
    fsx_lustre: str  # the FSx Lustre line's value, "" where the release prints none
    gpus: int  # GPU lines
    gpus_with_gds: int  # ... that say "supports GDS"
    verified: bool  # "Platform verification succeeded"

    def problems(self, gpus: int) -> list[str]:
        """Why this node is not ready for GDS with FSx for Lustre (none: it is), for a node of `gpus` GPUs."""
        out = []
        # compared at the precision gdscheck prints (major.minor): 2.24 is the floor 2.24.2 there
        floor = MIN_NVIDIA_FS[: len(self.nvidia_fs)] if self.nvidia_fs else MIN_NVIDIA_FS
        if self.nvidia_fs < floor:
            have = ".".join(map(str, self.nvidia_fs)) or "none"
            out.append(f"nvidia_fs {have} is older than {'.'.join(map(str, MIN_NVIDIA_FS))}")
        if self.fsx_lustre and not DIRECT & set(self.fsx_lustre.split(",")):
            out.append(f"FSx Lustre is {self.fsx_lustre} (GDS release {self.release or '?'})")
        if self.gpus_with_gds < gpus:
            out.append(f"{self.gpus_with_gds} of {gpus} GPUs support GDS")
        if not self.verified:
            out.append("the platform verification did not succeed")
        return out


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def parse(text: str) -> GdsCheck:
    """Read ``gdscheck -p``'s output (its lines may be indented)."""
    release = re.search(r"GDS release version:\s*([\d.]+)", text)
    nvfs = re.search(r"nvidia_fs version:\s*([\d.]+)", text)
    fsx = re.search(r"^\s*FSx Lustre\s*:\s*(.+?)\s*$", text, re.M)
    gpu_lines = re.findall(r"^\s*GPU index \d+ .*$", text, re.M)
    return GdsCheck(
        release=release.group(1) if release else "",
        nvidia_fs=_version(nvfs.group(1)) if nvfs else (),
        fsx_lustre=fsx.group(1).replace(" ", "") if fsx else "",
        gpus=len(gpu_lines),
        gpus_with_gds=sum("supports GDS" in line for line in gpu_lines),
        verified=re.search(r"^\s*Platform verification succeeded\s*$", text, re.M) is not None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--gpus", type=int, required=True, help="the GPUs the node has")
    args = parser.parse_args(argv)
    check = parse(sys.stdin.read())
    problems = check.problems(args.gpus)
    if problems:
        print("; ".join(problems))
        return 1
    version = ".".join(map(str, check.nvidia_fs))
    lustre = "FSx Lustre supported" if check.fsx_lustre else "no FSx Lustre line in this release"
    print(
        f"nvidia_fs {version}, {lustre}, {check.gpus_with_gds} of {args.gpus} GPUs support GDS "
        f"(GDS release {check.release})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
