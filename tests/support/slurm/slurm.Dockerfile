# A Slurm node for tests/support/slurm_cluster.py: Debian 12's Slurm 22.05 (the version of the
# host's slurm-client, so that the host can submit), munge, and what tasks and the tests use
# (python3, ssh, ps, ip). One image for the controller and the compute nodes: entrypoint.sh
# starts munged, then the daemon the container's command names.
ARG BASE
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    slurm-wlm munge python3 openssh-server openssh-client procps iproute2 bash coreutils \
    && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/sbin/slurm-entrypoint
ENTRYPOINT ["/usr/local/sbin/slurm-entrypoint"]
