# The two commands a fresh machine needs: `make run` and `make test`.
VENV := .venv
# The interpreter of the virtualenv: the distribution's /usr/bin/python3 when it is 3.11 or newer
# and can make one (Debian's optimised build runs the job protocol and the API about a quarter
# faster than pyenv's default build, which comes first on PATH here), else python3 on PATH.
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo /usr/bin/python3 || echo python3)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TASK_TOOLS := $(VENV)/bin/portal-task-wrapper $(VENV)/bin/portal-task-prelude

.PHONY: run test lint typecheck bench install assets chromium sshd bubblewrap nftables charliecloud \
	vm-tools docker slurm-client slapd oidc-provider clean constraints

# constraints.txt pins every package to the version the tests passed with (see pyproject.toml).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch node_modules/.installed

install: $(STAMP) $(TASK_TOOLS) node_modules/.installed bubblewrap nftables

# The local backend's task wrapper and sandbox prelude (backends/local/wrapper.c and prelude.c
# say why they are C), beside the portal's Python; a C compiler is installed where there is none.
$(VENV)/bin/portal-task-%: backends/local/%.c $(STAMP)
	@command -v cc >/dev/null || (apt-get update && apt-get install -y --no-install-recommends \
		gcc libc6-dev)
	cc -O2 -Wall -Wextra -Werror -o $@ $<

## Set up everything and run the portal (web + worker + beat) on the embedded default.
run: install $(if $(filter charliecloud,$(LOCAL_IMAGES)),charliecloud)
	$(PY) manage.py runportal

chromium:
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)

# Every task on the local backend runs in a bubblewrap sandbox (bwrap); without it the portal
# refuses to start anyone's tasks but an admin's.
bubblewrap:
	@test -x /usr/bin/bwrap || (apt-get update && apt-get install -y bubblewrap)

# As root, local tasks reach no port of this host but their jobs' (the task firewall, nft), and
# their working directory is a file system of its own (mkfs.ext4 of e2fsprogs, a loop mount).
nftables:
	@test -x /usr/sbin/nft -a -x /sbin/mkfs.ext4 || (apt-get update && \
		apt-get install -y --no-install-recommends nftables e2fsprogs)

# LOCAL_IMAGES=charliecloud runs a local task in its dockerImage: ch-image pulls it, ch-run
# enters it (Debian's charliecloud packages); the tests build their image from busybox-static.
charliecloud:
	@test -x /usr/bin/ch-run -a -x /usr/bin/ch-image -a -x /bin/busybox || (apt-get update && \
		apt-get install -y --no-install-recommends charliecloud-runtime charliecloud-builders \
		busybox-static)

# tests/vm boots a Debian 12 VM (a cgroup-v2 host) with QEMU (TCG); mmdebstrap and mke2fs build
# its image once, cached in /var/cache/portal-vm.
vm-tools:
	@test -x /usr/bin/qemu-system-x86_64 -a -x /usr/bin/mmdebstrap -a -x /sbin/mke2fs || \
		(apt-get update && apt-get install -y --no-install-recommends qemu-system-x86 mmdebstrap \
		e2fsprogs)

# tests/compose runs docker-compose.yml for real: Debian's Docker engine and docker-compose, and
# mmdebstrap for the Debian base its images are built on (Docker Hub is out of reach here).
docker:
	@test -x /usr/sbin/dockerd -a -x /usr/bin/docker -a -x /usr/bin/docker-compose -a \
		-x /usr/bin/mmdebstrap || (apt-get update && apt-get install -y --no-install-recommends \
		docker.io docker-compose mmdebstrap)

# tests/slurm run a Slurm cluster in Docker (tests/support/slurm_cluster.py) with this host as its
# submit host: Debian's Slurm clients (22.05, the cluster's version) and a munged of the
# cluster's own (its own socket and key: /etc/munge and /etc/slurm are left alone).
SLURM_CLIENTS := /usr/bin/sbatch /usr/bin/srun /usr/bin/squeue /usr/bin/scontrol /usr/bin/scancel \
	/usr/bin/sinfo /usr/sbin/munged
slurm-client:
	@test -x /usr/bin/sbatch -a -x /usr/sbin/munged || (apt-get update && apt-get install -y \
		--no-install-recommends slurm-client munge)
	@for tool in $(SLURM_CLIENTS); do test -x $$tool || \
		{ echo "slurm-client: $$tool is missing after the install" >&2; exit 1; }; done

# The ssh plugin's test starts sshd in its tasks. Installing the package must not leave a system
# sshd on port 22: Docker's policy-rc.d forbids the start; elsewhere it is stopped again.
sshd:
	@test -x /usr/sbin/sshd || (apt-get update && apt-get install -y openssh-server && \
		(invoke-rc.d ssh stop >/dev/null 2>&1 || :))

# tests/accounts sign in against Debian's OpenLDAP server, slapd, that they start on a port of
# their own (ldap-utils' ldapmodify changes its directory). Installing the package must not
# leave a system slapd running: Docker's policy-rc.d forbids the start; elsewhere it is stopped
# and disabled again.
slapd:
	@test -x /usr/sbin/slapd -a -x /usr/bin/ldapmodify || (apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slapd \
		ldap-utils && (invoke-rc.d slapd stop >/dev/null 2>&1 || :) && \
		(update-rc.d slapd disable >/dev/null 2>&1 || :))

# tests/accounts and tests/browser sign in through a real OpenID Connect provider: panva's
# oidc-provider (OpenID Certified) under Node, from tests/support/oidc-provider's own
# package.json and lock (not the portal's assets, which `make install` puts in node_modules).
OIDC_PROVIDER := tests/support/oidc-provider
$(OIDC_PROVIDER)/node_modules/.installed: $(OIDC_PROVIDER)/package.json $(OIDC_PROVIDER)/package-lock.json
	cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

oidc-provider: $(OIDC_PROVIDER)/node_modules/.installed

## Set up everything and run the whole test suite (PostgreSQL when DATABASE_URL is set).
# Tests get a Redis database of their own, as Django gives them test_<name> in PostgreSQL: a
# portal running on this machine shares no broker queue, lock or counter with them.
TEST_REDIS_URL ?= redis://127.0.0.1:6379/9
test: install chromium sshd charliecloud vm-tools docker slurm-client slapd oidc-provider
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports  # the layers of DESIGN.md: contracts in pyproject.toml
	REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest

lint: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	@for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

## After changing pyproject.toml's bounds and passing the tests: pin what is installed now.
constraints:
	@{ sed -n '1,2p' constraints.txt; $(PY) -m pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) node_modules var
