"""One containment rule for every name that arrives from outside (an S3 key, a manifest entry, an archive member):
it lands inside its directory or it is refused, naming itself."""

from __future__ import annotations

import pytest

from pipeline.containment import PathEscapeError, contained


def test_a_nested_name_lands_inside_the_resolved_directory(tmp_path):
    dest = tmp_path / "dest"
    assert contained(dest, "a.txt") == dest.resolve() / "a.txt"  # dest need not exist yet
    assert contained(dest, "sub/dir/b.bin") == dest.resolve() / "sub" / "dir" / "b.bin"
    assert contained(dest, "..hidden/x..y") == dest.resolve() / "..hidden" / "x..y"  # dots inside a part are a name
    assert contained(dest, "a\\b") == dest.resolve() / "a\\b"  # a backslash is an ordinary character here


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("a/..", "'..'"),
        ("a//b", "empty part"),
        ("a/", "empty part"),
        ("", "empty"),
        ("./a", "'.'"),
        ("a/./b", "'.'"),
        ("a\0b", "NUL"),
    ],
)
def test_a_name_that_could_leave_the_directory_is_refused_naming_itself(tmp_path, name, reason):
    with pytest.raises(PathEscapeError, match=reason) as info:
        contained(tmp_path / "dest", name)
    assert repr(name) in str(info.value)
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "dest").exists()  # a check writes nothing


def test_a_symlink_already_in_the_directory_cannot_carry_a_name_outside(tmp_path):
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "link").symlink_to(outside)
    (dest / "self").symlink_to(dest)
    (dest / "inner").mkdir()
    (dest / "ok").symlink_to(dest / "inner")
    with pytest.raises(PathEscapeError, match=r"'link/x'.*outside"):
        contained(dest, "link/x")
    with pytest.raises(PathEscapeError, match="outside"):
        contained(dest, "self")  # the directory itself is no place for a file
    assert contained(dest, "ok/x") == (dest / "inner" / "x").resolve()


def test_a_non_string_name_is_refused(tmp_path):
    with pytest.raises(PathEscapeError, match="not a string"):
        contained(tmp_path, 3)
