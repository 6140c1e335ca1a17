"""outputs.writing: one writer of an output folder at a time among a build's processes."""

from tribuild.driver import outputs


def test_a_second_writer_is_told_no_without_waiting_and_yes_once_the_first_is_done(tmp_path):
    out = str(tmp_path / "out")
    with outputs.writing(out, wait=True) as first:
        assert first
        with outputs.writing(out, wait=False) as second:
            assert not second
    with outputs.writing(out, wait=False) as third:
        assert third


def test_the_folder_is_created(tmp_path):
    with outputs.writing(str(tmp_path / "a" / "b"), wait=False) as mine:
        assert mine and (tmp_path / "a" / "b").is_dir()
