#!/bin/bash
# Builds the tests' Debian 12 VM (tests/support/vm.py): a root file system from Debian's packages
# (mmdebstrap), its kernel and initrd copied out for QEMU's -kernel/-initrd, and an ext4 image of
# it made by mke2fs -d (no loop mount). Writes vmlinuz, initrd.img and disk.img into OUT.
#
# Usage: build.sh OUT PACKAGES MIRROR...   (PACKAGES: comma-separated; MIRROR: mmdebstrap's)
set -euo pipefail
out=$1 packages=$2
shift 2
guest=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# charliecloud-builders (ch-image) depends on docker.io and buildah, ~280 MB the tests never use:
# they only `ch-image import` a directory. Empty packages of those names stand in for them,
# installed before the rest (a local .deb in --include is not seen by dpkg in the chroot).
mkdir "$work/stubs"
for stub in docker.io buildah; do
  mkdir -p "$work/$stub/DEBIAN"
  cat >"$work/$stub/DEBIAN/control" <<CONTROL
Package: $stub
Version: 0~portal-vm
Architecture: all
Maintainer: portal tests <root@localhost>
Description: empty stand-in for $stub in the tests' VM
 charliecloud-builders depends on it; the tests only import images with ch-image.
CONTROL
  dpkg-deb --build "$work/$stub" "$work/stubs/$stub.deb" >/dev/null
done

# No documentation, and no drivers for hardware a QEMU machine does not have (a smaller image,
# a faster mke2fs).
slim=()
set -f  # patterns for dpkg, not for this machine's files
for path in /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
  /lib/modules/*/kernel/drivers/{gpu,media,infiniband,staging,iio,isdn,bluetooth}/* \
  /lib/modules/*/kernel/drivers/net/{wireless,ethernet}/* /lib/modules/*/kernel/sound/* \
  /lib/modules/*/kernel/net/{bluetooth,mac80211,wireless}/*; do
  slim+=("--dpkgopt=path-exclude=$path")
done
set +f

mmdebstrap --variant=minbase --mode=root --include="$packages" \
  "${slim[@]}" --essential-hook="sh '$guest/essential-hook.sh' \"\$1\" '$work/stubs'" \
  --setup-hook="sh '$guest/setup-hook.sh' \"\$1\" '$guest'" \
  --customize-hook="sh '$guest/customize-hook.sh' \"\$1\" '$guest'" \
  bookworm "$work/root" "$@"

cp "$work"/root/boot/vmlinuz-* "$out/vmlinuz"
cp "$work"/root/boot/initrd.img-* "$out/initrd.img"
# Sparse: the file takes what the root file system holds; the rest is room for the tests' tasks.
mke2fs -q -t ext4 -L portal-vm -d "$work/root" -F "$out/disk.img" 8G
