"""Which file the follower reads (following/layouts.py), on real files; test_tail.py covers it
through the follower."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from vllm_logwatch.following.layouts import LaunchFiles, candidate


def _file(path: Path, mtime: int, text: str = "x\n") -> Path:
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


def _files(target: Path | str, pattern: str = "*.log", state_file: str | None = None) -> LaunchFiles:
    def fail(exc: OSError, path: str) -> None:
        raise AssertionError(f"unexpected listing error {exc} for {path}")

    return LaunchFiles(str(target), pattern, state_file, fail)


def test_folder_first_is_newest_by_mtime_then_name(tmp_path: Path) -> None:
    _file(tmp_path / "serve_20261101_000000.log", 1000)
    _file(tmp_path / "serve_20261102_000000.log", 2000)
    _file(tmp_path / "serve_20261103_000000.log", 2000)  # same mtime: the later name wins
    _file(tmp_path / "notes.txt", 9000)  # not the pattern
    files = _files(tmp_path)
    assert files.mode == "dir"
    files.choose_first(None)
    assert files.initial is not None and files.initial.path.endswith("serve_20261103_000000.log")
    assert [c.path for c in files.next_to_open()] == [files.initial.path]


def test_old_launches_are_never_next_and_a_new_one_is(tmp_path: Path) -> None:
    _file(tmp_path / "a.log", 1000)
    first = _file(tmp_path / "b.log", 2000)
    files = _files(tmp_path)
    files.choose_first(None)
    st = first.stat()
    files.opened(str(first), st.st_dev, st.st_ino)
    current = candidate(str(first))
    assert current is not None
    assert files.next_to_open() == [] and files.newer_launch(current) is None
    new = _file(tmp_path / "c.log", 3000)
    found = files.newer_launch(current)
    assert found is not None and found.path == str(new)


def test_a_renamed_file_already_read_is_not_a_new_launch(tmp_path: Path) -> None:
    first = _file(tmp_path / "b.log", 2000)
    files = _files(tmp_path)
    files.choose_first(None)
    st = first.stat()
    files.opened(str(first), st.st_dev, st.st_ino)
    renamed = tmp_path / "z.log"
    first.rename(renamed)
    os.utime(renamed, (5000, 5000))
    assert files.next_to_open() == []


def test_state_file_names_the_first_file_even_if_older(tmp_path: Path) -> None:
    older = _file(tmp_path / "a.log", 1000)
    newer = _file(tmp_path / "b.log", 2000)
    files = _files(tmp_path)
    files.choose_first((str(older), older.stat().st_ino))
    assert files.initial is not None and files.initial.path == str(older)
    # the newer file is a launch still to read after the saved one
    st = older.stat()
    files.opened(str(older), st.st_dev, st.st_ino)
    current = candidate(str(older))
    assert current is not None
    found = files.newer_launch(current)
    assert found is not None and found.path == str(newer)


def test_state_file_and_its_temporaries_are_never_candidates(tmp_path: Path) -> None:
    _file(tmp_path / "serve.log", 1000)
    state = _file(tmp_path / "state.log", 3000)
    _file(tmp_path / ".state.log.tmp123.log", 4000)
    files = _files(tmp_path, state_file=str(state))
    assert [Path(c.path).name for c in files.scan()] == ["serve.log"]


def test_glob_watches_its_fixed_prefix_and_matched_folders(tmp_path: Path) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n2").mkdir()
    _file(tmp_path / "n1" / "a.log", 1000)
    _file(tmp_path / "n2" / "b.log", 2000)
    files = _files(f"{tmp_path}/n*/*.log")
    assert files.mode == "glob" and glob.has_magic(files.target)
    files.choose_first(None)
    assert files.initial is not None and files.initial.path.endswith("n2/b.log")
    assert files.watch_dirs() == sorted([str(tmp_path), str(tmp_path / "n1"), str(tmp_path / "n2")])


def test_missing_target_settles_its_mode_when_it_appears(tmp_path: Path) -> None:
    target = tmp_path / "logs"
    files = _files(target)
    assert files.mode == "file" and files.scan() == []
    target.mkdir()
    _file(target / "a.log", 1000)
    assert [Path(c.path).name for c in files.scan()] == ["a.log"] and files.mode == "dir"


def test_candidate_is_regular_files_only(tmp_path: Path) -> None:
    assert candidate(str(tmp_path)) is None
    assert candidate(str(tmp_path / "missing.log")) is None
    assert candidate(str(_file(tmp_path / "a.log", 1000))) is not None


def test_listing_error_is_reported_not_raised(tmp_path: Path) -> None:
    target = tmp_path / "logs"
    target.mkdir()
    seen: list[str] = []
    files = LaunchFiles(str(target), "*.log", None, lambda exc, path: seen.append(type(exc).__name__))
    target.rmdir()
    target.write_text("now a file\n")  # listdir fails: NotADirectoryError
    assert files.scan() == [] and seen == ["NotADirectoryError"]
