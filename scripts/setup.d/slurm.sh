#!/usr/bin/env bash
# A four-node Slurm cluster on this machine for tests/tests/cluster_slurm.rs (issue 29):
# Debian's slurm-wlm and munge, slurmctld plus four slurmd (NodeName=n[1-4], multiple-slurmd
# mode), each slurmd in its own UTS namespace (hostname n1..n4) with its own loopback
# address (127.0.0.11..14). No systemd: the daemons are started by hand, here. Idempotent:
# installs what is missing, starts what is not running, leaves running daemons alone.
# Ports: slurmctld 6817, slurmd 6821-6824. State and logs under $CULPRIT_SLURM_DIR
# (default /var/tmp/culprit-slurm). Needs root; otherwise says so and does nothing.
set -euo pipefail

D="${CULPRIT_SLURM_DIR:-/var/tmp/culprit-slurm}"
if [ "$(id -u)" -ne 0 ]; then
    echo "setup.d/slurm.sh: not root: the four-node Slurm cluster is not set up" >&2
    exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v unshare >/dev/null; then
    echo "setup: apt-get install slurm-wlm munge" >&2
    # No service may start on install (there is no init system to stop it).
    made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge util-linux >/dev/null
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
fi

# munge: key, run directory, daemon.
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
    runuser -u munge -- mungekey -c 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- munged
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi

mkdir -p "$D/state" "$D/log" /etc/slurm
conf=$(cat <<CONF
# Written by Culprit's scripts/setup.d/slurm.sh: four nodes on one machine.
ClusterName=culprit
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdSpoolDir=$D/spool/%n
SlurmdPidFile=$D/slurmd-%n.pid
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldLogFile=$D/log/slurmctld.log
SlurmctldPidFile=$D/slurmctld.pid
StateSaveLocation=$D/state
MpiDefault=none
KillWait=5
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.11 Port=6821 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.12 Port=6822 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n3 NodeHostname=localhost NodeAddr=127.0.0.13 Port=6823 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n4 NodeHostname=localhost NodeAddr=127.0.0.14 Port=6824 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=culprit Nodes=n[1-4] Default=YES MaxTime=30 State=UP OverSubscribe=FORCE:4
CONF
)
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ]; then
    printf '%s\n' "$conf" > /etc/slurm/slurm.conf
    # A changed configuration: restart what runs with the old one.
    for f in "$D"/slurmd-n*.pid "$D/slurmctld.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
    sleep 1
fi

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! running "$D/slurmctld.pid"; then
    slurmctld -c
fi
for n in 1 2 3 4; do
    mkdir -p "$D/spool/n$n"
    if ! running "$D/slurmd-n$n.pid"; then
        # Its own hostname: a UTS namespace around the daemon (tasks inherit it).
        unshare -u sh -c "hostname n$n && exec slurmd -N n$n"
    fi
done
for _ in $(seq 120); do
    if [ "$(sinfo -h -o '%T %D' -t idle,mix,alloc 2>/dev/null | awk '{s+=$2} END {print s+0}')" = 4 ]; then
        echo "setup: Slurm: 4 nodes up (n1-n4)" >&2
        exit 0
    fi
    scontrol update NodeName=n[1-4] State=RESUME >/dev/null 2>&1 || true
    sleep 0.5
done
# Not fatal to the rest of the set-up: tests/tests/cluster_slurm.rs says why it cannot run
# (and fails under CI).
echo "setup.d/slurm.sh: the four Slurm nodes did not come up; see $D/log/" >&2
sinfo >&2 || true
exit 0
