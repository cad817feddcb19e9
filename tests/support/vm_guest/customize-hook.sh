#!/bin/sh
# mmdebstrap's customize hook for the tests' VM (build.sh): a host like a user's, where the
# portal's PostgreSQL trusts local connections and its Redis has no password (as on CI), and
# where the unit portal-vm-job runs the job tests/support/vm.py shares with it, then powers off.
set -eu
root=$1 guest=$2

echo portal-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 portal-vm\n::1 localhost ip6-localhost ip6-loopback\n' \
  >"$root/etc/hosts"
# A machine id of its own: with none, every boot is a first boot (systemd-firstboot's questions).
echo 7e0b3c5a9d2f4e61a8c4b2d0f6e1a3c5 >"$root/etc/machine-id"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 0' >"$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null  # a login on the console, to look around by hand

for hba in "$root"/etc/postgresql/*/main/pg_hba.conf; do
  sed -i -E 's/(scram-sha-256|md5|peer)[[:space:]]*$/trust/' "$hba"
done
for conf in "$root"/etc/postgresql/*/main/conf.d; do
  # The usual port (pg_createcluster took the next free one when this machine's PostgreSQL had
  # 5432), and no durability to pay for under an emulated CPU: a test machine.
  printf 'port = 5432\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n' \
    >"$conf/portal-vm.conf"
done

install -m 0755 "$guest/portal-vm-job" "$root/usr/local/sbin/portal-vm-job"
install -m 0644 "$guest/portal-vm-job.service" "$root/etc/systemd/system/portal-vm-job.service"
chroot "$root" systemctl enable --quiet portal-vm-job.service
# The ssh plugin's tests start sshd in their tasks: no system sshd on port 22 (as on CI).
chroot "$root" systemctl disable --quiet ssh.service
# Nothing of a long-lived host's housekeeping during a test run.
chroot "$root" systemctl mask --quiet apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
  e2scrub_all.timer fstrim.timer
