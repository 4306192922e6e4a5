"""Every MINATTN_* value is checked once, in one place (minattn/course/settings.py): by the
runner before it writes anything, and by a lesson run as a script when it starts. A bad value
is refused in one line naming the variable and what it may be. Once, a bad MINATTN_SCALE was
found by each lesson in turn (`make course` replaced every good page with an error page),
MINATTN_SMOKE=off turned smoke mode on, and MINATTN_DEVICE=gpu printed torch's list of 20
device types without naming the variable."""

import os
import subprocess
import sys

import pytest

from minattn.course import course
from minattn.course.settings import SettingsError, settings

REFUSED = {
    "MINATTN_SMOKE=maybe": "MINATTN_SMOKE=maybe: expected 0, 1, true, false, yes, no, on or off",
    "MINATTN_SCALE=big": "MINATTN_SCALE=big: expected full or paper (or smoke)",
    "MINATTN_DEVICE=gpu": "MINATTN_DEVICE=gpu: expected cpu, cuda or cuda:N",
    "MINATTN_DEVICE=cuda:x": "MINATTN_DEVICE=cuda:x: expected cpu, cuda or cuda:N",
    "MINATTN_SEED=1.5": "MINATTN_SEED=1.5: expected an integer (added to every seed; default 0)",
    "MINATTN_RUNNER=2": "MINATTN_RUNNER=2: expected 0, 1, true, false, yes, no, on or off",
    "MINATTN_COMPILE_TESTS=y": "MINATTN_COMPILE_TESTS=y: expected 0, 1, true, false, yes, no, "
                               "on or off",
}


def env_of(*assignments):
    return dict(a.split("=", 1) for a in assignments)


@pytest.mark.parametrize("assignment", list(REFUSED))
def test_a_bad_value_is_refused_in_one_line_naming_the_variable(assignment):
    with pytest.raises(SettingsError) as refused:
        settings(env_of(assignment))
    assert str(refused.value) == REFUSED[assignment]


def test_folders_a_contradiction_and_an_unknown_name_are_refused(tmp_path):
    (tmp_path / "file").write_text("")
    for name in ("MINATTN_FIGURES", "MINATTN_DATA"):
        with pytest.raises(SettingsError, match=f"^{name}=.*/file: expected a folder"):
            settings({name: str(tmp_path / "file")})
        assert getattr(settings({name: str(tmp_path / "new")}), name[8:].lower()) \
            == tmp_path / "new"
    with pytest.raises(SettingsError, match="^MINATTN_SMOKE=1 and MINATTN_SCALE=paper contra"):
        settings(env_of("MINATTN_SMOKE=yes", "MINATTN_SCALE=paper"))
    with pytest.raises(SettingsError, match="^MINATTN_SMOKY=1: not a setting of the course "
                                            r"\(they are MINATTN_SMOKE, MINATTN_SCALE"):
        settings(env_of("MINATTN_SMOKY=1"))


@pytest.mark.parametrize("value,on", [("1", True), ("true", True), ("Yes", True), ("ON", True),
                                      ("0", False), ("False", False), ("no", False),
                                      ("off", False), ("OFF", False), ("", False),
                                      (" on ", True)])
def test_booleans_read_0_1_true_false_yes_no_on_off(value, on):
    assert settings({"MINATTN_SMOKE": value}).smoke is on
    assert settings({"MINATTN_RUNNER": value}).runner is on


def test_good_values_and_the_defaults():
    config = settings({})
    assert (config.smoke, config.scale, config.device, config.seed, config.figures,
            config.data, config.runner) == (False, "full", None, 0, None, None, False)
    config = settings(env_of("MINATTN_SCALE=Paper", "MINATTN_DEVICE=cuda:1", "MINATTN_SEED=-3"))
    assert (config.scale, config.device, config.seed) == ("paper", "cuda:1", -3)
    assert settings(env_of("MINATTN_SCALE=smoke")).smoke
    assert settings(env_of("MINATTN_SMOKE=1")).scale == "smoke"


def test_a_lesson_reads_smoke_off_as_off(monkeypatch, tmp_path):
    from minattn.course.lesson import Lesson

    monkeypatch.setenv("MINATTN_FIGURES", str(tmp_path))
    monkeypatch.setenv("MINATTN_SMOKE", "off")
    assert Lesson("99_settings", cpu_threads=None).smoke is False
    monkeypatch.setenv("MINATTN_DEVICE", "gpu")
    with pytest.raises(SettingsError, match="^MINATTN_DEVICE=gpu: expected cpu, cuda or cuda:N$"):
        Lesson("99_settings", cpu_threads=None)


@pytest.mark.parametrize("assignment", ["MINATTN_SCALE=big", "MINATTN_SMOKE=maybe",
                                        "MINATTN_DEVICE=gpu", "MINATTN_SEED=x"])
def test_the_runner_refuses_a_bad_value_before_writing_anything(assignment, tmp_path,
                                                                monkeypatch, capsys):
    lesson = tmp_path / "lessons" / "97_never.py"
    lesson.parent.mkdir()
    lesson.write_text("# %%\nprint('ran')\n")
    monkeypatch.setattr(course, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(course, "lesson_files", lambda root=None: [lesson])
    monkeypatch.setattr(course, "execute_lesson", lambda *a, **k: pytest.fail("a lesson ran"))
    for name in [k for k in os.environ if k.startswith("MINATTN_")]:
        monkeypatch.delenv(name)
    name, value = assignment.split("=")
    monkeypatch.setenv(name, value)
    for argv in ([], ["--notebooks-only"], ["--class-pages"]):
        assert course.main(argv) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"error: {assignment}: expected ") and err.count("\n") == 1, err
        assert out == ""
        assert sorted(p.name for p in tmp_path.iterdir()) == ["lessons"]  # nothing written


@pytest.mark.slow
def test_a_lesson_run_as_a_script_refuses_a_bad_value_in_one_line(tmp_path):
    """Before anything is written: no figure folder, no claims."""
    script = tmp_path / "97_script.py"
    script.write_text("from minattn.course.lesson import Lesson\nLesson('97_script')\n"
                      "print('not reached')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINATTN_")}
    env.update(MINATTN_FIGURES=str(tmp_path / "figures"), MINATTN_SCALE="big")
    proc = subprocess.run([sys.executable, str(script)], env=env, text=True,
                          capture_output=True, timeout=120, cwd=tmp_path)
    assert proc.returncode != 0 and "not reached" not in proc.stdout
    assert proc.stderr == "error: MINATTN_SCALE=big: expected full or paper (or smoke)\n"
    assert not (tmp_path / "figures").exists()
