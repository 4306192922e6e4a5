"""Run a lesson as `python lesson.py` runs it, without paying for the imports every time.

Importing torch, its first optimizer's torch._dynamo, matplotlib, scipy and nltk takes about
6 s of CPU: more than most lessons' smoke runs themselves. `Forker` starts this file once, as a
process that imports them and waits; each `run(script, env, cwd)` forks it, and the child runs
the script as `__main__` with that environment, working folder, argv and sys.path[0], its
stdout and stderr (file descriptors 1 and 2) in a file, and exits as a script does (its
threads joined, its atexit handlers run, a traceback and code 1 on an exception). Nothing of
the library is imported before the fork: every lesson imports minattn afresh and reads its own
MINATTN_* settings.

The child then leaves with os._exit, as multiprocessing's forked children do, skipping the
interpreter's teardown, which frees every object the waiting process imported and so copies
each page the fork shared: 1.1 s of a trivial script's run, 0.02 s without.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path


class Forker:
    """The waiting process, started on the first run; `stop()` ends it and a running child."""

    def __init__(self, env: dict):
        self.env, self.proc = env, None
        self.lock = threading.Lock()  # one run at a time: the lessons' background thread and
        # a test may both ask (one process answers one request at a time)

    def run(self, script: Path, env: dict, cwd: Path, output: Path, timeout: float) -> int:
        """The script's exit code; its output is in `output`. On time out the waiting process
        and everything it started are killed (the next run starts a new one), and
        subprocess.TimeoutExpired is raised. Off Linux, a plain `python script` (macOS does
        not let a process that loaded some system frameworks fork safely)."""
        with self.lock:
            return self._run(script, env, cwd, output, timeout)

    def _run(self, script: Path, env: dict, cwd: Path, output: Path, timeout: float) -> int:
        if sys.platform != "linux":
            with open(output, "w") as out:
                return subprocess.run([sys.executable, str(script)], env=env, cwd=cwd,
                                      stdout=out, stderr=subprocess.STDOUT,
                                      timeout=timeout).returncode
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, __file__], env=self.env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         start_new_session=True)  # one group: kill all of it
        request = dict(script=str(script), env=env, cwd=str(cwd), output=str(output))
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        try:
            reply = _readline(self.proc, timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if not reply:
            self.stop()
            raise RuntimeError(f"the process that runs {script.name} ended")
        return json.loads(reply)["code"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            from minattn.course.classroom.check import _kill_group  # the grader's: the group

            _kill_group(self.proc)
            self.proc.wait()


# One per test process, shared by the tests that run lessons (started on its first run), and
# ended with it: a test process that stops (Ctrl-C too) leaves no lesson running.
FORKER = Forker(os.environ.copy())
atexit.register(FORKER.stop)


def _readline(proc, timeout: float) -> str:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.stdout.readline()


def _child(request: dict) -> None:
    """In the forked process: become `python script` and never return."""
    import runpy

    script = request["script"]
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, to in ((null, 0), (out, 1), (out, 2)):
        os.dup2(fd, to)
    os.close(out)
    os.close(null)
    sys.stdin = open(0, closefd=False)
    sys.argv, sys.path[0] = [script], os.path.dirname(os.path.abspath(script))
    code = [0]
    atexit.register(_leave, code)  # first registered, so run last: after the script's own
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:  # sys.exit(None | int | message), as Python reads it
        if stop.code is None or isinstance(stop.code, int):
            code[0] = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code[0] = 1
    except BaseException:  # what Python does with an uncaught exception: keep it, show it
        sys.last_type, sys.last_value, sys.last_traceback = sys.exc_info()
        sys.excepthook(*sys.exc_info())
        code[0] = 1
    sys.exit(code[0])  # Python joins the script's threads, then calls the atexit handlers


def _leave(code: list) -> None:
    """The last atexit handler: flush the streams and end, without the teardown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the script
            pass
    os._exit(code[0] & 0xFF)


# What the lessons import from outside the library, slowest first (torch's first optimizer
# imports torch._dynamo; lesson 06 imports nltk, which imports scipy.stats).
PRELOAD = ("torch", "torch._dynamo", "matplotlib.pyplot", "nltk", "scipy.special",
           "safetensors.torch", "tqdm")


def _serve() -> None:
    import importlib

    import matplotlib
    matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # a lesson that needs it says so itself
            pass
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    _serve()
