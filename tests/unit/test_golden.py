"""The golden comparison itself: both ways, so a file render stops producing is caught."""

import pytest

from tests.helpers import golden_tree


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.delenv("UPDATE_GOLDEN", raising=False)
    (tmp_path / "t" / "config").mkdir(parents=True)
    (tmp_path / "t" / "a.yml").write_text("a\n")
    (tmp_path / "t" / "config" / "b.json").write_text("b\n")
    return tmp_path


def test_the_same_tree_passes(tree):
    golden_tree("t", {"a.yml": "a\n", "config/b.json": "b\n"}, root=tree)


def test_a_file_no_longer_produced_fails(tree):
    with pytest.raises(AssertionError, match=r"no longer produced: \['config/b.json'\]"):
        golden_tree("t", {"a.yml": "a\n"}, root=tree)


def test_a_new_file_without_a_golden_twin_fails(tree):
    with pytest.raises(AssertionError, match=r"no golden file for \['c.txt'\]"):
        golden_tree("t", {"a.yml": "a\n", "config/b.json": "b\n", "c.txt": "c\n"}, root=tree)


def test_a_changed_file_fails(tree):
    with pytest.raises(AssertionError, match="differs from"):
        golden_tree("t", {"a.yml": "A\n", "config/b.json": "b\n"}, root=tree)


def test_update_rewrites_and_prunes(tree, monkeypatch):
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    golden_tree("t", {"a.yml": "A\n"}, root=tree)
    assert (tree / "t" / "a.yml").read_text() == "A\n"
    assert not (tree / "t" / "config" / "b.json").exists()
