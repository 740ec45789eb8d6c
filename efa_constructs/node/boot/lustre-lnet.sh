#!/usr/bin/env bash
# The lustre-lnet step (issue 53 item 11): the FSx for Lustre client and LNet over EFA before an orchestrator
# mounts the file system. ParallelCluster runs it from a queue's OnNodeStart, which it calls before any of its
# own bootstrap actions (ParallelCluster user guide, "Custom bootstrap actions"), so its mount of the file
# system already rides EFA, the order AWS's own setup takes; the lustre-client step at OnNodeConfigured then
# finds LNet up, keeps that mount, and proves that Lustre traffic rides EFA.
set -euo pipefail
exec bash "$(cd "$(dirname "$0")" && pwd)/lustre-client.sh" --prepare
