"""Student copies: the course's tracked files with the handed-out solutions removed.

    python -m minattn.course.classroom student DIR  # a student copy, every solution removed
    python -m minattn.course.classroom student DIR --only 1 2.1 # hand out lesson 1 and exercise 2.1

A student copy holds the files git tracks, with each handed-out region's body replaced by
`raise NotImplementedError("Exercise 1.1: ...")`, without tests/hidden/, with the student's
own README.md (the exercises, what to run, how to check them and hand them in; the course's
README becomes COURSE.md), and a manifest (`.student-copy`) of the files the tool wrote:
building again into the same folder needs `--force`, and even then only the tool's own files
are replaced; a file the student edited keeps the student's region bodies (of the exercises
handed out again) and is first copied to a new backup folder; files the tool did not write are
never touched.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from .. import REPO_ROOT
from .regions import (
    Exercise,
    all_exercises,
    by_id,
    descriptions,
    expand_ids,
    find_exercises,
    id_key,
    lesson_of,
    splice,
    strip_shown,
    strip_solutions,
    summary,
)

# What never goes into a copy (environments, generated and fetched files).
IGNORED = (".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis",
           ".ipynb_checkpoints", "figures", "figures-smoke", "notebooks", "notebooks-smoke",
           "notebooks-class", "notebooks-smoke-class",
           "student", "bench_results", "data",
           "build", "*.pyc", ".student-copy", ".student-backup-*", "submissions", "grades*.csv")
COURSE_DIRS = ("minattn", "lessons", "tests", "benchmarks", "data_scripts")
HIDDEN_TESTS = "tests/hidden"
MANIFEST = ".student-copy"
TOOL = "minattn.course.classroom"
# Copies made by earlier versions of the course carry the older names in their manifest.
MADE_BY = (TOOL, "minattn.classroom", "minattn.tools.exercises")


# ============================================================================ copies
def _ignored(rel: str, student: bool) -> bool:
    parts = Path(rel).parts
    if any(fnmatch.fnmatch(p, pat) for p in parts for pat in IGNORED):
        return True
    return student and (rel == HIDDEN_TESTS or rel.startswith(HIDDEN_TESTS + "/"))


def source_files(root: Path = REPO_ROOT, student: bool = True,
                 tracked_only: bool | None = None) -> list[str]:
    """The files a copy holds (relative paths), minus IGNORED (and tests/hidden/ for a student
    copy). In a git checkout: the files git tracks; with `tracked_only` False (the default for
    the teacher's own copies, never for a student's), also new files in the course's folders.
    Outside git: every file."""
    root = Path(root)
    tracked_only = student if tracked_only is None else tracked_only
    files = None
    if (root / ".git").exists():
        files = _git_files(root, "--cached")
        if files is not None and not tracked_only:
            # untracked files only inside the course's own folders: a teacher's grades.csv or
            # submissions/ next to them never go anywhere
            files += _git_files(root, "--others", "--exclude-standard", "--", *COURSE_DIRS) or []
    if files is None:
        files = [str(p.relative_to(root)) for p in root.rglob("*")]
    keep = []
    for rel in sorted(set(files)):
        path = root / rel
        if path.is_file() and not path.is_symlink() and not _ignored(rel, student):
            keep.append(rel)
    return keep


def _git_files(root: Path, *args) -> list[str] | None:
    proc = subprocess.run(["git", "ls-files", "-z", *args], cwd=root, capture_output=True)
    return [f for f in proc.stdout.decode().split("\0") if f] if proc.returncode == 0 else None


def untracked_course_files(root: Path = REPO_ROOT) -> list[str]:
    """Files in the course's folders that git does not track: never copied to a student."""
    if not (Path(root) / ".git").exists():
        return []
    new = _git_files(Path(root), "--others", "--exclude-standard", "--", *COURSE_DIRS) or []
    return sorted(f for f in new if not _ignored(f, student=False))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_copy_manifest(dest: Path) -> dict | None:
    """The manifest of a student copy made by this tool, or None."""
    try:
        manifest = json.loads((Path(dest) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("made_by") in MADE_BY else None


def manifest_problem(manifest: dict, dest: Path) -> str | None:
    """What makes a manifest unsafe to act on (None if nothing): every entry must be a plain
    relative path to a regular file inside the copy, with a sha256, and the exercises a list
    of strings. A rebuild touches only the files a valid manifest lists."""
    files, exercises = manifest.get("files"), manifest.get("exercises", [])
    if not isinstance(files, dict) or not isinstance(exercises, list) or not all(
            isinstance(e, str) for e in exercises):
        return "its file list or exercise list is not what this tool writes"
    dest = Path(dest).resolve()
    for rel, digest in files.items():
        pure = PurePosixPath(rel) if isinstance(rel, str) else None
        if (pure is None or not rel or pure.is_absolute() or "\\" in rel or ".." in pure.parts
                or pure.as_posix() != rel or rel == MANIFEST or _ignored(rel, student=True)):
            return f"it lists {rel!r}, which is not a file this tool writes into a copy"
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            return f"its checksum of {rel!r} is not a sha256"
        path = dest / rel
        parent = path.parent.resolve()
        if parent != dest and dest not in parent.parents:
            return f"{rel!r} leads outside the copy"
    return None


def _check_destination(dest: Path, root: Path, force: bool) -> dict | None:
    root = root.resolve()
    if dest == root or dest in root.parents:
        raise ValueError(f"the student copy cannot go in {dest}: that folder holds the course "
                         "itself")
    if root in dest.parents and dest != root / "student":
        raise ValueError(f"a student copy inside the repository must be ./student, got {dest}")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} exists and is not a folder")
    if not dest.exists() or not any(dest.iterdir()):
        return None
    manifest = read_copy_manifest(dest)
    if manifest is None:
        raise ValueError(f"{dest} is not empty and is not a student copy made by this tool: "
                         "nothing was written. Choose a new or empty folder.")
    if (problem := manifest_problem(manifest, dest)) is not None:
        raise ValueError(f"the manifest {dest / MANIFEST} cannot be trusted: {problem}. Nothing "
                         "was written. Choose a new folder, or restore the manifest.")
    if not force:
        raise ValueError(f"{dest} already holds a student copy (made {manifest.get('made', '?')}, "
                         f"exercises {' '.join(manifest.get('exercises', []))}). Nothing was "
                         "written. To rebuild it pass --force (make student FORCE=1): the "
                         "tool's files are replaced, files it did not write are kept, and the "
                         "student's work in the regions of exercises handed out again stays "
                         "where it is (each edited file is also copied to a backup folder).")
    return manifest


def _new_backup(dest: Path) -> Path:
    """A backup folder that no earlier backup uses (two rebuilds in one second included)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10000):
        backup = dest / (f".student-backup-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            backup.mkdir()
            return backup
        except FileExistsError:
            continue
    raise ValueError(f"too many backup folders in {dest}")


STUDENT_README = """# minattn — your copy of the course

This is your copy of minattn, a course on attention mechanisms in runnable Python (the course's
own README is [COURSE.md](COURSE.md): the lessons, what each one teaches, how to run them).
Your teacher took out the solutions of {n} exercise{s}. Each one is a stub between two marker
lines in the library, for you to replace with your code:

```python
    # BEGIN EXERCISE 1.1 implement: stable masked softmax over the last axis (~15 min)
    raise NotImplementedError("Exercise 1.1: stable masked softmax over the last axis")
    # END EXERCISE
```

Write your code between the markers and keep the two marker lines: what lies between them is
what your teacher grades, nothing else of your copy.

## Your exercises

| exercise | lesson | kind | time | what | where |
|---|---|---|---|---|---|
{rows}

*implement*: write that piece of the mechanism (its tests call it). *predict*: answer the
question in the function's docstring before you run anything, by returning your answer.
*experiment*: run what the docstring says and return the number you measured. A predict or
experiment answer that is given in the right form shows `answered`: your teacher's tests check
its value.

## What to run

```bash
make setup                 # once: Python's packages, into .venv/ (a few minutes)
make exercises             # the check: one line per exercise (PASS, FAIL, answered, ...)
make exercises EX=1.1      # one exercise (EX=1: every exercise of lesson 1)
make exercises EX=1.1 TB=1 # ... with pytest's tracebacks
make data                  # the lessons' datasets (without them: a synthetic task)
.venv/bin/python lessons/01_attention.py   # a lesson, as a script
make lab                   # the lessons as notebooks, in JupyterLab
```

A fresh copy is *meant* to fail its exercises: `make exercises` shows each one as `not
implemented yet`, and the course's whole test suite (`pytest`) fails every test that reaches a
stub, with `NotImplementedError: Exercise 1.1: ...` (the tests of what is built on it too:
attention calls your softmax). Those failures go away as you write the exercises; any other
failure is worth a look. A lesson that reaches an exercise you have not done yet stops with one
line naming it and where it is. The check's row of an exercise says what is in the way: its
stub, an exercise it waits on (attention uses the softmax), or the first failing test with the
values it compared.

## Asking for a check

`make exercises EX=<id>` is the check, as often as you like: it runs the tests of that exercise
that you can see. Your teacher grades the code between the markers with more tests than these
(hidden ones, which check predict answers' values too), so a PASS is a good sign, not yet a
grade. Stuck? Show your teacher the row and `make exercises EX=<id> TB=1`.

## Handing in

Hand in this whole folder, as your teacher asks (a zip of it, say). Only the code between the
markers of the exercises handed out is read; the other files may be as you like.
"""


def student_readme(ids, stripped: dict[str, bytes], root: Path) -> str:
    """The student copy's README.md: the exercises `ids` (where each is in the copy, whose
    files `stripped` holds), what to run, how to check and hand in."""
    groups = by_id(all_exercises(root))
    rows = []
    for ex_id in ids:
        first = summary(groups[ex_id])
        rel = str(groups[ex_id][0].path)
        line = next((e.line for e in find_exercises(stripped[rel].decode(), Path(rel))
                     if e.id == ex_id), groups[ex_id][0].line) if rel in stripped else first.line
        time = f"~{first.minutes} min" if first.minutes else ""
        what = first.what.replace("|", "\\|")
        rows.append(f"| {ex_id} | {lesson_of(ex_id, root)} | {first.kind} | {time} | {what} | "
                    f"`{rel}:{line}` |")
    return STUDENT_README.format(n=len(ids), s="" if len(ids) == 1 else "s",
                                 rows="\n".join(rows))


def make_student_copy(dest: Path, root: Path = REPO_ROOT, only=None, force: bool = False,
                      reset: bool = False) -> list[Exercise]:
    """Copy the repository's tracked files to `dest` with the solutions removed (all, or the
    ids/lessons in `only`); returns the regions removed. Refuses a non-empty `dest` that is not
    a student copy made here, and one that is unless `force`; never deletes or moves a file it
    did not write. On a rebuild, a file the student edited keeps the student's region bodies
    of every exercise handed out both times (`reset`: the stubs again); the edited file is
    copied to a backup folder first either way."""
    root = Path(root)
    dest = Path(dest).resolve()
    exercises = all_exercises(root)
    ids = expand_ids(only, [e.id for e in exercises]) if only else sorted(
        {e.id for e in exercises}, key=id_key)
    old = _check_destination(dest, root, force)  # every check before the first write
    what = descriptions(exercises)
    strip_paths = {str(e.path) for e in exercises if e.id in ids}
    new_files: dict[str, bytes] = {}
    for rel in source_files(root, student=True):
        data = (root / rel).read_bytes()
        if rel in strip_paths:
            data = strip_solutions(data.decode(), set(ids), what).encode()
        elif rel.startswith("lessons/") and rel.endswith(".py"):
            data = strip_shown(data.decode(), set(ids)).encode()
        new_files[rel] = data
    if "README.md" in new_files:  # the course's README is the teacher's: the student gets one
        new_files["COURSE.md"] = new_files["README.md"]
    new_files["README.md"] = student_readme(ids, new_files, root).encode()
    for rel in new_files:  # a folder on the way that links out of the copy: refuse, write nothing
        folder = (dest / rel).parent
        while not folder.exists() and folder != dest:
            folder = folder.parent
        if folder.resolve() != dest and dest not in folder.resolve().parents:
            raise ValueError(f"{folder} leads outside {dest} (a link?): nothing was written")
    left_out = untracked_course_files(root)
    if left_out:
        print(f"not tracked by git, left out of the copy: {' '.join(left_out)}")

    backup = None
    kept_work, merged = [], {}
    old_files = (old or {}).get("files", {})
    again = set(ids) & set((old or {}).get("exercises", []))
    for rel, digest in old_files.items():  # --force: the tool's own files
        path = dest / rel
        if path.is_symlink():  # never followed: the link itself goes aside
            backup = backup or _new_backup(dest)
            (backup / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), backup / rel)
            continue
        if not path.is_file():
            continue
        data = path.read_bytes()
        if _sha(data) == digest:
            if rel not in new_files:
                path.unlink()
            continue
        backup = backup or _new_backup(dest)  # edited by the student: a copy goes aside
        (backup / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup / rel)
        if rel not in new_files:
            path.unlink()
        elif not reset and rel in strip_paths and again:
            text, problems = splice(new_files[rel].decode(), data.decode(errors="replace"),
                                    again, what, rel)
            merged[rel] = text.encode()
            kept_work.append(rel)
            for notes in problems.values():
                print("; ".join(notes))
    written = {}
    for rel, data in new_files.items():
        path = dest / rel
        if path.is_symlink() or (path.exists() and rel not in old_files):
            # a file the tool did not write sits where it wants to write: keep it aside
            backup = backup or _new_backup(dest)
            (backup / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), backup / rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(merged.get(rel, data))
        if (root / rel).is_file() and rel not in ("README.md", "COURSE.md"):
            shutil.copymode(root / rel, path)
        written[rel] = _sha(data)  # the tool's version: a file holding kept work reads as edited
    manifest = dict(made_by=TOOL, made=datetime.datetime.now().isoformat(timespec="seconds"),
                    exercises=ids, files=written,
                    note="A student copy: solutions removed. Rebuild only with --force.")
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if kept_work:
        print(f"the student's work in {' '.join(kept_work)} was kept in place "
              "(pass --reset to start those exercises again)")
    if backup is not None:
        print(f"edited or foreign files were copied to {backup}")
    return [e for e in exercises if e.id in ids]
