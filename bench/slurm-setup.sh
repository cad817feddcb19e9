#!/bin/sh
# A single-node Slurm on this machine for bench/e2e.py to compare against (run as root).
#
# Installs Debian's slurm-wlm and munge when sbatch is missing, writes a munge key when there is
# none, writes /etc/slurm/slurm.conf for this host (its name, CPUs and memory; select/cons_tres
# counting CPUs only) with two partitions on the one node: `bench` (one job per CPU, the default)
# and `over` (OverSubscribe=FORCE: up to 50 jobs share each CPU; at 1000, a 2-CPU node started
# about a thousand job steps at once, slurmd hit its 256 threads and Slurm drained the node with
# "Kill task failed"), and starts munged, slurmctld and slurmd as daemons unless they run
# already. Idempotent: a second run changes nothing that
# is up and configured. Exits non-zero when Slurm cannot be set up (the bench then runs alone).
set -eu

if ! command -v sbatch >/dev/null 2>&1 || ! command -v slurmctld >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { echo "slurm-setup: Slurm is not installed and this is not root" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y slurm-wlm munge >/dev/null 2>&1 \
    || { apt-get update >/dev/null 2>&1 && apt-get install -y slurm-wlm munge >/dev/null; }
fi
if [ "$(id -u)" != 0 ]; then  # enough when a root run of this script set it up already
  grep -qs "Written by bench/slurm-setup.sh" /etc/slurm/slurm.conf \
    && sinfo -h -p over -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)' && exit 0
  echo "slurm-setup: Slurm is not set up by this script and this is not root" >&2
  exit 1
fi

# munge: a key readable by munge only, and the daemon (its socket lives in /run/munge).
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
fi

host=$(hostname -s)
cpus=$(nproc)
memory_mb=$(awk '/^MemTotal:/ {print int($2 / 1024) - 512}' /proc/meminfo)
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
conf=/etc/slurm/slurm.conf
new=$(mktemp)
cat >"$new" <<EOF
# Written by bench/slurm-setup.sh: a single node for bench/e2e.py.
ClusterName=bench
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
# No cgroups needed (this may run in a container): plain process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MaxJobCount=100000
ReturnToService=2
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=over Nodes=$host MaxTime=INFINITE State=UP OverSubscribe=FORCE:50
EOF
changed=0
if ! cmp -s "$new" "$conf"; then
  mv "$new" "$conf" && chmod 644 "$conf" && changed=1
else
  rm -f "$new"
fi

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if running /run/slurmctld.pid; then
  [ "$changed" = 0 ] || scontrol reconfigure
else
  /usr/sbin/slurmctld
fi
running /run/slurmd.pid || /usr/sbin/slurmd

# Ready when the node takes jobs (a node that was down comes back with ReturnToService=2).
tries=0
until sinfo -h -N -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "slurm-setup: the node did not become idle; see /var/log/slurm/" >&2
    exit 1
  fi
  [ "$tries" != 10 ] || scontrol update nodename="$host" state=resume 2>/dev/null || :
  sleep 0.5
done
echo "slurm-setup: Slurm is up on $host ($cpus CPUs, partitions bench and over)"
