"""Packs the Dashboards STAND-IN (dashboards_standin_server.py) like a release archive.

    python -m clusterforge.lab.dashboards_standin --out FILE.tar.gz [--version X.Y.Z]

writes the archive to FILE.tar.gz and prints its path. The
archive has the release layout the role relies on: ``opensearch-dashboards-<version>/``
with ``package.json`` (which names the version), ``bin/opensearch-dashboards`` and
``config/opensearch_dashboards.yml``. It is for tests only; the README says so.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tarfile
from importlib import resources
from pathlib import Path

from clusterforge.plan.cluster.model_checks import cluster_defaults

_LAUNCHER = """#!/bin/sh
# STAND-IN for OpenSearch Dashboards (clusterforge tests); not the real console.
exec python3 "$(dirname "$0")/../standin/server.py" "$@"
"""
_DEFAULT_CONFIG = "# STAND-IN default config; the role renders the real one.\nserver.port: 5601\n"


def standin_archive_bytes(version: str) -> bytes:
    """The archive, byte for byte the same for the same version (fixed times and owners)."""
    top = f"opensearch-dashboards-{version}"
    server = resources.files("clusterforge.lab").joinpath("dashboards_standin_server.py")
    members = [
        (
            f"{top}/package.json",
            json.dumps(
                {"name": "opensearch-dashboards-standin", "version": version}, indent=2
            ).encode(),
            0o644,
        ),
        (f"{top}/bin/opensearch-dashboards", _LAUNCHER.encode(), 0o755),
        (f"{top}/config/opensearch_dashboards.yml", _DEFAULT_CONFIG.encode(), 0o644),
        (f"{top}/standin/server.py", server.read_bytes(), 0o644),
    ]
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        for directory in (top, f"{top}/bin", f"{top}/config", f"{top}/standin"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            archive.addfile(info)
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_standin_archive(target: Path, version: str) -> Path:
    """Write the archive to ``target`` unless the same bytes are there already."""
    target.parent.mkdir(parents=True, exist_ok=True)
    data = standin_archive_bytes(version)
    if not target.exists() or target.read_bytes() != data:
        target.write_bytes(data)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the archive file to write")
    parser.add_argument(
        "--version",
        default=cluster_defaults()["opensearch_version"],
        help="version the archive claims (default: the engine's default version)",
    )
    args = parser.parse_args(argv)
    print(write_standin_archive(args.out, args.version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
