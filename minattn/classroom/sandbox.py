"""Where a submission's code runs when the grader calls it: a bubblewrap sandbox (Linux).

    bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc
          --tmpfs /tmp ... --tmpfs <every folder to hide> --ro-bind <python> <python>
          --bind <the graded copy> /tmp/grading --chdir /tmp/grading  python -c "serve()"

- a read-only view of the system and of the Python environment (the venv and its base
  install, bound back read-only if they live in a hidden folder);
- one writable folder, /tmp/grading: a fresh copy of the submission's graded `minattn/`, made
  for this run and thrown away after it;
- hidden behind empty in-memory folders: /tmp, /var/tmp, /home, /root, /mnt, /media, /srv,
  the teacher's checkout, the folders holding the submissions and the gradebook, the
  grader's temporary folders and $HOME;
- its own user, PID, network, IPC, UTS and cgroup namespaces: no network, and no view of the
  grader's processes (its /proc lists only the sandbox's own); a new session (no terminal
  to type into); it dies with the process that started it. bwrap reads its arguments from a
  pipe (`--args`), so its command line names no hidden folder.

`bwrap_problem()` says why bwrap cannot be used here (None when it can). Without it the grader
refuses to run unless told `--unsafe-no-sandbox` (see UNSAFE).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

INSIDE = "/tmp/grading"  # where the graded copy appears inside the sandbox
ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/home", "/root", "/mnt", "/media", "/srv", "/run/user")
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


def check_start(work: Path, hide, env: dict[str, str], unsafe: bool = False) -> None:
    """Start this Python in a sandbox like a submission's (an empty copy in `work`) once;
    RuntimeError saying why when it cannot (then every submission would fail alike)."""
    copy = Path(work) / "probe"
    copy.mkdir(parents=True, exist_ok=True)
    proc = spawn(copy, hide, [python_executable(), "-s", "-c", "import sys; print(sys.prefix)"],
                 env, unsafe=unsafe, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the grader cannot start Python in the sandbox (exit code "
                           f"{proc.returncode}): {err.decode(errors='replace').strip()[-500:]}")


def bwrap_options(copy: Path, hide, env: dict[str, str]) -> list[str]:
    """bwrap's options: `copy` writable at INSIDE, everything in `hide` (and ALWAYS_HIDDEN)
    behind empty folders, the command run in INSIDE with `env` only."""
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for dev in sorted(Path("/dev").glob("nvidia*")):  # a GPU stays usable, nothing else
        args += ["--dev-bind", str(dev), str(dev)]
    hidden = _existing([*ALWAYS_HIDDEN, tempfile.gettempdir(), Path.home(), *hide])
    # a folder inside a hidden one is hidden with it (hiding it again would leave its name
    # visible, as an empty mount point)
    hidden = [h for h in hidden if not any(h.startswith(o + "/") for o in hidden)]
    for h in sorted(hidden):
        args += ["--tmpfs", h]
    for d in _python_dirs():  # the environment may live in a hidden folder (a venv in the checkout)
        if any(d == h or d.startswith(h + "/") for h in hidden):
            args += ["--ro-bind", d, d]
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
