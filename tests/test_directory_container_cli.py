"""The directory's command line for a test scenario (python -m
clusterforge.lab.directory_container, molecule/tls/prepare.yml): what it refuses before
it touches docker, and the lab's defaults kept. The container itself runs in the tls
molecule scenario (molecule/tls/day2_ldap.yml) and the lab (tests/cluster/test_ldap_logins.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.lab.directory_container import (
    DIRECTORY_ADDRESS,
    DIRECTORY_CONTAINER,
    LabDirectory,
    main,
)


def _args(tmp_path: Path, address: str) -> list[str]:
    return [
        "--container",
        "cf-unit-directory",
        "--dir",
        str(tmp_path / "directory"),
        "--pki-dir",
        str(tmp_path / "pki"),
        "--cluster-name",
        "unit",
        "--address",
        address,
    ]


def test_an_address_off_loopback_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERFORGE_CA_PASSPHRASE", "unit-passphrase")
    with pytest.raises(SystemExit) as stopped:
        main(_args(tmp_path, "192.0.2.10"))
    assert stopped.value.code == 2
    assert "192.0.2.10 is not a loopback address" in capsys.readouterr().err
    assert not (tmp_path / "directory").exists()


def test_the_passphrase_comes_from_the_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    with pytest.raises(SystemExit):
        main(_args(tmp_path, "127.0.0.35"))
    assert "set CLUSTERFORGE_CA_PASSPHRASE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--container", "cf-unit-directory", "--address", "127.0.0.35"])
    assert "--dir, --pki-dir, --cluster-name needed" in capsys.readouterr().err


def test_a_scenario_directory_has_its_own_address_and_name(tmp_path: Path) -> None:
    lab = LabDirectory(lab_dir=tmp_path, secret_file=lambda n: tmp_path / n, pki_dir=tmp_path)
    assert (lab.url, lab.container) == (f"ldaps://{DIRECTORY_ADDRESS}:636", DIRECTORY_CONTAINER)
    own = LabDirectory(
        lab_dir=tmp_path,
        secret_file=lambda n: tmp_path / n,
        pki_dir=tmp_path,
        address="127.0.0.35",
        container="cf-tls-directory",
    )
    assert own.url == "ldaps://127.0.0.35:636"
    assert own.facts()["container"] == "cf-tls-directory"
    assert own.inventory_vars(lambda name: "x")["opensearch_ldap_hosts"] == ["127.0.0.35:636"]
