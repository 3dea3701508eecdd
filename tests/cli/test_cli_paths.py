"""Every OS error on a path the user gave is one line naming the path, exit 2: models,
--input arrays, --json and --report files, --output-dir folders."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cli_helpers import conv_bn_pool_model

from fusionlang.cli import main


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("paths")
    conv_bn_pool_model(root / "m.onnx")
    (root / "folder").mkdir()
    (root / "a_file").write_text("not a folder")
    os.mkfifo(root / "fifo")
    good = np.ones((1, 3, 8, 8), np.float32)
    np.save(root / "good.npy", good)
    data = (root / "good.npy").read_bytes()
    (root / "truncated.npy").write_bytes(data[:-8])
    (root / "empty.npy").write_bytes(b"")
    np.savez(root / "archive.npz", x=good)
    (root / "pickle.npy").write_bytes(b"\x80\x04\x95" + bytes(20))
    return root


def fails(capsys, argv, message):
    """Exit 2 with exactly ``fusionlang: error: <message>`` on stderr."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert (status, err) == (2, f"fusionlang: error: {message}\n")


@pytest.mark.parametrize("name, reason", [
    ("folder", "it is a directory"),
    ("fifo", "not a regular file (a fifo, socket or device)"),
    ("missing.onnx", "no such file or directory"),
    ("a_file/m.onnx", "not a directory"),
])
@pytest.mark.parametrize("command", [["fuse"], ["run", "--random-inputs", "0"], ["explain", "--node", "n"]])
def test_a_model_that_is_not_a_readable_file(capsys, place, command, name, reason):
    path = place / name
    fails(capsys, [command[0], path, *command[1:]], f"cannot read model {str(path)!r}: {reason}")


def test_a_device_is_not_read_as_a_model(capsys):
    fails(capsys, ["fuse", "/dev/zero"], "cannot read model '/dev/zero': not a regular file (a fifo, socket or device)")


@pytest.mark.parametrize("name, reason", [
    ("folder", "it is a directory"),
    ("fifo", "not a regular file (a fifo, socket or device)"),
    ("missing.npy", "no such file or directory"),
    ("empty.npy", "not a .npy file (an .npz archive, a pickle or other data)"),
    ("archive.npz", "not a .npy file (an .npz archive, a pickle or other data)"),
    ("pickle.npy", "not a .npy file (an .npz archive, a pickle or other data)"),
    ("truncated.npy", "its header declares shape [1, 3, 8, 8] (768 bytes) but the file holds 760 bytes of data"),
])
def test_an_input_array_that_cannot_be_read(capsys, place, name, reason):
    path = place / name
    fails(capsys, ["run", place / "m.onnx", "--input", f"x={path}"], f"--input x: cannot read {str(path)!r}: {reason}")


def test_a_header_declaring_more_than_the_file_holds_allocates_nothing(capsys, place):
    path = place / "huge.npy"
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000000), }"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header.ljust(118) + "\n").to_bytes(2, "little")
                     + (header.ljust(118) + "\n").encode() + bytes(4))
    declared = 100000000000 * 100000000000 * 4
    fails(capsys, ["run", place / "m.onnx", "--input", f"x={path}"],
          f"--input x: cannot read {str(path)!r}: its header declares shape [100000000000, 100000000000] "
          f"({declared} bytes) but the file holds 4 bytes of data")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file(capsys, place, tmp_path):
    locked = tmp_path / "locked.npy"
    np.save(locked, np.ones((1, 3, 8, 8), np.float32))
    locked.chmod(0)
    fails(capsys, ["run", place / "m.onnx", "--input", f"x={locked}"],
          f"--input x: cannot read {str(locked)!r}: permission denied")
    fails(capsys, ["fuse", locked], f"cannot read model {str(locked)!r}: permission denied")


@pytest.mark.parametrize("flag", ["--json", "--report"])
def test_fuse_output_files(capsys, place, flag):
    model = place / "m.onnx"
    missing = place / "no_such_dir" / "out"
    fails(capsys, ["fuse", model, flag, missing],
          f"cannot write {str(missing)!r}: no such directory {str(place / 'no_such_dir')!r}")
    fails(capsys, ["fuse", model, flag, place / "folder"], f"cannot write {str(place / 'folder')!r}: it is a directory")
    under_file = place / "a_file" / "out"
    fails(capsys, ["fuse", model, flag, under_file],
          f"cannot write {str(under_file)!r}: {str(place / 'a_file')!r} is not a directory")
    too_long = place / ("n" * 300)
    fails(capsys, ["fuse", model, flag, too_long], f"cannot write {str(too_long)!r}: file name too long")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_write_that_fails_midway(capsys, place):
    fails(capsys, ["fuse", place / "m.onnx", "--json", "/dev/full"], "cannot write '/dev/full': no space left on device")


def test_a_device_may_take_the_output(capsys, place):
    assert main(["fuse", str(place / "m.onnx"), "--json", os.devnull, "--report", os.devnull]) == 0
    assert capsys.readouterr().err == ""


def test_demo_report_into_a_missing_folder(capsys, place):
    missing = place / "no_such_dir" / "demo.html"
    fails(capsys, ["demo", "--report", missing],
          f"cannot write {str(missing)!r}: no such directory {str(place / 'no_such_dir')!r}")


@pytest.mark.parametrize("target, reason", [
    (os.devnull, "not a directory"),
    ("a_file", "not a directory"),
    ("a_file/sub", "{a_file!r} is not a directory"),
])
def test_run_output_dir_that_cannot_be_a_folder(capsys, place, target, reason):
    directory = place / target
    reason = reason.format(a_file=str(place / "a_file"))
    fails(capsys, ["run", place / "m.onnx", "--random-inputs", "0", "--output-dir", directory],
          f"cannot write to {str(directory)!r}: {reason}")


def test_run_output_dir_is_created(capsys, place, tmp_path):
    directory = tmp_path / "a" / "b"
    assert main(["run", str(place / "m.onnx"), "--random-inputs", "0", "--output-dir", str(directory)]) == 0
    assert np.load(directory / "y.npy").shape == (1, 4, 4, 4)


def test_a_file_that_cannot_be_opened(capsys, place, monkeypatch):
    # what an unreadable file does for a user who is not root (root reads whatever the mode)
    model, good = place / "m.onnx", place / "good.npy"
    locked = set()

    def opener(path, *args, **kwargs):
        if str(path) in locked:
            raise PermissionError(13, "Permission denied", str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr("fusionlang.cli.paths.open", opener, raising=False)
    locked.add(str(model))
    fails(capsys, ["fuse", model], f"cannot read model {str(model)!r}: permission denied")
    locked.clear()
    locked.add(str(good))
    fails(capsys, ["run", model, "--input", f"x={good}"], f"--input x: cannot read {str(good)!r}: permission denied")
