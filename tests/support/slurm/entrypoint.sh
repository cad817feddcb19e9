#!/bin/sh
# Starts munged with the cluster's key (mounted at /cluster/munge.key; munged wants it owned by
# its own user, mode 0400, so it is copied), then runs the Slurm daemon given as arguments in
# the foreground (slurmctld -D or slurmd -D -N <node>), its log on stderr for `docker logs`.
set -eu
# Docker mounts the cgroup v1 hierarchies read-only unless --privileged (refused on a host whose
# capability bounding set lacks one, as CAP_SYS_RESOURCE here). With CAP_SYS_ADMIN and a private
# cgroup namespace, a fresh mount of each is writable and has this container's cgroup as root:
# slurmd makes its jobs' cgroups there, in a tree no other container shares.
grep ' cgroup ro,' /proc/self/mounts | while read -r _ dir _ options _; do
  case "$options" in *name=*) continue ;; esac
  kept=$(echo "$options" | tr , '\n' | grep -vxE 'ro|rw|nosuid|nodev|noexec|relatime' | paste -sd,)
  umount "$dir"
  mount -t cgroup -o "rw,nosuid,nodev,noexec,$kept" cgroup "$dir"
done
install -o munge -g munge -m 0400 /cluster/munge.key /etc/munge/munge.key
mkdir -p /run/munge /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
chown munge:munge /run/munge
runuser -u munge -- /usr/sbin/munged
if [ "$1" = slurmd ]; then  # the node's fake GPUs (gres.conf): NVIDIA's major number, no driver
  for i in 0 1; do [ -e /dev/nvidia$i ] || mknod /dev/nvidia$i c 195 $i; done
fi
exec "$@"
