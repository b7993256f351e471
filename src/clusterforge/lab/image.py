"""The lab image: Debian bookworm from debootstrap, imported into docker, no registry.

The image is named by a hash of its recipe (the package list and the setup commands),
so a changed recipe builds a new image and an unchanged one is reused.

`python3 -m clusterforge.lab.image` prepares the lab host (docker engine, kernel setting,
image) with the standard library alone, so a fresh machine can start the build before
the project's virtualenv exists (.ci/run does).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterforge.errors import LabError
from clusterforge.lab.engine import apt_install, ensure_docker_engine, ensure_max_map_count
from clusterforge.lab.process import run, say

IMAGE_REPOSITORY = "clusterforge-lab"
# The tag that molecule scenarios and the lab use; it always points at the image built
# from the current recipe.
CURRENT_IMAGE = f"{IMAGE_REPOSITORY}:current"
SUITE = "bookworm"

# minbase has no unzip, no init, no sshd: everything a host of ours needs is named here.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    # The services' virtualenvs: Debian keeps the venv module's pip (ensurepip) here.
    "python3-venv",
    "python3-apt",
    # The Dashboards stand-in (tests only) reads its YAML config with it.
    "python3-yaml",
    "openssh-server",
    "sudo",
    "openjdk-17-jre-headless",
    "procps",
    "iproute2",
    "curl",
    "ca-certificates",
    "unzip",
    "openssl",
)

# Units that make no sense in a container and would only slow boot or fail noisily.
MASKED_UNITS = (
    "getty.target",
    "console-getty.service",
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "systemd-modules-load.service",
    "sys-kernel-config.mount",
    "sys-kernel-debug.mount",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
)

RECIPE_FORMAT = 1


def recipe() -> dict[str, object]:
    return {
        "format": RECIPE_FORMAT,
        "suite": SUITE,
        "packages": list(PACKAGES),
        "masked_units": list(MASKED_UNITS),
    }


def recipe_tag() -> str:
    digest = hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()
    return f"{IMAGE_REPOSITORY}:{digest[:12]}"


def host_debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str | None:
    """The Debian mirror this machine's own apt uses, so the lab needs no address of ours.

    Returns None when no bookworm source is configured; debootstrap then uses its own
    default.
    """
    candidates: list[tuple[str, str]] = []
    for path in sorted(sources_dir.glob("sources.list.d/*.sources")):
        for stanza in path.read_text(errors="replace").split("\n\n"):
            fields = dict(
                (key.strip().lower(), value.strip())
                for key, _separator, value in (
                    line.partition(":") for line in stanza.splitlines() if ":" in line
                )
                if not key.startswith("#")
            )
            if "deb" in fields.get("types", "").split():
                for uri in fields.get("uris", "").split():
                    candidates.append((uri, fields.get("suites", "")))
    legacy = sources_dir / "sources.list"
    if legacy.exists():
        for line in legacy.read_text(errors="replace").splitlines():
            match = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
            if match:
                candidates.append((match.group(1), match.group(2)))
    for uri, suites in candidates:
        if SUITE in suites.split() and "security" not in uri:
            return uri
    return None


# One preparation at a time on this machine: a second one waits for the first and then
# finds its image, instead of starting dockerd or debootstrap a second time.
PREPARE_LOCK = Path(tempfile.gettempdir()) / "clusterforge-lab-prepare.lock"


@contextmanager
def _prepare_lock() -> Iterator[None]:
    # Read-only is enough for flock, and lets a user without root (whose docker engine
    # and image already exist) take the lock on the file root created.
    descriptor = os.open(PREPARE_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another preparation of the lab host to finish ({PREPARE_LOCK})")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def prepare_lab_host() -> str:
    """A running docker engine, the kernel setting, and the lab image; returns its tag."""
    with _prepare_lock():
        ensure_docker_engine()
        ensure_max_map_count()
        return ensure_lab_image()


def image_exists(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], check=False).returncode == 0


def ensure_lab_image() -> str:
    """Return the tag of the lab image, building it first when the recipe is new."""
    tag = recipe_tag()
    if image_exists(tag):
        run(["docker", "tag", tag, CURRENT_IMAGE])
        return tag
    if os.geteuid() != 0:
        raise LabError(f"the lab image {tag} must be built, and debootstrap needs root")
    if shutil.which("debootstrap") is None:
        say("installing Debian's debootstrap")
        apt_install("debootstrap")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="clusterforge-rootfs-") as workdir:
        rootfs = Path(workdir) / "rootfs"
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(rootfs),
        ]
        mirror = host_debian_mirror()
        if mirror:
            command.append(mirror)
        say(f"building the lab image {tag} with debootstrap (about a minute or two)")
        _run_with_progress(command, "debootstrap")
        _configure_rootfs(rootfs)
        say("importing the root filesystem into docker")
        tar = subprocess.Popen(  # noqa: S603
            ["tar", "-C", str(rootfs), "-c", "."],  # noqa: S607
            stdout=subprocess.PIPE,
        )
        result = subprocess.run(  # noqa: S603
            [  # noqa: S607
                "docker",
                "import",
                "--change",
                'CMD ["/sbin/init"]',
                "--change",
                "ENV container=docker",
                "-",
                tag,
            ],
            stdin=tar.stdout,
            capture_output=True,
            check=False,
        )
        assert tar.stdout is not None  # noqa: S101 - narrows the type; PIPE always sets it
        # Closing our end lets tar see a broken pipe, instead of blocking, if import fails.
        tar.stdout.close()
        tar.wait()
        if result.returncode != 0 or tar.returncode != 0:
            raise LabError(f"docker import failed: {result.stderr.decode(errors='replace')}")
    run(["docker", "tag", tag, CURRENT_IMAGE])
    say(f"lab image {tag} built in {time.monotonic() - started:.0f}s")
    return tag


def _run_with_progress(command: list[str], label: str) -> None:
    """Run a long command, turning its output into a progress line every 15 seconds."""
    process = subprocess.Popen(  # noqa: S603
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None  # noqa: S101 - narrows the type; PIPE always sets it
    last = time.monotonic()
    tail: list[str] = []
    for line in process.stdout:
        tail = [*tail[-30:], line.rstrip()]
        if time.monotonic() - last > 15:
            say(f"{label}: {line.strip()[:100]}")
            last = time.monotonic()
    if process.wait() != 0:
        raise LabError(f"{label} failed:\n" + "\n".join(tail))


def _configure_rootfs(rootfs: Path) -> None:
    """Make the tree boot as a container host: masked units, empty machine-id, sshd keyed."""
    system = rootfs / "etc/systemd/system"
    for unit in MASKED_UNITS:
        link = system / unit
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to("/dev/null")
    (rootfs / "etc/machine-id").write_text("")
    # Host keys are made per container at first boot (sshd-keygen below), not baked in.
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    keygen = system / "clusterforge-sshd-keygen.service"
    keygen.write_text(
        "[Unit]\nDescription=Create SSH host keys on first boot\n"
        "Before=ssh.service\nConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\n\n"
        "[Service]\nType=oneshot\nExecStart=/usr/bin/ssh-keygen -A\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    wants = system / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / keygen.name
    if not link.exists():
        link.symlink_to(f"/etc/systemd/system/{keygen.name}")
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*.deb"):
            entry.unlink()


def main() -> int:
    try:
        tag = prepare_lab_host()
    except LabError as error:
        print(f"clusterforge: error: {error}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
