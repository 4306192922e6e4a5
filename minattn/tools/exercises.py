"""Classroom exercises: student copies, the check a student runs, grading against hidden tests.

A solution in the library is a region of code between two comment lines,

    # BEGIN EXERCISE 1.1 implement: numerically stable (masked) softmax (~15 min)
    ...the teacher's solution...
    # END EXERCISE

kind is `implement`, `predict` or `experiment` (a missing kind means implement); the time is
optional. One id may mark several regions: every place that would give the answer away (the
torch twin, a fast path, a helper) carries the same id, so that stripping leaves nothing to copy.

    python -m minattn.tools.exercises list                     # exercises per lesson, kind, time
    python -m minattn.tools.exercises student DIR              # a student copy, every solution removed
    python -m minattn.tools.exercises student DIR --only 1 2.1 # hand out lesson 1 and exercise 2.1
    python -m minattn.tools.exercises check [ID...] [-v]       # in a copy: which exercises pass
    python -m minattn.tools.exercises grade SUB... --only 1.1  # teacher: the gradebook (grades.csv)
    python -m minattn.tools.exercises audit                    # does a copy give an answer away?

A student copy holds the files git tracks, with each handed-out region's body replaced by
`raise NotImplementedError("Exercise 1.1: ...")`, without tests/hidden/, and a manifest
(`.student-copy`) of the files the tool wrote: building again into the same folder needs
`--force`, and even then only the tool's own files are replaced; a file the student edited
keeps the student's region bodies (of the exercises handed out again) and is first copied to a
new backup folder; files the tool did not write are never touched.

The check (`make exercises`) runs the copy's exercise tests in a process group that a time
limit, Ctrl-C or SIGTERM ends whole.

Grading (tools/grading.py) splices each submission's region bodies, and nothing else, into a
copy of the teacher's library and runs the teacher's tests, hidden ones included, with the
submission's functions in a sandboxed process of their own (tools/remote.py, tools/sandbox.py).
tools/exercise_audit.py checks the exercises themselves (nothing in a copy gives one away).
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import REPO_ROOT

KINDS = ("implement", "predict", "experiment")
BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN EXERCISE (?P<id>\S+)"
                   r"(?:\s+(?P<kind>implement|predict|experiment)\s*:)?\s*(?P<what>.*?)\s*$")
END = re.compile(r"^[ \t]*# END EXERCISE\s*$")
MINUTES = re.compile(r"\s*\(\s*~?\s*(?P<n>\d+)\s*min(?:utes)?\s*\)\s*$")

# What never goes into a copy (environments, generated and fetched files).
IGNORED = (".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis",
           ".ipynb_checkpoints", "figures", "notebooks", "student", "bench_results", "data",
           "build", "*.pyc", ".student-copy", ".student-backup-*", "submissions", "grades*.csv")
COURSE_DIRS = ("minattn", "lessons", "tests", "benchmarks", "data_scripts")
HIDDEN_TESTS = "tests/hidden"
MANIFEST = ".student-copy"
TOOL = "minattn.tools.exercises"


# ============================================================================ markers
@dataclass(frozen=True)
class Exercise:
    """One marked region. Several regions may share an id (an exercise and its twins)."""
    id: str
    what: str
    path: Path
    line: int             # the BEGIN line (1-based)
    kind: str = "implement"
    minutes: int | None = None
    end: int = 0          # the END line (1-based)


def id_key(ex_id: str):
    """Sort key: 1.2 < 1.10 < 2.1."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.]", ex_id)]


def _parse_begin(m: re.Match) -> tuple[str, str, int | None]:
    what, minutes = m["what"], None
    if t := MINUTES.search(what):
        what, minutes = what[:t.start()].rstrip(), int(t["n"])
    return m["kind"] or "implement", what, minutes


def find_exercises(text: str, path: Path = Path("?")) -> list[Exercise]:
    """Every marked region of a source text; checks that markers pair up."""
    found, open_at = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if m := BEGIN.match(line):
            if open_at is not None:
                raise ValueError(f"{path}:{number}: BEGIN EXERCISE inside exercise "
                                 f"{open_at[0]['id']} (opened at line {open_at[1]})")
            open_at = (m, number)
        elif END.match(line):
            if open_at is None:
                raise ValueError(f"{path}:{number}: END EXERCISE without a BEGIN")
            m, begin = open_at
            kind, what, minutes = _parse_begin(m)
            found.append(Exercise(m["id"], what, path, begin, kind, minutes, number))
            open_at = None
    if open_at is not None:
        raise ValueError(f"{path}:{open_at[1]}: exercise {open_at[0]['id']} is never closed")
    return found


def all_exercises(root: Path = REPO_ROOT) -> list[Exercise]:
    """Every region in root/minattn (minattn/tools/, the plumbing, has none), in file order."""
    exercises = []
    for path in sorted((Path(root) / "minattn").rglob("*.py")):
        if "__pycache__" not in path.parts and path.parent.name != "tools":
            exercises += find_exercises(path.read_text(), path.relative_to(root))
    return exercises


def by_id(exercises: list[Exercise]) -> dict[str, list[Exercise]]:
    """Regions grouped by exercise id, ids in course order."""
    groups: dict[str, list[Exercise]] = {}
    for e in exercises:
        groups.setdefault(e.id, []).append(e)
    return {k: groups[k] for k in sorted(groups, key=id_key)}


def summary(regions: list[Exercise]) -> Exercise:
    """The region that describes an exercise: the first with a description (twins may omit it)."""
    return next((r for r in regions if r.what), regions[0])


def descriptions(exercises: list[Exercise]) -> dict[str, str]:
    return {k: summary(v).what for k, v in by_id(exercises).items()}


def stub_message(ex_id: str, what: str) -> str:
    return f"Exercise {ex_id}: {what or 'see the docstring'}"


def strip_solutions(text: str, only: set[str] | None = None,
                    what: dict[str, str] | None = None, keep_lines: bool = False) -> str:
    """Replace each marked region's body with a NotImplementedError naming the exercise
    (only the exercises whose ids are in `only`, when given). `what` describes exercises whose
    twin regions carry no description of their own. `keep_lines` pads the stub with blank lines
    so that every line keeps its number."""
    what = dict(what or {})
    for e in find_exercises(text):  # a twin without a description borrows its exercise's
        if e.what:
            what.setdefault(e.id, e.what)
    out, inside, dropped = [], False, 0
    for line in text.splitlines(keepends=True):
        if (m := BEGIN.match(line)) and (only is None or m["id"] in only):
            inside, dropped = True, 0
            message = stub_message(m["id"], what.get(m["id"]) or _parse_begin(m)[1])
            literal = json.dumps(message, ensure_ascii=False)
            out += [line, f'{m["indent"]}raise NotImplementedError({literal})\n']
        elif END.match(line) and inside:
            inside = False
            out += ["\n"] * (dropped - 1 if keep_lines and dropped else 0) + [line]
        elif not inside:
            out.append(line)
        else:
            dropped += 1
    return "".join(out)


def expand_ids(requested, known) -> list[str]:
    """Check exercise ids before anything touches the disk: '1' means every exercise of lesson 1.
    Raises ValueError listing the valid ids."""
    known = sorted(set(known), key=id_key)
    chosen = []
    for item in requested:
        item = str(item).strip()
        lesson = item.lstrip("0") if item.isdigit() else None
        matches = ([k for k in known if k.split(".")[0] == lesson] if lesson is not None
                   else [k for k in known if k == item])
        if not matches:
            raise ValueError(f"unknown exercise {item!r}; valid ids: {' '.join(known)} "
                             f"(or a lesson number: {' '.join(sorted({k.split('.')[0] for k in known}, key=id_key))})")
        chosen += [m for m in matches if m not in chosen]
    return sorted(chosen, key=id_key)


def lesson_of(ex_id: str, root: Path = REPO_ROOT) -> str:
    """The lesson file stem an exercise belongs to ('01_attention'), from its first number."""
    number = ex_id.split(".")[0]
    if number.isdigit():
        for path in sorted((Path(root) / "lessons").glob(f"{int(number):02d}_*.py")):
            return path.stem
    return f"lesson {number}"


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


def read_manifest(dest: Path) -> dict | None:
    """The manifest of a student copy made by this tool, or None."""
    try:
        manifest = json.loads((Path(dest) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("made_by") == TOOL else None


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
        raise ValueError(f"the student copy cannot go in {dest}: that folder holds the course itself")
    if root in dest.parents and dest != root / "student":
        raise ValueError(f"a student copy inside the repository must be ./student, got {dest}")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} exists and is not a folder")
    if not dest.exists() or not any(dest.iterdir()):
        return None
    manifest = read_manifest(dest)
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


def make_student_copy(dest: Path, root: Path = REPO_ROOT, only=None, force: bool = False,
                      reset: bool = False) -> list[Exercise]:
    """Copy the repository's tracked files to `dest` with the solutions removed (all, or the
    ids/lessons in `only`); returns the regions removed. Refuses a non-empty `dest` that is not
    a student copy made here, and one that is unless `force`; never deletes or moves a file it
    did not write. On a rebuild, a file the student edited keeps the student's region bodies
    of every exercise handed out both times (`reset`: the stubs again); the edited file is
    copied to a backup folder first either way."""
    from .grading import splice

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
        new_files[rel] = data
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


# ============================================================================ the check
def _pytest(root: Path, args: list[str], report: Path, capture: bool, timeout=None,
            env: dict | None = None):
    """Run pytest on the copy at `root` in a fresh process group (its own minattn), at most
    `timeout` seconds. The group is killed on a timeout, and on Ctrl-C or any other exit of
    this process before it ends: nothing it started keeps running. Returns (exit code, output,
    the exercise report -- with "read": True when pytest wrote one -- , timed out)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    full_env["PYTHONPATH"] = str(root) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
           "--continue-on-collection-errors", "--exercise-report", str(report), *args]
    proc = subprocess.Popen(cmd, cwd=root, env=full_env, start_new_session=True, text=True,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.STDOUT if capture else None)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, _ = proc.communicate()
    except BaseException:  # Ctrl-C, SIGTERM (see _exit_on_signals): end the whole group
        _kill_group(proc)
        proc.wait()
        raise
    try:
        results = dict(json.loads(report.read_text()), read=True)
    except (OSError, ValueError, TypeError):
        results = {"exercises": {}, "errors": [], "running": None}
    return proc.returncode, out or "", results, timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exit_on_signals() -> None:
    """SIGTERM and SIGHUP end this process the way Ctrl-C does (so children are cleaned up)."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def _short(text: str, width: int = 110) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def n_run(counts: dict) -> int:
    """How many of an exercise's tests count: those collected, less those skipped."""
    collected = len(counts.get("tests", [])) or counts.get("passed", 0) + counts.get("failed", 0)
    return collected - len(counts.get("skipped", []))


def state_of(counts: dict, ex_id: str) -> tuple[str, str]:
    """(PASS | FAIL | not implemented yet | skipped | no tests, the message that blocks it)."""
    total = n_run(counts)
    if total == 0:
        if counts.get("skipped"):
            return "skipped", f"{len(counts['skipped'])} tests skipped (CUDA or data missing)"
        return "no tests", "no test is marked @pytest.mark.exercise"
    if counts.get("passed", 0) == total:
        return "PASS", ""
    messages = counts.get("messages", [])
    if counts.get("failed", 0) and counts["failed"] == counts.get("not_implemented", 0):
        first = messages[0] if messages else ""
        m = re.match(r"Exercise (\S+): (.*)", first)
        if m and m[1] != ex_id:
            return "not implemented yet", f"waits on exercise {m[1]} ({m[2]})"
        return "not implemented yet", m[2] if m else first
    return "FAIL", counts.get("first_failure") or "did not run"


def check(ids=None, verbose: bool = False, root: Path = REPO_ROOT, timeout: float | None = 900) -> int:
    """Run the exercise tests of this copy (at most `timeout` seconds) and print one line per
    exercise, last."""
    groups = by_id(all_exercises(root))
    handed_out = (read_manifest(root) or {}).get("exercises")  # a student copy's exercises
    wanted = expand_ids(ids, groups) if ids else [i for i in groups if i in (handed_out or groups)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        args = ["tests"] + (["-v", "--tb=short"] if verbose else ["-q", "--tb=no", "--no-header"])
        args += ["--exercises", *wanted]  # last: it takes every argument after it
        rc, out, results, timed_out = _pytest(Path(root), args, report, capture=not verbose,
                                              timeout=timeout)
    exercises = results.get("exercises", {})
    if not exercises and rc not in (0, 1) and not timed_out:
        print(out[-4000:])
        print(f"pytest could not run the exercise tests (exit code {rc}); see above.")
        return rc or 2
    errors = results.get("errors", [])
    for error in errors:  # a file that does not import: its tests could not run
        print(f"error collecting {error['where']}: {_short(error['message'])}")
    stopped = (f"timed out after {timeout:g} s in {results.get('running') or 'collection'}"
               if timed_out else None)
    if stopped:
        print(f"the check {stopped}: the tests after it did not run "
              "(make exercises TIMEOUT=<seconds> allows more)")
    print(f"\n{'exercise':9}{'kind':11}{'state':21}{'tests':7}message")
    failing = []
    for ex_id in wanted:
        kind = summary(groups[ex_id]).kind
        counts = exercises.get(ex_id, {})
        state, message = state_of(counts, ex_id)
        if state == "no tests" and errors:
            state, message = "FAIL", f"error collecting {errors[0]['where']}: {errors[0]['message']}"
        done = counts.get("passed", 0) + counts.get("failed", 0) + len(counts.get("skipped", []))
        if stopped and done < len(counts.get("tests", [])):
            state, message = "FAIL", f"did not finish: {stopped}"
        if state == "PASS" and kind != "implement" and not any(
                t.startswith(HIDDEN_TESTS + "/") for t in counts.get("tests", [])):
            state, message = "answered", "well formed; the teacher's tests check the value"
        if state not in ("PASS", "answered", "skipped"):
            failing.append(ex_id)
        total = n_run(counts)
        print(f"{ex_id:9}{kind:11}{state:21}{counts.get('passed', 0)}/{total:<5}{_short(message, 90)}")
    if failing and not verbose:
        print(f"\ndetails (tracebacks): make exercises EX={failing[0]} TB=1")
    return 1 if failing else 0


# ============================================================================ lessons
def checkout_of(path: Path) -> Path | None:
    """The checkout (a folder holding minattn/__init__.py) that `path` lies in, or None."""
    for folder in [Path(path).resolve(), *Path(path).resolve().parents]:
        if (folder / "minattn" / "__init__.py").is_file():
            return folder
    return None


def _ipython():
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def check_checkout(root: Path = REPO_ROOT) -> None:
    """Stop a lesson that imported another checkout's minattn (a teacher's copy, say, with its
    solutions). The lesson's checkout is the script's folder or, in a notebook, the working
    directory."""
    shell = _ipython()
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    start = Path.cwd() if shell is not None or not main_file else Path(main_file).parent
    if shell is None and (not main_file or "site-packages" in Path(main_file).parts):
        return  # python -c, or a tool's entry point (pytest): not a lesson run
    lesson_root = checkout_of(start)
    if lesson_root is not None and lesson_root != Path(root).resolve():
        raise SystemExit(
            f"This lesson belongs to {lesson_root}, but `import minattn` found "
            f"{Path(root).resolve() / 'minattn'} (another copy of the course). Run it with this "
            f"copy's minattn: cd {lesson_root} && PYTHONPATH=. <python> lessons/..., "
            "or `make setup` in this copy first.")


def exercise_stop(exc: BaseException, tb, root: Path = REPO_ROOT) -> str | None:
    """One line for an exercise's NotImplementedError: which exercise, where, how to check it.
    None for any other exception."""
    m = re.match(r"Exercise (\S+): (.*)", str(exc)) if isinstance(exc, NotImplementedError) else None
    if m is None:
        return None
    where, code, line = "", None, 0
    while tb is not None:
        code, line = tb.tb_frame.f_code, tb.tb_lineno
        tb = tb.tb_next
    if line:
        path = Path(code.co_filename)
        path = path.relative_to(root) if path.is_relative_to(root) else path
        where = f" ({code.co_name} in {path}:{line})"
    return (f"Exercise {m[1]} is not implemented yet{where}: {m[2]}. "
            f"Implement it, then check it with: make exercises EX={m[1]}")


def install_exercise_stop(root: Path = REPO_ROOT) -> None:
    """In a lesson, an unimplemented exercise stops the script (or the notebook cell) with one
    line instead of a traceback."""
    shell = _ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        def handler(self, etype, value, tb, tb_offset=None):
            line = exercise_stop(value, tb, root)
            if line is None:
                return self.showtraceback((etype, value, tb), tb_offset=tb_offset)
            print(line, file=sys.stderr)
        shell.set_custom_exc((NotImplementedError,), handler)
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        line = exercise_stop(value, tb, root)
        if line is None:
            return previous(etype, value, tb)
        print(line, file=sys.stderr)
    sys.excepthook = hook


def guard_lesson(root: Path = REPO_ROOT) -> None:
    """What every Lesson does first: refuse another checkout's minattn, and stop cleanly on an
    unimplemented exercise."""
    check_checkout(root)
    install_exercise_stop(root)


# ============================================================================ command line
def print_list(root: Path = REPO_ROOT) -> None:
    groups = by_id(all_exercises(root))
    lesson = None
    for ex_id, regions in groups.items():
        if lesson_of(ex_id, root) != lesson:
            lesson = lesson_of(ex_id, root)
            print(f"\n{lesson}")
        s = summary(regions)
        time = f"~{s.minutes} min" if s.minutes else ""
        where = f"{s.path}:{s.line}" + (f" (+{len(regions) - 1} more)" if len(regions) > 1 else "")
        print(f"  {ex_id:6}{s.kind:11}{time:9}{s.what}  [{where}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {TOOL}", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every exercise, per lesson, with its kind and time")
    p = sub.add_parser("student", help="build a student copy")
    p.add_argument("dest", type=Path)
    p.add_argument("--only", nargs="+", default=None, metavar="ID",
                   help="hand out only these exercises (ids, or a lesson number: --only 1)")
    p.add_argument("--force", action="store_true",
                   help="rebuild an existing student copy (the student's work in exercises "
                        "handed out again stays in place; edited files are backed up)")
    p.add_argument("--reset", action="store_true",
                   help="with --force: stub the exercises again, even where the student wrote code")
    p = sub.add_parser("check", help="in a copy: which exercises pass (a table, last)")
    p.add_argument("ids", nargs="*", metavar="ID", help="exercise ids or lesson numbers")
    p.add_argument("-v", "--verbose", action="store_true", help="show pytest's output and tracebacks")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds for the whole check (default 900); then everything it started ends")
    p = sub.add_parser("grade", help="grade submissions in a sandbox against every test, "
                                      "hidden ones included")
    p.add_argument("submissions", nargs="+", type=Path)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--only", nargs="+", default=None, metavar="ID",
                       help="the exercises handed out (ids or lesson numbers)")
    which.add_argument("--roster", type=Path, default=None,
                       help="a file listing the exercises handed out (ids or lesson numbers)")
    p.add_argument("--out", type=Path, default=Path("grades.csv"))
    p.add_argument("--name", nargs="+", default=None, metavar="NAME",
                   help="gradebook names, one per submission (default: each path relative to "
                        "the submissions' common folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per submission")
    p.add_argument("--hide", nargs="+", default=(), type=Path, metavar="FOLDER",
                   help="more folders the sandbox hides (other checkouts, answer keys, earlier "
                        "classes); it always hides this checkout, the submissions' folders, "
                        "the gradebook's, /tmp, /home, /root, /mnt, /media and /srv")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade without bubblewrap (see the warning it prints)")
    sub.add_parser("audit", help="list what would give an exercise's answer away in a student copy")
    args = parser.parse_args(argv)

    try:
        if args.command == "list":
            print_list()
        elif args.command == "student":
            if args.reset and not args.force:
                raise ValueError("--reset only applies to a rebuild (--force)")
            removed = make_student_copy(args.dest, only=args.only, force=args.force,
                                        reset=args.reset)
            ids = list(by_id(removed))
            print(f"student copy in {args.dest}: {len(ids)} exercises ({' '.join(ids)}), "
                  f"{len(removed)} regions removed")
            print(f"Students: cd {args.dest} && make setup && make exercises")
        elif args.command == "check":
            _exit_on_signals()
            return check(args.ids, args.verbose, timeout=args.timeout or None)
        elif args.command == "grade":
            from .grading import grade

            _exit_on_signals()
            grade(args.submissions, args.out, args.only, args.timeout, roster=args.roster,
                  names=args.name, unsafe=args.unsafe_no_sandbox, hide=args.hide)
        elif args.command == "audit":
            from .exercise_audit import audit

            problems = audit()
            print("\n".join(problems) or "no give-away found")
            return 1 if problems else 0
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
