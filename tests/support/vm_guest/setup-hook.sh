#!/bin/sh
# mmdebstrap's setup hook for the tests' VM (build.sh), before any package is installed: the
# initrd holds only what QEMU's machine needs to mount its root (virtio disk, ext4), not most of
# the kernel's modules, so that it is small and quick to unpack under TCG.
set -eu
root=$1 guest=$2
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/portal-vm"
install -m 0755 "$guest/initramfs-hook" "$root/etc/initramfs-tools/hooks/portal-vm"
