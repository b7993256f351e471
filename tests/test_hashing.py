"""bcrypt hashes: the format the plugin's hash tool prints, reuse, and the demo-password policy.

The cross-checks run the security plugin's own Java code (from its 2.19.4.0 zip in the
artifact cache) against hashes made here, and the other way round.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import bcrypt
import pytest

from cached_artifacts import ENGINE_VERSION, engine_zip, security_plugin_zip
from clusterforge.pki.hashing import (
    DEFAULT_BCRYPT_ROUNDS,
    DEMO_USER_HASHES,
    DEMO_USER_PASSWORDS,
    PasswordRejectedError,
    check_password_allowed,
    hash_password,
    main,
    reuse_or_hash,
    verify_password,
)

REPO = Path(__file__).resolve().parents[1]

FAST = 4  # bcrypt cost for tests where the cost itself is not under test

CROSS_CHECK_PASSWORDS = [
    "Correct-Horse-7",
    "s3cret Pässwörd ✓ with spaces",
    "quotes ' \" $dollar $2y$ \\ backslash",
    "x" * 72,  # bcrypt's full length
]


# --- format -------------------------------------------------------------------------------


def test_default_is_cost_12_with_the_2y_prefix_of_the_plugins_tool() -> None:
    assert DEFAULT_BCRYPT_ROUNDS == 12
    password_hash = hash_password("Correct-Horse-7")
    assert password_hash.startswith("$2y$12$")
    assert len(password_hash) == 60
    assert verify_password("Correct-Horse-7", password_hash)


def test_rounds_are_a_parameter() -> None:
    assert hash_password("Correct-Horse-7", rounds=FAST).startswith("$2y$04$")
    with pytest.raises(ValueError, match="between 4 and 31"):
        hash_password("Correct-Horse-7", rounds=3)


def test_every_salt_is_new() -> None:
    assert hash_password("Correct-Horse-7", rounds=FAST) != hash_password(
        "Correct-Horse-7", rounds=FAST
    )


@pytest.mark.parametrize("prefix", ["$2a$", "$2b$", "$2y$"])
def test_verify_accepts_each_bcrypt_prefix(prefix: str) -> None:
    made = bcrypt.hashpw(b"Correct-Horse-7", bcrypt.gensalt(FAST)).decode()
    variant = prefix + made[4:]
    assert verify_password("Correct-Horse-7", variant)
    assert not verify_password("Correct-Horse-8", variant)


@pytest.mark.parametrize(
    "bad_hash", ["", "plain", "$1$abc$def", "$2y$04$short", "$2y$99$" + "a" * 53]
)
def test_verify_is_false_for_malformed_hashes(bad_hash: str) -> None:
    assert not verify_password("Correct-Horse-7", bad_hash)


def test_the_demo_hash_table_matches_the_demo_passwords() -> None:
    # The shipped hashes are only worth refusing if each is what the plugin ships: each one
    # verifies against its demo user's password.
    assert set(DEMO_USER_HASHES) == set(DEMO_USER_PASSWORDS)
    for user, demo_hash in DEMO_USER_HASHES.items():
        assert verify_password(DEMO_USER_PASSWORDS[user], demo_hash), user


# --- reuse --------------------------------------------------------------------------------


def test_a_matching_hash_is_reused_unchanged() -> None:
    existing = hash_password("Correct-Horse-7", rounds=FAST)
    assert reuse_or_hash("Correct-Horse-7", existing, rounds=FAST) == existing
    # A hash from another tool with another prefix and cost is reused too.
    foreign = bcrypt.hashpw(b"Correct-Horse-7", bcrypt.gensalt(5, prefix=b"2a")).decode()
    assert reuse_or_hash("Correct-Horse-7", foreign, rounds=FAST) == foreign


def test_a_changed_password_gets_a_new_hash() -> None:
    existing = hash_password("Correct-Horse-7", rounds=FAST)
    fresh = reuse_or_hash("Battery-Staple-9", existing, rounds=FAST)
    assert fresh != existing
    assert verify_password("Battery-Staple-9", fresh)
    assert not verify_password("Correct-Horse-7", fresh)


@pytest.mark.parametrize("existing", [None, "", "not a hash"])
def test_no_usable_hash_means_a_new_one(existing: str | None) -> None:
    made = reuse_or_hash("Correct-Horse-7", existing, rounds=FAST)
    assert made.startswith("$2y$04$") and verify_password("Correct-Horse-7", made)


# --- policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(("user", "password"), sorted(DEMO_USER_PASSWORDS.items()))
def test_every_demo_users_password_is_refused(user: str, password: str) -> None:
    for candidate in (password, password.upper()):
        with pytest.raises(PasswordRejectedError) as caught:
            check_password_allowed("admin", candidate, setting="opensearch_admin_password")
        assert caught.value.reason == "demo"
        assert caught.value.user == "admin"
        message = str(caught.value)
        assert "'admin'" in message and "set opensearch_admin_password to" in message


@pytest.mark.parametrize("password", ["changeit", "changeme", "password", "Password"])
def test_placeholder_passwords_are_refused(password: str) -> None:
    with pytest.raises(PasswordRejectedError, match="demo or placeholder"):
        check_password_allowed("alice", password)


def test_empty_password_is_refused_with_the_user_and_the_fix() -> None:
    with pytest.raises(PasswordRejectedError) as caught:
        check_password_allowed("kibanaserver", "", setting="opensearch_kibanaserver_password")
    assert caught.value.reason == "empty"
    assert str(caught.value) == (
        "the password of internal user 'kibanaserver' is empty; set "
        "opensearch_kibanaserver_password to a non-empty, unique password"
    )
    with pytest.raises(PasswordRejectedError):
        hash_password("", rounds=FAST)


def test_user_name_as_password_is_refused() -> None:
    with pytest.raises(PasswordRejectedError) as caught:
        check_password_allowed("alice", "Alice")
    assert caught.value.reason == "username"


def test_unhashable_passwords_are_refused() -> None:
    with pytest.raises(PasswordRejectedError) as too_long:
        check_password_allowed("alice", "é" * 37)  # 74 bytes in UTF-8
    assert too_long.value.reason == "too_long"
    with pytest.raises(PasswordRejectedError) as nul:
        hash_password("abc\x00def", rounds=FAST)
    assert nul.value.reason == "nul"


def test_a_good_password_passes_and_is_never_in_a_message() -> None:
    check_password_allowed("alice", "Correct-Horse-7")
    secret = "kibanaro"
    with pytest.raises(PasswordRejectedError) as caught:
        check_password_allowed("alice", secret)
    assert secret not in str(caught.value)


# --- the hash tool ------------------------------------------------------------------------


def run_tool(
    *arguments: str, stdin: str | None = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts" / "hash-password"), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_tool_with_dash_p_prints_a_hash() -> None:
    result = run_tool("-p", "Correct-Horse-7", "--rounds", "4")
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip()
    assert printed.startswith("$2y$04$") and verify_password("Correct-Horse-7", printed)


def test_tool_default_cost_is_12() -> None:
    result = run_tool(stdin="Correct-Horse-7\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("$2y$12$")


@pytest.mark.parametrize(
    ("arguments", "stdin", "env"),
    [
        ((), "Correct-Horse-7\n", None),  # piped stdin, one line end dropped
        (("-p", "-"), "Correct-Horse-7", None),
        (("--env", "TEST_HASH_PASSWORD"), None, {"TEST_HASH_PASSWORD": "Correct-Horse-7"}),
    ],
)
def test_tool_reads_the_password_outside_argv(
    arguments: tuple[str, ...], stdin: str | None, env: dict[str, str] | None
) -> None:
    result = run_tool(*arguments, "--rounds", "4", stdin=stdin, env=env)
    assert result.returncode == 0, result.stderr
    assert verify_password("Correct-Horse-7", result.stdout.strip())


def test_tool_refuses_demo_empty_and_unset(capsys: pytest.CaptureFixture[str]) -> None:
    demo = run_tool("-p", "-", "--user", "admin", stdin="admin\n")
    assert demo.returncode == 2 and "internal user 'admin'" in demo.stderr
    assert demo.stdout == ""
    empty = run_tool(stdin="")
    assert empty.returncode == 2 and "empty" in empty.stderr
    env = {key: value for key, value in os.environ.items() if key != "TEST_UNSET_PASSWORD"}
    unset = subprocess.run(
        [str(REPO / "scripts" / "hash-password"), "--env", "TEST_UNSET_PASSWORD"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert unset.returncode == 2 and "TEST_UNSET_PASSWORD is not set" in unset.stderr


def test_tool_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    assert main(["--rounds", "4"], stdin=io.StringIO("Correct-Horse-7\r\n")) == 0
    assert verify_password("Correct-Horse-7", capsys.readouterr().out.strip())


# --- cross-checks with the security plugin's own Java code --------------------------------

VERIFY_JAVA = r"""
import com.password4j.BcryptFunction;
import com.password4j.Password;
import com.password4j.types.Bcrypt;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.CharBuffer;

/** Checks and makes bcrypt hashes the way opensearch-security 2.19 does. */
public class Verify {
    public static void main(String[] args) throws Exception {
        String mode = System.getenv("MODE");
        int cases = Integer.parseInt(System.getenv("CASES"));
        int make = Integer.parseInt(System.getenv("MAKE"));
        Object hasher = null;
        Method check = null;
        Method hash = null;
        if (mode.equals("plugin")) {
            // The plugin's own class (package-private constructor): BCryptPasswordHasher("Y", 12)
            // is what PasswordHasherFactory builds with default settings.
            Class<?> type = Class.forName("org.opensearch.security.hasher.BCryptPasswordHasher");
            Constructor<?> constructor = type.getDeclaredConstructor(String.class, int.class);
            constructor.setAccessible(true);
            hasher = constructor.newInstance("Y", 12);
            check = type.getMethod("check", char[].class, String.class);
            hash = type.getMethod("hash", char[].class);
            check.setAccessible(true);
            hash.setAccessible(true);
        }
        for (int i = 0; i < cases; i++) {
            String password = System.getenv("PW_" + i);
            String stored = System.getenv("HASH_" + i);
            boolean ok;
            String made;
            if (hasher != null) {
                ok = (Boolean) check.invoke(hasher, password.toCharArray(), stored);
            } else {
                // The calls BCryptPasswordHasher.check makes, as javap shows them.
                ok = Password.check(CharBuffer.wrap(password.toCharArray()), stored)
                        .with(BcryptFunction.getInstanceFromHash(stored));
            }
            System.out.println("check " + i + " " + ok);
            if (i < make) {
                made = hasher != null
                        ? (String) hash.invoke(hasher, password.toCharArray())
                        : Password.hash(CharBuffer.wrap(password.toCharArray()))
                                .with(BcryptFunction.getInstance(Bcrypt.Y, 12)).getResult();
                System.out.println("hash " + i + " " + made);
            }
        }
    }
}
"""


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        pytest.skip("java is not on PATH; install a JDK 17 (Debian: openjdk-17-jdk-headless)")
    return java


def extract(zip_path: Path, members: list[str], into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    extracted = []
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        for wanted in members:
            matches = [
                name
                for name in names
                if Path(name).name.startswith(wanted) and name.endswith(".jar")
            ]
            if not matches:
                pytest.fail(f"{zip_path} has no {wanted}*.jar")
            target = into / Path(matches[0]).name
            target.write_bytes(archive.read(matches[0]))
            extracted.append(target)
    return extracted


@pytest.fixture(scope="module")
def plugin_jars(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return extract(
        security_plugin_zip(),
        ["opensearch-security-", "password4j-", "slf4j-api-"],
        tmp_path_factory.mktemp("plugin-jars"),
    )


@pytest.fixture(scope="module")
def engine_jars(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return extract(
        engine_zip(),
        [
            f"opensearch-{ENGINE_VERSION}.jar",
            f"opensearch-core-{ENGINE_VERSION}",
            f"opensearch-common-{ENGINE_VERSION}",
        ],
        tmp_path_factory.mktemp("engine-jars"),
    )


def run_java_cross_check(mode: str, classpath: list[Path], tmp_path: Path) -> None:
    java = require_java()
    hashes = [hash_password(password, rounds=FAST) for password in CROSS_CHECK_PASSWORDS]
    # One wrong-password case per run: a checker that always says yes must fail this test.
    passwords = [*CROSS_CHECK_PASSWORDS, "Wrong-Password-1"]
    hashes.append(hashes[0])
    source = tmp_path / "Verify.java"
    source.write_text(VERIFY_JAVA)
    # Java hashes the first two passwords (plain and non-ASCII) at the tool's cost, 12.
    env = {**os.environ, "MODE": mode, "CASES": str(len(passwords)), "MAKE": "2"}
    for index, (password, password_hash) in enumerate(zip(passwords, hashes, strict=True)):
        env[f"PW_{index}"] = password  # through the environment, never argv
        env[f"HASH_{index}"] = password_hash
    result = subprocess.run(
        [java, "-cp", os.pathsep.join(str(jar) for jar in classpath), str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    checks: dict[int, str] = {}
    made: dict[int, str] = {}
    for line in result.stdout.splitlines():
        kind, number, value = line.split(" ", 2)
        (checks if kind == "check" else made)[int(number)] = value
    assert [checks[index] for index in range(len(passwords))] == ["true"] * len(
        CROSS_CHECK_PASSWORDS
    ) + ["false"]
    # ... and what Java made, Python verifies and reuses unchanged.
    assert sorted(made) == [0, 1]
    for index, java_hash in made.items():
        assert java_hash.startswith("$2y$12$")
        assert reuse_or_hash(passwords[index], java_hash) == java_hash  # it verified


def test_python_hashes_verify_with_password4j_as_the_plugin_calls_it(
    plugin_jars: list[Path], tmp_path: Path
) -> None:
    run_java_cross_check("password4j", plugin_jars, tmp_path)


def test_python_hashes_verify_with_the_plugins_own_hasher(
    plugin_jars: list[Path], engine_jars: list[Path], tmp_path: Path
) -> None:
    run_java_cross_check("plugin", [*plugin_jars, *engine_jars], tmp_path)
