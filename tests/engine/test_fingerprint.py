from tribuild.engine.fingerprint import package_hash


def _tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


FILES = {"a.py": "x = 1\n", "sub/b.py": "y = 2\n", "notes.txt": "ignored"}


def test_same_sources_same_hash(tmp_path):
    assert package_hash(_tree(tmp_path / "one", FILES)) == package_hash(
        _tree(tmp_path / "two", FILES)
    )


def test_edits_renames_and_additions_change_the_hash(tmp_path):
    base = package_hash(_tree(tmp_path / "base", FILES))
    variants = [
        {**FILES, "a.py": "x = 2\n"},
        {"b.py": "x = 1\n", "sub/b.py": "y = 2\n"},
        {**FILES, "c.py": ""},
        {"a.py": "x = 1\ny = 2\n", "sub/b.py": ""},
    ]
    hashes = {package_hash(_tree(tmp_path / f"v{i}", files)) for i, files in enumerate(variants)}
    assert base not in hashes and len(hashes) == len(variants)


def test_non_python_files_do_not_count(tmp_path):
    assert package_hash(_tree(tmp_path / "one", FILES)) == package_hash(
        _tree(tmp_path / "two", {**FILES, "notes.txt": "changed"})
    )
