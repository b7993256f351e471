"""scripts/test's prefetch lane: the archives each molecule scenario's converge needs,
read from the scenarios' own molecule files (clusterforge.testing.molecule_artifacts)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from clusterforge.testing.molecule_artifacts import interpolate, main, scenario_cluster

REPO = Path(__file__).resolve().parents[1]


def test_each_scenario_asks_for_the_engine_and_plugins_its_molecule_file_names() -> None:
    scenarios = sorted(path.parent.name for path in REPO.glob("molecule/*/molecule.yml"))
    derived = {}
    for scenario in scenarios:
        cluster = scenario_cluster(REPO, scenario)
        derived[scenario] = (
            None
            if cluster is None
            else (
                cluster.distribution.source,
                cluster.version,
                tuple((plugin.name, plugin.source) for plugin in cluster.plugins),
            )
        )
    analyzer = (("analysis-smartcn", "build"),)
    assert derived == {
        "basic": ("maven", "2.19.4", ()),
        "open": ("maven", "2.19.4", ()),
        # No OpenSearch node: services.yml fetches no engine.
        "services": None,
        "tls": ("maven", "2.19.4", analyzer),
        "upgrade": ("maven", "2.19.3", analyzer),
    }


def test_interpolation_follows_molecule() -> None:
    environment = {"SET": "value", "EMPTY": ""}
    assert interpolate("${SET}/$SET/${UNSET}/$$HOME", environment) == "value/value//$HOME"
    assert interpolate("${UNSET:-20000} ${EMPTY:-d} ${EMPTY-d}", environment) == "20000 d "


def _plugin_zip(path: Path, name: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr(
            "plugin-descriptor.properties",
            f"name={name}\nversion={version}.0\nopensearch.version={version}\n",
        )
    return path


def test_prefetch_fills_the_cache_from_a_scenario_and_the_shared_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in checkout: the shared config names the engine file by
    ${MOLECULE_PROJECT_DIRECTORY}, the scenario its version and a value its prepare
    would write (a lookup), as the tls scenario's bind password."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CLUSTERFORGE_CACHE", str(cache))
    with zipfile.ZipFile(tmp_path / "engine.zip", "w") as bundle:
        bundle.writestr("opensearch-2.19.3/lib/lucene-core-9.12.2.jar", b"stand-in")
    _plugin_zip(tmp_path / "security.zip", "opensearch-security", "2.19.3")
    (tmp_path / ".config/molecule").mkdir(parents=True)
    (tmp_path / ".config/molecule/config.yml").write_text(
        "provisioner:\n  inventory:\n    group_vars:\n      opensearch:\n"
        "        opensearch_security_mode: open\n"
        "        opensearch_distribution_source: file\n"
        "        opensearch_distribution_path: ${MOLECULE_PROJECT_DIRECTORY}/engine.zip\n"
        "        opensearch_security_plugin_path: ${MOLECULE_PROJECT_DIRECTORY}/security.zip\n"
        "        opensearch_limit_nofile: ${CLUSTERFORGE_TEST_UNSET_LIMIT:-20000}\n"
    )
    (tmp_path / "molecule/stand-in").mkdir(parents=True)
    (tmp_path / "molecule/stand-in/molecule.yml").write_text(
        "platforms:\n"
        + "".join(f"  - {{name: node-{n}, groups: [opensearch]}}\n" for n in (1, 2, 3))
        + "provisioner:\n  inventory:\n    group_vars:\n      opensearch:\n"
        "        opensearch_version: '2.19.3'\n"
        "        opensearch_ldap_bind_dn: \"{{ lookup('ansible.builtin.file',"
        " '${MOLECULE_EPHEMERAL_DIRECTORY}/missing') }}\"\n"
        "    host_vars:\n"
        + "".join(f"      node-{n}: {{opensearch_network_host: 127.0.0.{n}}}\n" for n in (1, 2, 3))
    )

    assert main(["--repo", str(tmp_path), "stand-in@2.17.14"]) == 0
    out = capsys.readouterr().out
    assert (cache / "opensearch-2.19.3-file.zip").read_bytes() == (
        tmp_path / "engine.zip"
    ).read_bytes()
    assert "stand-in: engine 2.19.3: fetched" in out

    assert main(["--repo", str(tmp_path), "stand-in"]) == 0
    assert "stand-in: engine 2.19.3: cached" in capsys.readouterr().out


def test_prefetch_fails_naming_a_missing_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(tmp_path), "nonesuch"]) == 1
    assert "molecule/nonesuch/molecule.yml" in capsys.readouterr().err


def test_prefetch_names_the_scenario_and_the_variable_it_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "molecule/bad").mkdir(parents=True)
    (tmp_path / "molecule/bad/molecule.yml").write_text(
        "platforms:\n"
        + "".join(f"  - {{name: node-{n}, groups: [opensearch]}}\n" for n in (1, 2, 3))
        + "provisioner:\n  inventory:\n    group_vars:\n      opensearch:\n"
        "        opensearch_security_mode: open\n        opensearch_version: '2.19'\n"
        "    host_vars:\n"
        + "".join(f"      node-{n}: {{opensearch_network_host: 127.0.0.{n}}}\n" for n in (1, 2, 3))
    )
    assert main(["--repo", str(tmp_path), "bad"]) == 1
    err = capsys.readouterr().err
    assert "scenario bad:" in err
    assert "opensearch_version '2.19' is malformed" in err


def test_prefetch_refuses_an_inventory_form_it_does_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "molecule/linked").mkdir(parents=True)
    (tmp_path / "molecule/linked/molecule.yml").write_text(
        "platforms: [{name: node-1, groups: [opensearch]}]\n"
        "provisioner:\n  inventory:\n    links: {group_vars: ../../inventories/x/group_vars}\n"
    )
    assert main(["--repo", str(tmp_path), "linked"]) == 1
    assert "provisioner.inventory.links is not read" in capsys.readouterr().err
