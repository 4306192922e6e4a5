"""Where a submission's code runs when the grader calls it: a bubblewrap sandbox (Linux).

    bwrap --unshare-all --die-with-parent --new-session --clearenv
          --dev /dev --proc /proc --tmpfs /tmp
          --ro-bind /usr /usr --symlink usr/lib /lib ... --ro-bind /etc /etc
          --ro-bind <the Python environment> ...
          --bind <the graded copy> /tmp/grading --chdir /tmp/grading  python -c "serve()"

The empty /tmp comes first, then the binds: bwrap applies its options in order, so an
environment that lives under /tmp (a clone in /tmp/course/.venv) is bound into the empty /tmp,
not covered by it.

An allow-list: the sandbox sees
- the system read-only: /usr (and /bin, /lib... which point into it), /etc, /sys;
- the Python environment read-only: the venv and its base install (and the folders their
  links lead to), bound at their own paths;
- one writable folder, /tmp/grading: a fresh copy of the submission's graded `minattn/`, made
  for this run and thrown away after it; an empty /tmp, its own /dev and /proc;
- nothing else: no home folder, no /opt, /srv, /mnt, /work..., so no checkout of the course
  (the teacher's, or a second clone elsewhere), no other submission, no gradebook;
- its own user, PID, network, IPC, UTS and cgroup namespaces: no network, and no view of the
  grader's processes (its /proc lists only the sandbox's own); a new session (no terminal
  to type into); it dies with the process that started it. bwrap reads its arguments from a
  pipe (`--args`), so its command line names no folder.
A folder to hide that lies inside what is shown (--hide) is covered by an empty one. Before
grading, `check_start` starts Python in such a sandbox once and looks for copies of the course
it can still see (a minattn package, say installed into the environment): the grader warns.

`bwrap_problem()` says why bwrap cannot be used here (None when it can). Without it the grader
refuses to run unless told `--unsafe-no-sandbox` (see UNSAFE). `sandbox_problem()` also starts
this Python in a sandbox as the grader would, and says in one line why it could not (the tests
that need the sandbox skip with that line); `check_start` raises it as a SandboxError, which
the command line prints as one line.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

INSIDE = "/tmp/grading"  # where the graded copy appears inside the sandbox
SYSTEM = ("/usr", "/etc", "/sys")  # shown read-only
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # into /usr, usually
INSTALL = ("install bubblewrap: `sudo apt-get install bubblewrap` (Debian/Ubuntu), "
           "`sudo dnf install bubblewrap` (Fedora)")
UNSAFE = ("--unsafe-no-sandbox: each submission's code then runs as you, with your files and "
          "network: it can read and rewrite other submissions, your checkout (answers "
          "included), the gradebook and the grader's working files (so forge its own "
          "results), and reach the network. Only patching the test process is still out of "
          "its reach. Use it only for code you trust.")


@functools.lru_cache(maxsize=None)
def bwrap_problem() -> str | None:
    """None if bwrap is installed and can create its namespaces here; else what is wrong."""
    exe = shutil.which("bwrap")
    if exe is None:
        return f"bubblewrap (bwrap) is not installed; {INSTALL}"
    try:
        proc = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--new-session",
                               "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                               "--tmpfs", "/tmp", "true"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bwrap is installed but did not run: {err}"
    if proc.returncode != 0:
        why = proc.stderr.strip() or f"exit code {proc.returncode}"
        return (f"bwrap is installed but cannot create a sandbox here ({why}). Unprivileged "
                "user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1, or "
                "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04), or this is "
                "a container without them (run it with --privileged or as root).")
    return None


def _existing(paths) -> list[str]:
    out = []
    for p in paths:
        p = os.path.realpath(p)
        if os.path.isdir(p) and p != "/" and p not in out:
            out.append(p)
    return out


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _python_dirs() -> list[str]:
    """The folders this Python needs: the environment and its base install."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(os.path.realpath(sys.executable))}
    return sorted(_existing(dirs))


def python_executable() -> str:
    """This Python as the sandbox can start it: the links in its folder's path resolved (a venv
    reached through a link from a hidden folder, e.g. the checkout's `.venv` pointing
    elsewhere), its own name kept (a venv is found from the folder of the name it is started by)."""
    folder, name = os.path.split(os.path.abspath(sys.executable))
    return os.path.join(os.path.realpath(folder), name)


def find_courses(roots, skip=(), depth: int = 6) -> list[str]:
    """Folders under `roots` (at most `depth` levels down; `skip` and /proc, /sys, /dev left
    out) that hold a copy of the course: a `minattn` package with the classroom in it. Run
    inside a sandbox, it lists what a submission could read there."""
    import os

    found = []
    for root in roots:
        base = root.rstrip("/").count("/")
        for folder, subfolders, _ in os.walk(root):
            if (folder in skip or folder.startswith(("/proc", "/sys", "/dev"))
                    or folder.count("/") - base >= depth):
                subfolders[:] = []
                continue
            if os.path.basename(folder) == "minattn" and os.path.isfile(
                    os.path.join(folder, "course", "classroom", "regions.py")):
                found.append(os.path.dirname(folder))
                subfolders[:] = []
    return found


def scan_roots() -> list[str]:
    """Where a copy of the course could sit in the sandbox's view: the Python environment
    (an installed minattn) and the system's local folders (not its packages' own)."""
    import sysconfig

    roots = _python_dirs() + [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    roots = sorted(_existing(roots + ["/usr/local", "/usr/src", "/etc"]), key=len)
    return [r for i, r in enumerate(roots) if not any(r.startswith(o + "/") for o in roots[:i])]


class SandboxError(ValueError):
    """The sandbox could not start Python: the message says why and what to do, in one line
    (a ValueError, so that the command line prints it as `error: ...` without a traceback)."""


def start_failure(returncode, stderr: str) -> str:
    """One line: why Python did not start in the sandbox, and what the teacher can do."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    why = lines[-1][-300:] if lines else f"exit code {returncode}"
    shown = ", ".join([*SYSTEM, *_python_dirs()])
    return (f"the sandbox could not start Python ({why}). It shows only {shown} (read-only) and "
            f"the graded copy: a Python environment or library elsewhere (a link out of them) "
            f"is missing inside it, so install or move the environment into one of these "
            f"folders and grade again, or grade trusted code with --unsafe-no-sandbox")


def check_start(work: Path, hide, env: dict[str, str], unsafe: bool = False) -> list[str]:
    """Start this Python in a sandbox like a submission's (an empty copy in `work`) once;
    SandboxError saying why, in one line, when it cannot (then every submission would fail
    alike). Returns the copies of the course that the sandbox can still see (find_courses,
    run inside it)."""
    import inspect

    copy = Path(work) / "probe"
    copy.mkdir(parents=True, exist_ok=True)
    code = (inspect.getsource(find_courses) + "\nimport json\n"
            f"print(json.dumps(find_courses({scan_roots()!r}, skip={[INSIDE]!r})))")
    proc = spawn(copy, hide, [python_executable(), "-s", "-c", code], env, unsafe=unsafe,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += b"\nno answer within 120 s"
    if proc.returncode != 0:
        raise SandboxError(start_failure(proc.returncode, err.decode(errors="replace")))
    try:
        return list(json.loads(out.decode().strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return []


@functools.lru_cache(maxsize=None)
def sandbox_problem() -> str | None:
    """None when this Python starts in a sandbox as the grader starts a submission's worker
    (nothing hidden, an empty copy); else why not, in one line (bwrap_problem's reason, or
    start_failure's). Tests that need the sandbox skip with it."""
    import tempfile

    if (problem := bwrap_problem()) is not None:
        return problem
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory(prefix="minattn-sandbox-") as work:
        try:
            check_start(Path(work), [], env)
        except SandboxError as err:
            return str(err)
    return None


def bwrap_options(copy: Path, hide, env: dict[str, str]) -> list[str]:
    """bwrap's options: the system and the Python environment read-only, `copy` writable at
    INSIDE, nothing else (an allow-list; anything in `hide` that lies inside what is shown is
    covered by an empty folder), the command run in INSIDE with `env` only."""
    # bwrap applies these in order: the empty /tmp (and /dev, /proc) first, so that what is
    # bound after it -- an environment in /tmp/<clone>/.venv, say -- stays visible
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for dev in sorted(Path("/dev").glob("nvidia*")):  # a GPU stays usable, nothing else
        args += ["--dev-bind", str(dev), str(dev)]
    python = _python_dirs()
    shown = []
    for folder in sorted(_existing([*SYSTEM, *python]), key=len):  # outermost first
        if not any(_inside(folder, s) for s in shown):
            shown.append(folder)
            args += ["--ro-bind", folder, folder]
    for link in TOP_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    hidden = [h for h in _existing(hide) if any(_inside(h, s) for s in shown)]
    for h in hidden:
        args += ["--tmpfs", h]
    for folder in python:  # an environment inside a hidden folder (the checkout's .venv under
        if any(_inside(folder, h) for h in hidden):  # a system folder) is shown again
            args += ["--ro-bind", folder, folder]
    args += ["--bind", str(Path(copy).resolve()), INSIDE, "--chdir", INSIDE]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def spawn(copy: Path, hide, command: list[str], env: dict[str, str], unsafe: bool = False,
          **popen) -> subprocess.Popen:
    """Start `command` in the sandbox (or, with `unsafe`, as a plain child in `copy`).
    Extra keyword arguments go to Popen (stdin=PIPE, stdout=PIPE...)."""
    if unsafe:
        env = dict(env, PYTHONPATH=str(Path(copy).resolve()))
        return subprocess.Popen(command, cwd=copy, env=env, **popen)
    problem = bwrap_problem()
    if problem is not None:
        raise RuntimeError(problem)
    options = b"".join(a.encode() + b"\0" for a in bwrap_options(copy, hide, env))
    if len(options) > 60000:
        raise ValueError("too many folders to hide for one sandbox")
    read, write = os.pipe()  # the options travel through a pipe: /proc/1/cmdline names no folder
    try:
        with os.fdopen(write, "wb") as pipe:
            pipe.write(options)
        return subprocess.Popen([shutil.which("bwrap"), "--args", str(read), "--", *command],
                                pass_fds=(read,),
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                **popen)
    finally:
        os.close(read)
