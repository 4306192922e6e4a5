"""The course as a reader meets it (minattn/course/pages.py, course.py): every formula typesets
offline in a real browser, progress bars and printed tables read as they should, and no build
erases a notebook someone ran or edited, or a full run's claims.

The browser tests open pages in headless Chromium (`apt-get install chromium`; .ci/run installs
it) with the MathJax that `make data` fetches; each skips, saying which, where either is
missing. Lesson 01's executed smoke page is checked in tests/test_lessons.py, which runs it.
"""

import base64
import json
import os
import re
import struct
import zlib

import nbformat
import pytest

from minattn.course import course
from minattn.course.fetch import data_root
from minattn.course.pages import (
    ANSI,
    check_pages,
    export_html,
    find_browser,
    page_problems,
    printed_text,
    probe_page,
    probe_pages,
    tidy_notebook,
    write_index,
)
from minattn.course.report import claims_html


def png() -> str:
    """A 1x1 red PNG, base64 (a figure's inline image)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))
    image = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
             + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
    return base64.b64encode(image).decode()


BAR = "train: 100%|██████████| 6/6 [00:00<00:00, 11.62it/s, loss=3.199]"


def needs_browser():
    browser = find_browser()
    if browser is None:
        pytest.skip("needs Chromium to open the pages: apt-get install chromium (.ci/run "
                    "installs it)")
    if not (data_root() / "mathjax" / "mathjax.whl").exists():
        pytest.skip("needs the offline MathJax: python data_scripts/mathjax.py (make data)")
    return browser


def a_run_notebook():
    """What a lesson's kernel leaves: a formula with a prime, a progress bar on stderr, a
    printed Markdown table, a figure, a failed cell's coloured traceback."""
    out = nbformat.v4.new_output
    cells = [nbformat.v4.new_markdown_cell(
                 "# Lesson 98 — a test page\n\n$$\\mathrm{softmax}(s)_j = e^{s_j} / "
                 "\\sum_{j'} e^{s_{j'}}$$ and $\\overrightarrow{h}_{N'}$"),
             nbformat.v4.new_code_cell("train()", outputs=[
                 out("stream", name="stderr", text="train:   0%|  | 0/6 [00:00<?, ?it/s]\r"
                                                   + BAR + "\n"),
                 out("stream", name="stdout", text="before\n| model | acc |\n|---|---|\n"
                                                   "| ours | 0.93 |\nafter\n"),
                 out("display_data", data={"image/png": png(), "text/plain": "<Figure>"}),
                 out("stream", name="stderr", text="UserWarning: a real warning\n"),
                 out("error", ename="ValueError", evalue="bad",
                     traceback=["\x1b[0;31mValueError\x1b[0m: bad"])])]
    return nbformat.v4.new_notebook(cells=cells)


def test_a_page_reads_as_a_reader_wants_it(tmp_path):
    """Progress bars leave stderr (the pages colour it as errors), keeping their last state;
    a printed table becomes a table (its text stays for the .ipynb and the prose check); a
    real warning stays on stderr."""
    notebook = a_run_notebook()
    tidy_notebook(notebook)
    outputs = notebook.cells[1].outputs
    assert [(o.output_type, o.get("name")) for o in outputs] == [
        ("stream", "stdout"), ("display_data", None), ("stream", "stdout"),
        ("display_data", None), ("stream", "stderr"), ("error", None)]
    assert outputs[0].text == BAR + "\nbefore\n"
    assert outputs[1].data["text/markdown"].startswith("| model | acc |")
    assert "| ours | 0.93 |" in printed_text(notebook) and "after" in outputs[2].text
    assert outputs[4].text == "UserWarning: a real warning\n"
    export_html(notebook, tmp_path / "page.html")
    page = (tmp_path / "page.html").read_text()
    assert "<table>" in page and "| ours |" not in page


FORMULA = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$", re.S)
TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[^\s{}]")


def covering_formulas(texts) -> list[str]:
    """Formulas of these markdown texts, chosen so that every TeX command and every character
    any of them uses appears in at least one (greedy cover): what can fail for want of a
    glyph or a macro, at a fraction of the cost of typesetting all ~850."""
    formulas = [f"$${m[1]}$$" if m[1] is not None else f"${m[2]}$"
                for text in texts for m in FORMULA.finditer(text)]
    tokens = [set(TEX_TOKEN.findall(f.strip("$"))) for f in formulas]
    need, chosen = set().union(*tokens), []
    while need:
        best = max(range(len(formulas)), key=lambda i: len(tokens[i] & need))
        chosen.append(formulas[best])
        need -= tokens[best]
    return chosen


def test_every_tex_command_and_character_of_the_lessons_typesets_in_a_browser(tmp_path):
    """Lesson 01's first formula once read "[Math Processing Error]" (16 over the course:
    every prime, every arrow accent): the pages asked for fonts the offline MathJax does not
    ship. (Every page of a build: `make check-pages`.)"""
    browser = needs_browser()
    texts = [c.source for lesson in course.lesson_files()
             for c in course.lesson_notebook(lesson).cells if c.cell_type == "markdown"]
    formulas = covering_formulas(texts)
    assert any("'" in f for f in formulas) and any("overrightarrow" in f for f in formulas)
    cell = nbformat.v4.new_markdown_cell("\n\n".join(formulas))
    export_html(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "formulas.html")
    result = probe_page(tmp_path / "formulas.html", browser)
    assert page_problems(result) == [] and result["formulas"] == len(formulas), result


def test_a_run_page_has_no_math_error_broken_image_ansi_or_red_progress(tmp_path):
    browser = needs_browser()
    notebook = a_run_notebook()
    tidy_notebook(notebook)
    export_html(notebook, tmp_path / "98_test.html")
    # and beside it a page with each problem the check sees: raw codes, a bar left on stderr,
    # a broken image
    raw = a_run_notebook()
    raw.cells[1].outputs[2].data["image/png"] = "bm90IGEgcG5n"
    raw.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                       text="\x1b[31mred\x1b[0m"))
    export_html(raw, tmp_path / "99_raw.html")
    page = (tmp_path / "99_raw.html").read_text()  # as a page that printed codes raw would be
    (tmp_path / "99_raw.html").write_text(page.replace('<span class="ansi-red-fg">red</span>',
                                                       "\x1b[31mred\x1b[0m"))
    probed = probe_pages(tmp_path, browser)  # the pages `make check-pages` checks
    result = probed["98_test.html"]
    assert page_problems(result) == [] and result["images"] == 1, result
    assert result["formulas"] == 2, result
    with pytest.raises(RuntimeError, match="no page to check in"):  # a mistyped DIR= fails
        check_pages(tmp_path / "notebook-smoke", browser)
    assert [p.split(" ", 1)[1] for p in page_problems(probed["99_raw.html"])] == [
        "of 1 images did not load", "ANSI colour codes in the text",
        "progress outputs on the error background"], probed


# ============================================================================ builds
def tiny_lesson(folder, name, body):
    path = folder / "lessons" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# %% [markdown]\n# # Lesson {name[:2]} — {name}\n\n# %%\n{body}\n")
    return path


CLAIM = ("import json, os, pathlib\nd = pathlib.Path(os.environ['MINATTN_FIGURES']) / '{name}'\n"
         "d.mkdir(parents=True, exist_ok=True)\n(d / 'claims.json').write_text(json.dumps([dict("
         "lesson='{name}', claim='c', paper='1', ours='2', why='', {outcome}, "
         "smoke=bool(os.environ.get('MINATTN_SMOKE')))]))\n"
         "from tqdm.auto import tqdm\nfor _ in tqdm(range(3)): pass\nprint('| a | b |\\n|---|---|"
         "\\n| 1 | 2 |')\nprint('figures in ' + os.path.join(os.getcwd(), 'figures'))")


@pytest.fixture
def tiny_course(tmp_path, monkeypatch):
    """A checkout with one tiny lesson that records a claim and shows a progress bar."""
    lesson = tiny_lesson(tmp_path, "97_tiny", CLAIM.format(name="97_tiny", outcome="{outcome}"))
    monkeypatch.setattr(course, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(course, "lesson_files", lambda root=None: [lesson])
    for name in ("MINATTN_FIGURES", "MINATTN_SMOKE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path, lesson


def test_a_smoke_build_writes_its_own_folders_and_erases_nothing(tiny_course, monkeypatch,
                                                                 capfd):
    """A smoke run once overwrote the full run's figures/<lesson>/claims.json, a learner's
    notebooks/ and the index; the kernel warned about TCP and tqdm's missing widgets. (And the
    pages once named the folder the course was built in.)"""
    root, lesson = tiny_course
    lesson.write_text(lesson.read_text().replace("{outcome}", "outcome='reproduced'"))
    assert course.main([]) == 0  # full mode
    full = (root / "figures" / "97_tiny" / "claims.json").read_text()
    notebook = root / "notebooks" / "97_tiny.ipynb"
    for page in (notebook, notebook.with_suffix(".html")):
        text = page.read_text()
        assert "figures in figures" in text and str(root) not in text, page.name
    mine = nbformat.read(notebook, as_version=4)
    mine.cells.append(nbformat.v4.new_markdown_cell("my note"))
    nbformat.write(mine, notebook)
    out = capfd.readouterr()
    assert "TCP" not in out.err + out.out and "IProgress" not in out.err + out.out

    lesson.write_text(lesson.read_text().replace("outcome='reproduced'",
                                                 "outcome='not tested', reason='smoke'"))
    monkeypatch.setenv("MINATTN_SMOKE", "1")
    assert course.main([]) == 0
    assert (root / "figures" / "97_tiny" / "claims.json").read_text() == full
    smoke = json.loads((root / "figures-smoke" / "97_tiny" / "claims.json").read_text())
    assert (smoke[0]["outcome"], smoke[0]["reason"]) == ("not tested", "smoke")
    assert "my note" in nbformat.read(notebook, as_version=4).cells[-1].source
    index = (root / "notebooks-smoke" / "index.html").read_text()
    assert "not tested (smoke)" in index and '<td class="smoke">smoke</td>' in index
    assert "their outcomes test nothing" in index
    assert "<th>power</th>" in index and "<h3>The papers&#x27; claims</h3>" in index
    assert "not tested (smoke)" in (root / "figures-smoke" / "REPORT.md").read_text()

    # Written over with --out: the edited notebook is kept aside, and said so.
    assert course.main(["--out", str(root / "notebooks")]) == 0
    (backup,) = (root / "notebooks" / "backups").glob("97_tiny-*.ipynb")
    assert "my note" in nbformat.read(backup, as_version=4).cells[-1].source
    said = capfd.readouterr().out
    assert "kept the earlier notebooks/97_tiny.ipynb as notebooks/backups/" in said


def test_a_blank_build_keeps_every_notebook_with_outputs_or_edits(tiny_course, monkeypatch,
                                                                  capfd):
    """`make notebooks` once stripped every executed notebook (lesson 01: 41 outputs -> 0)."""
    root, lesson = tiny_course
    other = tiny_lesson(root, "98_other", "print(2)")
    monkeypatch.setattr(course, "lesson_files", lambda root=None: [lesson, other])
    notebooks = root / "notebooks"
    assert course.main(["--notebooks-only"]) == 0
    assert {p.name for p in notebooks.glob("*.ipynb")} == {"97_tiny.ipynb", "98_other.ipynb"}
    ran = nbformat.read(notebooks / "97_tiny.ipynb", as_version=4)
    ran.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="mine\n")]
    nbformat.write(ran, notebooks / "97_tiny.ipynb")
    before = (notebooks / "97_tiny.ipynb").read_text()
    assert course.main(["--notebooks-only"]) == 0
    assert (notebooks / "97_tiny.ipynb").read_text() == before
    assert "kept " in capfd.readouterr().out and not (notebooks / "backups").exists()
    # A run notebook as `make course` writes it (its digest stamped, so not "edited"): kept too.
    run = nbformat.read(notebooks / "98_other.ipynb", as_version=4)
    run.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="2\n")]
    course.write_notebook(run, notebooks / "98_other.ipynb")
    assert not course.edited(course._read(notebooks / "98_other.ipynb"))
    before = (notebooks / "98_other.ipynb").read_text()
    assert course.main(["--notebooks-only"]) == 0
    assert (notebooks / "98_other.ipynb").read_text() == before


def test_the_index_lists_every_page_present_and_strips_colour_codes(tmp_path):
    """A run of lesson 06 alone once rewrote index.html to list lesson 06 only; a failed
    lesson's row showed raw ANSI codes."""
    for name, meta in (("01_a", {"ok": True, "smoke": False, "seconds": 60.0}),
                       ("06_b", {"ok": False, "smoke": True, "seconds": 3.0,
                                 "error": "\x1b[0;31mValueError\x1b[0m: bad"}),
                       ("07_c", {})):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
            f"# Lesson {name[:2]} — about {name}")], metadata={"minattn": meta})
        nbformat.write(notebook, tmp_path / f"{name}.ipynb")
    (tmp_path / "01_a.html").write_text("page")
    claims = [dict(lesson="01_a", claim="c", paper="1", ours="2", why="w", detail="d",
                   outcome="not tested", label="not tested (fallback)", finding="f", n="2",
                   smoke=False, kind="reading", power=None, not_run=False, computed="",
                   changed_after_run="")]
    page = write_index(tmp_path, None, claims_html(claims), "the rule").read_text()
    assert page.count("<tr><td>") == 3 + 1 and '<a href="01_a.html">Lesson 01</a>' in page
    assert "about 06_b" in page and "about 07_c" in page and "not run" in page
    assert "FAILED: ValueError: bad" in page and not ANSI.search(page)
    assert '<td class="smoke">smoke</td>' in page
    assert "our reading: <b>not tested (fallback)</b>" in page  # as REPORT.md says it


def test_figures_of_a_smoke_run_go_to_their_own_folder(monkeypatch):
    monkeypatch.delenv("MINATTN_FIGURES", raising=False)
    assert course.figure_root(smoke=True).name == "figures-smoke"
    assert course.figure_root(smoke=False).name == "figures"
    monkeypatch.setenv("MINATTN_FIGURES", os.fspath(course.REPO_ROOT / "elsewhere"))
    assert course.figure_root(smoke=True).name == "elsewhere"


def finished_run(path, text="the previous run\n"):
    """A notebook and its page as a finished run of the course left them."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson 97 — sleeps"),
        nbformat.v4.new_code_cell("print(1)", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text=text)])],
        metadata={"minattn": {"ok": True, "smoke": False, "seconds": 900.0, "error": ""}})
    path.parent.mkdir(parents=True, exist_ok=True)
    course.write_notebook(notebook, path)
    export_html(notebook, path.with_suffix(".html"))
    return notebook


def test_ctrl_c_stops_the_course_quietly_keeping_the_previous_notebook(tmp_path):
    """The first Ctrl-C interrupts the running cell and the course stops with one line, no
    traceback (nbclient's own handler killed the kernel). A rebuild interrupted so once
    replaced the previous notebook by what ran (3 of 18 cells, no backup) while the index
    still listed the old run: now the previous notebook and its page stay, readable, and
    what ran goes to backups/."""
    import signal
    import subprocess
    import sys
    import time

    lesson = tiny_lesson(tmp_path, "97_sleeps", "print('started', flush=True)\n"
                                                "import time\ntime.sleep(120)")
    previous = tmp_path / "notebooks" / "97_sleeps.ipynb"
    finished_run(previous)
    before = (previous.read_bytes(), previous.with_suffix(".html").read_bytes())
    driver = tmp_path / "run.py"
    driver.write_text(
        "import sys\nfrom pathlib import Path\nfrom minattn.course import course\n"
        f"course.REPO_ROOT = Path({str(tmp_path)!r})\n"
        f"course.lesson_files = lambda root=None: [Path({str(lesson)!r})]\n"
        "sys.exit(course.main([]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MINATTN_SMOKE", "MINATTN_FIGURES")}
    proc = subprocess.Popen([sys.executable, str(driver)], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started = tmp_path / "notebooks"
    for _ in range(1200):  # the kernel printed its first line
        if proc.stdout.readline().startswith("started") or proc.poll() is not None:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    (partial,) = (started / "backups").glob("97_sleeps-interrupted-*.ipynb")
    assert err.strip().splitlines()[-1] == (
        "interrupted (SIGINT): 0 of 1 lessons finished (none); what ran of 97_sleeps is in "
        f"notebooks/backups/{partial.name}, its previous notebook, page and claims are kept"), err
    assert (previous.read_bytes(), previous.with_suffix(".html").read_bytes()) == before
    kept = nbformat.read(previous, as_version=4)
    assert kept.cells[1].outputs[0].text == "the previous run\n"
    ran = nbformat.read(partial, as_version=4)
    outputs = [o for c in ran.cells for o in c.get("outputs", [])]
    assert outputs[0].text == "started\n" and outputs[-1].ename == "KeyboardInterrupt"
    assert ran.metadata["minattn"]["interrupted"] and not ran.metadata["minattn"]["ok"]
    assert not list(started.glob(".*.tmp"))


def test_a_run_goes_in_place_unless_it_was_interrupted_and_a_failed_one_keeps_the_finished(
        tmp_path, capsys):
    """Without a previous notebook an interrupted run is the page (marked as such); a run that
    failed copies the finished run it replaces to backups/ first."""
    ipynb = tmp_path / "97_sleeps.ipynb"
    partial = finished_run(tmp_path / "scratch.ipynb", "what ran\n")
    partial.metadata["minattn"].update(ok=False, interrupted=True, error="interrupted (Ctrl-C)")
    assert course.save_run(partial, ipynb, ipynb.with_suffix(".html"), interrupted=True) == ipynb
    assert ipynb.with_suffix(".html").exists() and not (tmp_path / "backups").exists()
    finished_run(ipynb)
    failed = finished_run(tmp_path / "scratch.ipynb", "a failed run\n")
    failed.metadata["minattn"].update(ok=False, error="ValueError: bad")
    assert course.save_run(failed, ipynb, ipynb.with_suffix(".html"), interrupted=False) == ipynb
    (backup,) = (tmp_path / "backups").glob("97_sleeps-*.ipynb")
    assert nbformat.read(backup, as_version=4).cells[1].outputs[0].text == "the previous run\n"
    assert "(a run that finished, replaced by a failed one)" in capsys.readouterr().out


# ============================================================================ the class's pages
def outermost_listings() -> dict[str, list[str]]:
    """module -> the top-level functions and classes holding an implement exercise's region:
    showing them shows every region (closures and methods included)."""
    import ast

    from minattn.course import REPO_ROOT
    from minattn.course.classroom.regions import all_exercises

    listed: dict[str, list[str]] = {}
    for e in all_exercises():
        if e.kind != "implement":
            continue
        tree = ast.parse((REPO_ROOT / e.path).read_text())
        node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                    and n.lineno <= e.line <= n.end_lineno)
        module = ".".join(e.path.with_suffix("").parts).removesuffix(".__init__")
        if node.name not in listed.setdefault(module, []):
            listed[module].append(node.name)
    return listed


def solution_lines() -> dict[str, set[str]]:
    """exercise id -> its implement regions' lines that would give it away: the audit's
    'significant' lines (12 characters or more once spaces, comments and np./torch. are gone)
    that a student copy does not hold anyway (`if mask is not None:` is everywhere)."""
    from minattn.course.classroom.audit import _norm, _significant
    from minattn.course.classroom.regions import all_exercises, strip_solutions

    exercises = all_exercises()
    in_copy = {_norm(line) for path in {e.path for e in exercises}
               for line in strip_solutions((REPO / path).read_text()).splitlines()}
    lines: dict[str, set[str]] = {}
    for e in exercises:
        if e.kind == "implement":
            lines.setdefault(e.id, set()).update(_significant(REPO, e) - in_copy)
    return lines


def shown_lines(path) -> set[str]:
    """Every line a page (HTML: its text, tags dropped) or a notebook (its outputs) shows,
    reduced as the audit reduces a region's lines."""
    import html

    from minattn.course.classroom.audit import _norm

    text = path.read_text()
    if path.suffix == ".ipynb":
        text = "\n".join("".join(v) if isinstance(v, list) else str(v)
                         for cell in json.loads(text)["cells"]
                         for out in cell.get("outputs", [])
                         for v in [out.get("text", ""), *out.get("data", {}).values(),
                                   *out.get("traceback", [])])
    else:
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return {_norm(line) for line in text.splitlines()}


REPO = course.REPO_ROOT


def listings_notebook():
    """A smoke build's notebook whose one cell show()ed every function or class holding an
    implement exercise, alone (Markdown) and side by side (HTML), as a kernel records it."""
    import importlib

    from minattn.course.lesson import notebook_listing, source_of

    outputs = []
    for module, names in outermost_listings().items():
        objects = [getattr(importlib.import_module(module), name) for name in names]
        for shown in [[obj] for obj in objects] + [objects]:
            kind, text = notebook_listing([source_of(obj) for obj in shown])
            outputs.append(nbformat.v4.new_output("display_data", data={
                kind: text, "text/plain": f"<IPython.core.display.{kind[5:].upper()} object>"}))
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson 97 — listings"),
        nbformat.v4.new_code_cell("show(...)", outputs=outputs)],
        metadata={"minattn": {"ok": True, "smoke": True, "seconds": 1.0, "error": ""}})


def test_the_class_pages_show_every_exercise_as_its_stub(tmp_path, monkeypatch, capsys):
    """The full-mode pages once showed the solution of every implement exercise (lesson 01's
    show(softmax_np) right after section 1). The class's build holds none of their lines --
    here of a build whose page shows every function holding an implement exercise -- while
    the teacher's build shows each of them. (A kernel's show() is tests/test_lesson_tools.py's;
    a smoke build of lessons 01 and 06 checked so showed 1.1-1.3, 6.1 and 6.2 in the
    teacher's pages, none in the class's.)"""
    monkeypatch.setattr(course, "REPO_ROOT", tmp_path)
    monkeypatch.delenv("MINATTN_FIGURES", raising=False)
    build, shared = tmp_path / "notebooks-smoke", tmp_path / "notebooks-smoke-class"
    build.mkdir()
    notebook = listings_notebook()
    course.write_notebook(notebook, build / "97_listings.ipynb")
    export_html(notebook, build / "97_listings.html")
    assert course.main(["--class-pages", "--out", str(build)]) == 0
    said = capsys.readouterr().out
    assert "Share notebooks-smoke-class/, not notebooks-smoke/" in said
    solutions = solution_lines()
    assert all(solutions.values()), solutions  # each exercise has lines to look for
    for page in ("97_listings.html", "97_listings.ipynb"):
        teacher, student = shown_lines(build / page), shown_lines(shared / page)
        for ex_id, lines in solutions.items():
            assert lines & teacher, f"{page}: the teacher's build shows no line of {ex_id}"
            assert not lines & student, f"{page} gives exercise {ex_id} away: {lines & student}"
        assert any("raiseNotImplementedError(" in line for line in student)
    index = (shared / "index.html").read_text()
    assert "The class's pages" in index and "97_listings.html" in index


def test_a_lesson_prints_paths_relative_to_the_course():
    """Pages once printed the builder's own folders (a lesson's `figures -> /home/...`)."""
    import torch

    from minattn.course.lesson import shown_path
    from minattn.course.pages import without_root

    assert shown_path(REPO / "figures" / "01_attention") == "figures/01_attention"
    assert shown_path(torch.nn.functional.__file__) == "torch/nn/functional.py"
    assert without_root(f"saved {REPO}/figures/a.png; cd {REPO} && x; {REPO}2/b", REPO) == \
        f"saved figures/a.png; cd . && x; {REPO}2/b"


def test_the_class_pages_cut_a_traceback_to_its_last_line():
    """A traceback quotes the library's lines around each frame: a solution's, say."""
    from minattn.course.pages import class_notebook

    notebook = a_run_notebook()
    error = notebook.cells[1].outputs[-1]
    error.traceback = ["Traceback", "    e = np.exp(x - x.max(axis=-1, keepdims=True))",
                       "ValueError: bad"]
    assert class_notebook(notebook) == 1
    assert error.traceback == ["ValueError: bad"]
