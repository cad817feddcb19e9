#!/bin/sh
# mmdebstrap's essential hook for the tests' VM (build.sh): installs the stand-in packages STUBS
# holds before the packages of --include, whose dependencies they satisfy.
set -eu
root=$1 stubs=$2
cp -r "$stubs" "$root/tmp/portal-vm-stubs"
chroot "$root" sh -c 'dpkg -i /tmp/portal-vm-stubs/*.deb'
rm -r "$root/tmp/portal-vm-stubs"
