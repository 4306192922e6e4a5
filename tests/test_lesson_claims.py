"""A lesson's claims are written when its run finishes, never emptied when it starts
(minattn/course/lesson.py). Once, Ctrl-C at cell 13 of lesson 01 left its claims.json `[]`,
and the next `make course` reported "No lesson recorded a claim" for it. (The runner's part,
moving a notebook run's claims into place once it is saved, is tests/test_runner_signals.py.)"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from minattn.course import stats
from minattn.course.lesson import Lesson

OLD = '[{"claim": "the previous run\'s"}]'


def a_claim(lesson):
    lesson.claim("a beats b", paper="yes (Table 1)",
                 test=stats.compare([3.0, 3.1, 2.9, 3.2], [1.0, 1.1, 0.9, 1.2], ">"))


@pytest.fixture
def figures(tmp_path, monkeypatch):
    for name in [k for k in os.environ if k.startswith("MINATTN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MINATTN_FIGURES", str(tmp_path))
    (tmp_path / "97_claims").mkdir()
    (tmp_path / "97_claims" / "claims.json").write_text(OLD)
    return tmp_path / "97_claims"


def test_a_run_collects_its_claims_beside_the_previous_ones_until_it_finishes(figures,
                                                                              monkeypatch):
    monkeypatch.delattr(sys, "last_value", raising=False)
    lesson = Lesson("97_claims", cpu_threads=None)
    assert (figures / "claims.json").read_text() == OLD  # not emptied at the start
    assert json.loads((figures / "claims.json.partial").read_text()) == []
    a_claim(lesson)
    assert (figures / "claims.json").read_text() == OLD
    assert json.loads((figures / "claims.json.partial").read_text())[0]["claim"] == "a beats b"
    monkeypatch.setattr(sys, "last_value", KeyboardInterrupt(), raising=False)
    lesson._finish_script()  # a script that an exception (Ctrl-C's included) ended
    assert (figures / "claims.json").read_text() == OLD
    monkeypatch.delattr(sys, "last_value")
    lesson._finish_script()  # a script that ended well
    assert json.loads((figures / "claims.json").read_text())[0]["claim"] == "a beats b"
    assert not (figures / "claims.json.partial").exists()


def test_under_the_runner_the_lesson_leaves_its_claims_to_the_runner(figures, monkeypatch):
    monkeypatch.delattr(sys, "last_value", raising=False)
    monkeypatch.setenv("MINATTN_RUNNER", "1")
    lesson = Lesson("97_claims", cpu_threads=None)
    a_claim(lesson)
    lesson._finish_script()
    lesson.summary()
    assert (figures / "claims.json").read_text() == OLD
    assert (figures / "claims.json.partial").exists()


@pytest.mark.slow
def test_ctrl_c_in_a_script_keeps_the_previous_claims_and_a_finished_one_replaces_them(
        figures, tmp_path):
    script = tmp_path / "97_claims.py"
    script.write_text(
        "import sys, time\nfrom minattn.course import stats\n"
        "from minattn.course.lesson import Lesson\nlesson = Lesson('97_claims')\n"
        "lesson.claim('a beats b', paper='yes', test=stats.compare([3.0, 3.1, 2.9, 3.2], "
        "[1.0, 1.1, 0.9, 1.2], '>'))\nprint('claimed', flush=True)\n"
        "if sys.argv[1:] == ['sleep']:\n    time.sleep(60)\n")
    env = dict(os.environ)
    # Ctrl-C as a terminal delivers it, even where this suite runs with SIGINT ignored (a
    # background job of a shell, nohup): a child that starts with SIGINT ignored gets no
    # KeyboardInterrupt from Python, so the child starts with SIGINT at its default
    proc = subprocess.Popen([sys.executable, str(script), "sleep"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while not proc.stdout.readline().startswith("claimed") and proc.poll() is None:
        pass
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert (figures / "claims.json").read_text() == OLD
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=120,
                   cwd=tmp_path, capture_output=True)
    assert json.loads((figures / "claims.json").read_text())[0]["claim"] == "a beats b"
