"""The one writer of generated secrets: modes, reuse, and concurrent first-writer-wins."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import stat
import string
import threading
from pathlib import Path

import pytest

from clusterforge.pki.generated_secrets import (
    GeneratedSecretError,
    alphanumeric,
    read_or_generate,
    url_safe,
)

WRITERS = 8


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_missing_secret_is_generated_0600_in_a_0700_directory(tmp_path: Path) -> None:
    path = tmp_path / "inventory" / ".secrets" / "token"
    old_umask = os.umask(0o022)
    try:
        value = read_or_generate(path)
    finally:
        os.umask(old_umask)
    assert len(value) >= 43  # 32 random bytes, base64url
    assert path.read_text() == value + "\n"
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    # Nothing but the secret is left behind: no temporary file.
    assert [entry.name for entry in path.parent.iterdir()] == ["token"]


def test_an_existing_secret_is_returned_unchanged_and_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "token"
    first = read_or_generate(path)
    before = path.stat()
    assert read_or_generate(path) == first
    assert read_or_generate(path, generate=lambda: "another") == first
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_loosened_modes_are_tightened_again_on_read(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "password"
    value = read_or_generate(path)
    path.chmod(0o644)
    path.parent.chmod(0o755)
    assert read_or_generate(path) == value
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700


def test_a_file_someone_wrote_by_hand_is_read_stripped(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("  chosen-by-the-operator \n")
    assert read_or_generate(path) == "chosen-by-the-operator"
    assert _mode(path) == 0o600


def test_an_empty_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("\n")
    with pytest.raises(GeneratedSecretError) as raised:
        read_or_generate(path, fix="or set my_password (vaulted)")
    message = str(raised.value)
    assert str(path) in message
    assert "remove it" in message
    assert "my_password" in message


def test_a_symlink_in_place_of_the_secret_is_refused_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not a secret\n")
    target.chmod(0o644)
    path = tmp_path / "secrets" / "token"
    path.parent.mkdir()
    path.symlink_to(target)
    with pytest.raises(GeneratedSecretError, match="regular file"):
        read_or_generate(path)
    assert _mode(target) == 0o644


def test_a_directory_in_place_of_the_secret_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.mkdir()
    with pytest.raises(GeneratedSecretError, match="regular file"):
        read_or_generate(path)


@pytest.mark.parametrize("bad", ["", "two\nlines", " padded"])
def test_a_generator_must_give_one_clean_line(tmp_path: Path, bad: str) -> None:
    with pytest.raises(GeneratedSecretError, match="bug"):
        read_or_generate(tmp_path / "token", generate=lambda: bad)
    assert not (tmp_path / "token").exists()


def test_the_generators_give_what_they_promise() -> None:
    letters_and_digits = set(string.ascii_letters + string.digits)
    values = {alphanumeric(32)() for _ in range(50)}
    assert len(values) == 50
    assert all(len(value) == 32 and set(value) <= letters_and_digits for value in values)
    url_safe_chars = letters_and_digits | {"-", "_"}
    token = url_safe(18)()
    assert len(token) == 24 and set(token) <= url_safe_chars


def _race_in_process(path: str, barrier: multiprocessing.synchronize.Barrier, out: str) -> None:
    barrier.wait()
    value = read_or_generate(Path(path))
    Path(out).write_text(value)


def test_concurrent_processes_agree_on_the_first_writers_value(tmp_path: Path) -> None:
    # Processes, not threads only: the runs that race in practice are two ansible-playbook
    # or scripts/up processes on one control node.
    context = multiprocessing.get_context("fork")
    for round_number in range(5):
        path = tmp_path / f"round-{round_number}" / "token"
        barrier = context.Barrier(WRITERS)
        outputs = [tmp_path / f"out-{round_number}-{index}" for index in range(WRITERS)]
        workers = [
            context.Process(target=_race_in_process, args=(str(path), barrier, str(out)))
            for out in outputs
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
            assert worker.exitcode == 0
        seen = {out.read_text() for out in outputs}
        assert seen == {path.read_text().strip()}
        assert _mode(path) == 0o600
        assert [entry.name for entry in path.parent.iterdir()] == ["token"]


def test_concurrent_threads_with_distinct_generators_return_one_value(tmp_path: Path) -> None:
    path = tmp_path / "token"
    barrier = threading.Barrier(WRITERS)
    results: list[str] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        barrier.wait()
        # Every writer would write a different value: all must return the one that won.
        value = read_or_generate(path, generate=lambda: f"value-of-writer-{index}")
        with lock:
            results.append(value)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == WRITERS
    assert len(set(results)) == 1
    assert results[0] == path.read_text().strip()
    assert results[0].startswith("value-of-writer-")
