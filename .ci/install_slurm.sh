#!/usr/bin/env bash
# Installs the Debian (bookworm) packages that tests/test_slurm.py needs to start a real
# single-node SLURM with accounting: munge, slurmctld, slurmd, slurm-client, slurmdbd, and
# mariadb for the slurmdbd that answers the sacct queries of snakemake-executor-plugin-slurm.
#
# Idempotent, and never fails CI: where the packages cannot be installed (no apt-get, not root,
# no network, another distribution) it says why and exits 0; tests/test_slurm.py then skips
# with the reason. The test starts and stops the daemons itself, in a temporary directory; this
# script keeps the packages' own services from starting.
set -u

PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server mariadb-client)

say() { echo "install_slurm: $*"; }

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    say "already installed: ${PACKAGES[*]}"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get on this machine: not installing ${missing[*]}; tests/test_slurm.py will skip"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    say "not root: not installing ${missing[*]}; tests/test_slurm.py will skip (it needs root anyway)"
    exit 0
fi

# Keep the packages' services (munge, mariadb, slurmctld, slurmd, slurmdbd) from starting on a
# machine with an init system: invoke-rc.d and deb-systemd-invoke obey policy-rc.d, 101 = denied.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
fi
cleanup() { if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
cleanup() { rm -f "$log"; if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi; }
say "installing ${missing[*]}"
if ! timeout 600 apt-get update -qq >"$log" 2>&1; then
    tail -n 20 "$log"
    say "apt-get update failed: not installing; tests/test_slurm.py will skip"
    exit 0
fi
if ! timeout 900 apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$log" 2>&1; then
    tail -n 20 "$log"
    say "apt-get install failed: tests/test_slurm.py will skip"
    exit 0
fi
say "installed: $(dpkg-query -W -f='${Package} ${Version}  ' "${PACKAGES[@]}")"
exit 0
