"""A task's ``dockerImage`` on the local backend, with Charliecloud (``LOCAL_IMAGES=charliecloud``).

Before the sandbox starts, the wrapper (as the portal's user) makes sure the image is in the
portal's image cache (``ch-image`` storage, ``LOCAL_IMAGE_STORAGE``): an image already there is
used as it is (a test imports a directory with ``ch-image import``), else ``ch-image pull``
fetches it, one pull at a time (``flock``), readable by every task's uid (umask 022). Registry
credentials (the dockerimage prerequisite's ``auth``) reach ``ch-image`` through its documented
variables ``CH_IMAGE_USERNAME``/``CH_IMAGE_PASSWORD``, read from a file of the portal's (600,
deleted once read), never on a command line, in the task's environment or in a log.

A pull that fails ends the task before it starts with ``IMAGE_PULL_EXIT`` and its reason in
``PULL_FAILED``: the backend reports ``ErrImagePull: ...``, which the exit spec's image-pull rule
matches (OpenPAI's image pull failure).

The task then runs in the bubblewrap sandbox as before (nothing of the portal, other tasks or
the host's /tmp), and inside it ``ch-run`` enters the image: its root is the image, read-only,
with a private ``/tmp``, the task's working directory bound at ``WORK_IN_IMAGE`` (a mount point
``ch-image`` makes in every image) and nothing of the host's home.
"""

from __future__ import annotations

from pathlib import Path

IMAGE_MOUNT = "/tmp/.portal-image"  # noqa: S108 - where the image is in the bwrap sandbox (its own /tmp)
WORK_IN_IMAGE = "/mnt/0"  # the task's working directory in the image
REGISTRY_AUTH = "registry_auth"  # in the control directory: username and password lines, 600
PULL_FAILED = "image_pull_failed"  # in the control directory: why the pull failed
PULL_LOG = "image_pull.log"
IMAGE_PULL_EXIT = 254  # OpenPAI's exit code for an image pull failure
# Run by the wrapper before the sandbox: $1 storage, $2 image, $3 its directory in the storage,
# then the task's command. ch-image's output goes to the portal's own PULL_LOG; its last line
# (ch-image says "error: ...") is the reason.
# The system's python3 first: ch-image runs on Debian's (with python3-lark), not /usr/local's.
PULL = r"""PATH=/usr/sbin:/usr/bin:/sbin:/bin
storage=$1 image=$2 dir=$3; shift 3
if [ ! -d "$dir" ]; then
  (
    umask 022
    export USER="${USER:-portal}" CH_IMAGE_STORAGE="$storage" CH_IMAGE_CACHE=disabled
    if [ -f registry_auth ]; then
      { IFS= read -r CH_IMAGE_USERNAME; IFS= read -r CH_IMAGE_PASSWORD; } <registry_auth
      export CH_IMAGE_USERNAME CH_IMAGE_PASSWORD CH_IMAGE_AUTH=yes
    fi
    rm -f registry_auth
    mkdir -p "$storage" && exec flock "$storage.lock" ch-image pull -- "$image"
  ) >image_pull.log 2>&1 </dev/null
  if [ $? -ne 0 ] || [ ! -d "$dir" ]; then
    reason=$(grep -v '^ *$' image_pull.log | tail -n 1 | cut -c 1-300)
    printf '%s\n' "${reason:-ch-image pull failed}" >image_pull_failed
    exit 254
  fi
fi
rm -f registry_auth
exec "$@"
"""
# Run in the bwrap sandbox in place of ``/bin/sh <bootstrap>``: the bootstrap (bound read-only
# by bwrap at its path, not in the image) is opened as fd 7 and read from there in the image.
ENTER = f"""exec 7<"$0"
export USER="${{USER:-task}}"
exec ch-run --private-tmp -b "$1:{WORK_IN_IMAGE}" -c {WORK_IN_IMAGE} "$2" -- /bin/sh /dev/fd/7
"""


def storage_name(image: str) -> str:
    """The directory name ``ch-image`` 0.31 stores ``image`` under (``/`` -> ``%``, ``:`` ->
    ``+``), with ``:latest`` added where the reference has no tag or digest, as it does."""
    last = image.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        image += ":latest"
    return image.replace("/", "%").replace(":", "+").replace("@", "+")


def image_dir(storage: Path, image: str) -> Path:
    """Where ``image`` is in the storage once pulled; an image imported under its bare name
    (``ch-image import dir name``) is found under that name too."""
    bare = storage / "img" / image.replace("/", "%").replace(":", "+")
    if bare.is_dir():
        return bare
    return storage / "img" / storage_name(image)


def pull_command(storage: Path, image: str, command: list[str]) -> list[str]:
    """The wrapper's command for a task in ``image``: make sure it is cached, then ``command``."""
    return [
        "/bin/sh",
        "-c",
        PULL,
        "pull",
        str(storage),
        image,
        str(image_dir(storage, image)),
        *command,
    ]


def enter_command(bootstrap: Path, work: Path) -> list[str]:
    """What bwrap runs for a task in an image (in place of ``/bin/sh <bootstrap>``)."""
    return ["/bin/sh", "-c", ENTER, str(bootstrap), str(work), IMAGE_MOUNT]


def registry_auth_file(auth: dict[str, str]) -> str:
    """The content of ``REGISTRY_AUTH``: username and password, a line each."""
    return f"{auth.get('username', '')}\n{auth.get('password', '')}\n"


def pull_failure(control: Path, image: str) -> str | None:
    """The backend's diagnostics for a task whose image could not be pulled, else None."""
    try:
        reason = (control / PULL_FAILED).read_text().strip()
    except OSError:
        return None
    return f"ErrImagePull: ch-image could not pull the image {image!r}: {reason}"
