"""The course's pages: executed notebooks tidied for reading, their static HTML (equations
typeset offline), the index of the lesson pages in a folder, and a check in a real browser.

    python -m minattn.course.pages check notebooks/        # every page, in headless Chromium

`make course` (course.py) runs the lessons and calls these. The browser check opens each page
in headless Chromium (`apt-get install chromium`; `CHROMIUM=path` picks another) with a probe
that waits for MathJax and reports: formulas that failed to typeset ("[Math Processing
Error]"), images that did not load, raw ANSI colour codes, and progress bars printed on the
error background of stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CARRIAGE_RETURN = re.compile(r"[^\n]*\r(?=[^\n])")  # text a later '\r' overwrote (tqdm bars)
# a tqdm line: "desc:  40%|####      | 4/10 [00:01<00:02, 3.1it/s, loss=2]", "7it [00:01, 5.2it/s]"
PROGRESS = re.compile(r"\[\d+:\d+(:\d+)?(<[\d:?]+)?, *[?\d.]+ ?[kMG]?(it|s|B)/(s|it)\b")
TABLE_ROW = re.compile(r"^\|.*\|\s*$")
TABLE_RULE = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")


# ============================================================================ notebooks
def _stream(name: str, text: str):
    import nbformat

    return nbformat.v4.new_output("stream", name=name, text=text)


def _merge(outputs: list) -> list:
    merged = []
    for out in outputs:
        if (out.output_type == "stream" and merged and merged[-1].output_type == "stream"
                and merged[-1].name == out.name):
            merged[-1].text += out.text
        else:
            merged.append(out)
    return merged


def _split(out, pattern_of_line, make) -> list:
    """A stream output cut where `pattern_of_line` changes its verdict: runs of lines it
    accepts become `make(text)`, the others stay the stream they were."""
    pieces, runs = [], []
    for line in out.text.splitlines(keepends=True):
        hit = bool(pattern_of_line(line.rstrip("\n")))
        if runs and runs[-1][0] == hit:
            runs[-1][1].append(line)
        else:
            runs.append((hit, [line]))
    for hit, lines in runs:
        pieces += make("".join(lines), out) if hit else [_stream(out.name, "".join(lines))]
    return pieces


def _table_blocks(text: str, out) -> list:
    """Printed text with Markdown tables in it: each table becomes a display output (its
    Markdown, and the same text as plain text for a reader of the .ipynb)."""
    import nbformat

    lines = text.splitlines(keepends=True)
    pieces, plain, i = [], [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and TABLE_ROW.match(lines[j].rstrip("\n")):
            j += 1
        if j - i >= 2 and TABLE_RULE.match(lines[i + 1].rstrip("\n")):
            if plain:
                pieces.append(_stream(out.name, "".join(plain)))
                plain = []
            table = "".join(lines[i:j])
            pieces.append(nbformat.v4.new_output("display_data", data={
                "text/markdown": table, "text/plain": table}))
            i = j
        else:
            plain.append(lines[i])
            i += 1
    if plain:
        pieces.append(_stream(out.name, "".join(plain)))
    return pieces


def write_whole(path: Path, write) -> None:
    """`write(temporary path)`, then the temporary file renamed to `path`: an interrupted write
    (Ctrl-C, a full disk) leaves the file that was there."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def without_root(text: str, root: Path | None) -> str:
    """`text` with the builder's folder `root/` left out of every path: a page says
    `minattn/attention.py`, `figures/01_attention`, not where the course was built."""
    if not root or not isinstance(text, str):
        return text
    for folder in dict.fromkeys([str(root), os.path.realpath(root)]):
        pattern = re.escape(folder.rstrip("/")) + r"(/|(?![\w.\-/]))"
        text = re.sub(pattern, lambda m: "" if m[1] else ".", text)
    return text


def _relative_outputs(outputs: list, root: Path | None) -> None:
    for out in outputs:
        if out.output_type == "stream":
            out.text = without_root(out.text, root)
        elif out.output_type == "error":
            out.evalue = without_root(out.evalue, root)
            out.traceback = [without_root(line, root) for line in out.traceback]
        else:
            for kind, value in out.get("data", {}).items():
                if kind.startswith("text/"):
                    out.data[kind] = (without_root(value, root) if isinstance(value, str)
                                      else [without_root(v, root) for v in value])


def tidy_notebook(notebook, root: Path | None = None) -> None:
    """What a browser would show, as a reader wants it: consecutive stream outputs merged,
    only the last state of each progress bar kept, progress bars moved from stderr (which
    the pages colour as errors) to stdout, printed Markdown tables shown as tables, and
    (given the course's `root`) paths relative to it, never the builder's own folder."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        _relative_outputs(cell.get("outputs", []), root)
        outputs = _merge(cell.get("outputs", []))
        for out in outputs:
            if out.output_type == "stream":
                out.text = _CARRIAGE_RETURN.sub("", out.text.replace("\r\n", "\n"))
        tidy = []
        for out in outputs:
            if out.output_type == "stream" and out.name == "stderr":
                tidy += _split(out, lambda line: not line.strip() or PROGRESS.search(line),
                               lambda t, o: [_stream("stdout", t)])
            else:
                tidy.append(out)
        outputs, tidy = _merge(tidy), []
        for out in outputs:
            if out.output_type == "stream" and out.name == "stdout" and "|" in out.text:
                tidy += _table_blocks(out.text, out)
            else:
                tidy.append(out)
        cell.outputs = tidy


def printed_text(notebook) -> str:
    """Everything the code cells printed (streams, and the plain text of displayed tables)."""
    return "\n".join(o.get("text", "") if o.output_type == "stream"
                     else o.get("data", {}).get("text/plain", "")
                     for c in notebook.cells if c.cell_type == "code"
                     for o in c.get("outputs", []))


def digest(notebook) -> str:
    """A fingerprint of the cells (sources and outputs): it changes when a reader edits or
    runs the notebook."""
    cells = [(c.cell_type, c.source, c.get("outputs", [])) for c in notebook.cells]
    return hashlib.sha256(json.dumps(cells, sort_keys=True, default=str).encode()).hexdigest()


def summary_of(notebook, fallback: str) -> tuple[str, str]:
    """(title, one-line summary) from the notebook's '# ' heading: "Lesson 01 — Scaled
    dot-product attention" gives ("Lesson 01", "Scaled dot-product attention"). Without a dash,
    the summary is the first sentence of the first markdown cell."""
    text = next((c.source for c in notebook.cells if c.cell_type == "markdown"), "")
    lines = text.splitlines()
    heading = next((h.lstrip("# ").strip() for h in lines if h.startswith("# ")), fallback)
    title, dash, summary = heading.partition(" — ")
    if not dash:
        body = " ".join(t.strip() for t in lines if t.strip() and not t.startswith("#"))
        summary = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0] if body else ""
    return title.strip(), re.sub(r"[*`]", "", summary).strip()


# ============================================================================ the class's pages
# show()'s header line of a listing: `module.qualname  (path:line)`
WHERE = re.compile(r"(?P<name>[\w.<>]+)  \((?P<path>[^()\n]+?\.py):(?P<line>\d+)\)")


def _listed(where: str):
    """The object a show() header names (None when it cannot be found)."""
    import importlib

    m = WHERE.fullmatch(where.strip())
    if m is None:
        return None
    module = ".".join(Path(m["path"]).with_suffix("").parts).removesuffix(".__init__")
    if not m["name"].startswith(module + "."):
        return None
    try:
        obj = importlib.import_module(module)
        for part in m["name"][len(module) + 1:].split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def _class_listing(wheres: list[str], stub) -> list[tuple[str, str]] | None | bool:
    """[(where, source with the exercises stubbed)] for the listings show() headed `wheres`,
    from the library as it is now; False when none is the library's (the output stays as it
    is); None when one cannot be found (then the output goes: it may hold a solution)."""
    from .lesson import source_of

    found = [WHERE.fullmatch(w.strip()) for w in wheres]
    if not any(m and m["path"].startswith("minattn/") for m in found):
        return False
    objects = [_listed(w) for w in wheres]
    if any(obj is None for obj in objects):
        return None
    return [source_of(obj, stub) for obj in objects]


def class_notebook(notebook) -> int:
    """The notebook as a class may see it (in place): every library listing that show()
    displayed holds the exercises as a student's copy does (`raise NotImplementedError(...)`
    between the markers), an error's traceback (which quotes library lines) is cut to its
    last line, and a lesson's own lines of an exercise (its *shown* regions) give way to the
    statement that stands in for them in a student's copy; a cell marked `# EXERCISE <id>
    answered here` (an experiment's table) loses its output. Returns how many cells and outputs
    changed. (The classroom's audit checks that a lesson holds no other region's lines.)"""
    import html as html_module

    import nbformat

    from .classroom.regions import (
        ANSWERED,
        all_exercises,
        descriptions,
        strip_shown,
        strip_solutions,
    )
    from .lesson import notebook_listing, script_listing
    from .prose import SHOWN_SOURCE, SOURCE_HEADER

    what = descriptions(all_exercises())

    def stub(text):
        return strip_solutions(text, None, what)

    dropped = ("(a listing of the library is left out of the class's pages: its function was "
               "not found to show it with the exercises stubbed)\n")
    changed = 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = strip_shown(cell.source)  # a lesson's own lines of an exercise
        changed += source != cell.source
        cell.source = source
        if answered := ANSWERED.search(source):  # an experiment's answer: the class runs it
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
                f"(left out of the class's pages: this cell's output answers exercise "
                f"{answered['id']}; run the lesson to see it)\n"))]
            changed += 1
            continue
        outputs = []
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                out.traceback = [f"{out.ename}: {out.evalue}"]
                changed += 1
            elif out.output_type == "stream" and SHOWN_SOURCE.search(out.text):
                def again(m):
                    where = m[0].splitlines()[0][len(SOURCE_HEADER):]
                    shown = _class_listing([where], stub)
                    return (m[0] if shown is False else dropped if shown is None
                            else script_listing(shown).rstrip("\n"))
                text = SHOWN_SOURCE.sub(again, out.text)
                changed += text != out.text
                out.text = text
            elif out.output_type in ("display_data", "execute_result"):
                data = out.get("data", {})
                kind = next((k for k in ("text/markdown", "text/html") if k in data), None)
                text = data.get(kind, "") if kind else ""
                text = "".join(text) if isinstance(text, list) else text
                wheres = ([m[0] for m in WHERE.finditer(html_module.unescape(text))]
                          if kind else [])
                shown = _class_listing(wheres, stub) if wheres else False
                if shown is None:
                    out = nbformat.v4.new_output("stream", name="stdout", text=dropped)
                    changed += 1
                elif shown:
                    new_kind, new_text = notebook_listing(shown)
                    out.data = {new_kind: new_text, "text/plain": "\n".join(
                        where for where, _ in shown)}
                    changed += 1
            outputs.append(out)
        cell.outputs = outputs
    return changed


# ============================================================================ HTML
MATHJAX_CONFIG = "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# The MathJax 2.7 that data_scripts/mathjax.py fetches ships the STIX-Web fonts only: asked
# for its default TeX fonts, HTML-CSS fails on every formula with a prime or an arrow accent
# ("[Math Processing Error]").
STIX_CONFIG = ('<script type="text/x-mathjax-config">MathJax.Hub.Config({"HTML-CSS": '
               '{availableFonts: ["STIX-Web"], preferredFont: "STIX-Web", webFont: "STIX-Web", '
               'imageFont: null}});</script>')
END_OF_CONFIG = "<!-- End of mathjax configuration -->"


def local_mathjax(out_dir: Path) -> str | None:
    """Unpack MathJax (fetched by data_scripts/mathjax.py) into <out_dir>/mathjax once and return
    the pages' relative URL for it; None when it was not fetched (the pages then use the CDN)."""
    import zipfile

    from .fetch import data_root

    wheel = data_root() / "mathjax" / "mathjax.whl"
    target = out_dir / "mathjax"
    if not (target / "MathJax.js").exists():
        if not wheel.exists():
            return None
        prefix = "jupyter_server_mathjax/static/"
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(prefix) and not member.endswith("/"):
                    dest = target / member[len(prefix):]
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(archive.read(member))
    return f"mathjax/{MATHJAX_CONFIG}"


def export_html(notebook, path: Path) -> None:
    """A static HTML copy of an executed notebook, figures embedded as data: URIs, equations
    typeset by a local MathJax when one was fetched (offline reading), else by the CDN's."""
    from nbconvert import HTMLExporter

    mathjax = local_mathjax(path.parent)
    exporter = HTMLExporter(embed_images=True, **({"mathjax_url": mathjax} if mathjax else {}))
    body, _ = exporter.from_notebook_node(notebook)
    # The template also loads require.js from a CDN, for interactive widgets; our pages have
    # none, and an offline reader's browser would only wait for it.
    body = body.replace(f'<script src="{exporter.require_js_url}"></script>', "", 1)
    if mathjax:
        body = body.replace(END_OF_CONFIG, STIX_CONFIG + END_OF_CONFIG, 1)
    write_whole(path, lambda tmp: tmp.write_text(body, encoding="utf-8"))


# ============================================================================ the index
def lesson_pages(out_dir: Path) -> list[Path]:
    """The lesson notebooks in a folder (NN_topic.ipynb), in order."""
    return sorted(Path(out_dir).glob("[0-9][0-9]_*.ipynb"))


def write_index(out_dir: Path, report: Path | None, claim_tables: str, rule: str,
                about: str = "") -> Path:
    """<out_dir>/index.html: every lesson page in the folder (title, summary, whether it ran in
    full or smoke mode, its run time, links) and the claims' tables (HTML, from
    `report.claims_html`); `about`: a paragraph on the build (HTML) under the introduction."""
    import nbformat

    esc = html.escape
    rows, modes = [], set()
    for ipynb in lesson_pages(out_dir):
        notebook = nbformat.read(ipynb, as_version=4)
        meta = notebook.metadata.get("minattn", {})
        title, summary = summary_of(notebook, ipynb.stem)
        page = ipynb.with_suffix(".html")
        link = (f'<a href="{esc(page.name)}">{esc(title)}</a>' if page.exists()
                else esc(title))
        state = ""
        if "ok" in meta and not meta["ok"]:
            state = f' <b class="fail">FAILED: {esc(ANSI.sub("", meta.get("error", "")))}</b>'
        if meta.get("prose_misses"):
            state += (' <b class="fail">the text says about ' + esc(", ".join(
                meta["prose_misses"])) + ", which this run did not print</b>")
        mode = ("not run" if "ok" not in meta else "smoke" if meta.get("smoke") else "full")
        modes.add(mode)
        seconds = f"{meta['seconds']:.0f} s" if "seconds" in meta else "—"
        rows.append(f'<tr><td>{link} — <span class="sum">{esc(summary)}</span>{state}</td>'
                    f'<td class="{mode.replace(" ", "-")}">{mode}</td><td>{seconds}</td>'
                    f'<td><a href="{esc(ipynb.name)}">.ipynb</a></td></tr>')
    note = ("<p><b>Smoke</b> rows ran at tiny sizes, in seconds: their numbers are not the "
            "lessons' results, and their outcomes test nothing. <code>make course</code> "
            "runs them in full.</p>" if "smoke" in modes else "")
    link = esc(os.path.relpath(report, out_dir)) if report else ""
    report_link = (f'<p>The same table as Markdown: <a href="{link}">{link}</a>.</p>'
                   if report else "")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>minattn — the course</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4em;
vertical-align:top;text-align:left}}.sum{{color:#444}}.fail{{color:#b00}}.smoke{{color:#a60}}
</style></head><body>
<h1>minattn — attention mechanisms from scratch</h1>
<p>Each lesson below was executed once as a notebook by <code>make course</code> (full mode) or
<code>make smoke</code>. Its page shows the code, the printed results and the figures. The
<code>.ipynb</code> is the same notebook, to open in Jupyter (<code>make lab</code>) and run
yourself.</p>
{about}
{note}
<table><tr><th>lesson</th><th>mode</th><th>run time</th><th>notebook</th></tr>
{chr(10).join(rows) or '<tr><td colspan="4">No lesson page here yet.</td></tr>'}
</table>
<h2>Paper claims, ours beside the paper's</h2>
<p>{esc(rule)}</p>
{claim_tables or '<p>No lesson recorded a claim.</p>'}
{report_link}
</body></html>
"""
    path = Path(out_dir) / "index.html"
    write_whole(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))
    return path


# ============================================================================ in a browser
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--virtual-time-budget=30000", "--dump-dom")
PROBE = """<script type="text/x-mathjax-config">
window.__minattn = [];
MathJax.Hub.Register.MessageHook("Math Processing Error", function (m) {
  window.__minattn.push(String(m[2] && m[2].message || m)); });
MathJax.Hub.Register.MessageHook("TeX Jax - parse error", function (m) {
  window.__minattn.push("TeX: " + m[1]); });
MathJax.Hub.Register.StartupHook("End", function () { MathJax.Hub.Queue(__minattnReport); });
</script>"""
REPORT = """<script>
function __minattnReport() {
  if (document.getElementById("minattn-probe")) return;
  var images = Array.prototype.slice.call(document.images), text = document.body.innerText;
  var stderr = document.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]');
  var out = document.createElement("pre");
  out.id = "minattn-probe";
  out.textContent = JSON.stringify({
    mathjax: !!window.MathJax, errors: window.__minattn || [],
    shown_errors: (text.match(/Math Processing Error/g) || []).length,
    formulas: window.MathJax && MathJax.Hub ? MathJax.Hub.getAllJax().length : 0,
    images: images.length,
    broken: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                  .map(function (i) { return i.src.slice(0, 60); }),
    ansi: /\\u001b\\[|\\[[0-9;]*[0-9]m/.test(text),
    red_progress: Array.prototype.filter.call(stderr, function (e) {
      return /\\d+%\\||\\d+it \\[|it\\/s|s\\/it/.test(e.innerText); }).length});
  document.body.appendChild(out);
}
window.addEventListener("load", function () { if (!window.MathJax) __minattnReport(); });
</script>"""


def find_browser() -> str | None:
    """A headless-capable Chromium: $CHROMIUM, else the first of BROWSERS on the PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def probe_page(page: Path, browser: str, timeout: float = 120, typeset: bool = True) -> dict:
    """What Chromium made of one page (see REPORT), from a copy of it with the probe in.
    `typeset=False` leaves MathJax out (its formulas cost ~50 ms of CPU each): images, colour
    codes and progress bars only."""
    page = Path(page).resolve()
    text = page.read_text(encoding="utf-8")
    if not typeset:
        text = re.sub(r'<script src="[^"]*MathJax\.js[^"]*">\s*</script>', "", text)
    text = (text.replace(END_OF_CONFIG, PROBE + END_OF_CONFIG, 1) if END_OF_CONFIG in text
            else text)
    text = text.replace("</body>", REPORT + "</body>", 1)
    with tempfile.TemporaryDirectory(prefix="minattn-browser-") as profile:
        probed = page.with_name(f".probe-{os.getpid()}-{page.name}")
        probed.write_text(text, encoding="utf-8")  # beside it: mathjax/ and links resolve
        try:
            proc = subprocess.run([browser, *BROWSER_FLAGS, f"--user-data-dir={profile}",
                                   probed.as_uri()], capture_output=True, text=True,
                                  timeout=timeout)
        finally:
            probed.unlink(missing_ok=True)
    m = re.search(r'<pre id="minattn-probe">(.*?)</pre>', proc.stdout, re.S)
    if not m:
        return {"failed": f"the page did not finish loading (exit code {proc.returncode}): "
                          + proc.stderr.strip()[-300:]}
    return json.loads(html.unescape(m[1]))


def page_problems(result: dict) -> list[str]:
    """What a reader would see go wrong, from probe_page's result."""
    if "failed" in result:
        return [result["failed"]]
    problems = []
    if result["errors"] or result["shown_errors"]:
        problems.append(f"{max(len(result['errors']), result['shown_errors'])} formulas did "
                        f"not typeset: {'; '.join(sorted(set(result['errors'])))[:300]}")
    if result["broken"]:
        problems.append(f"{len(result['broken'])} of {result['images']} images did not load")
    if result["ansi"]:
        problems.append("raw ANSI colour codes in the text")
    if result["red_progress"]:
        problems.append(f"{result['red_progress']} progress outputs on the error background")
    return problems


def check_pages(folder: Path, browser: str | None = None) -> dict[str, list[str]]:
    """{page: its problems} for every .html page in a folder (the index and the lessons)."""
    return {name: page_problems(result) for name, result in probe_pages(folder, browser).items()}


def probe_pages(folder: Path, browser: str | None = None) -> dict[str, dict]:
    """{page: probe_page's result} for every .html page in a folder."""
    pages = sorted(p for p in Path(folder).glob("*.html") if not p.name.startswith("."))
    if not pages:  # a mistyped folder must not pass as "no problem found"
        raise RuntimeError(f"no page to check in {folder}: build one with make course, make "
                           "smoke or make class-pages")
    browser = browser or find_browser()
    if browser is None:
        raise RuntimeError("no Chromium to check the pages with: apt-get install chromium "
                           "(or CHROMIUM=/path/to/chrome)")
    return {page.name: probe_page(page, browser) for page in pages}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="open every page of a folder in headless Chromium"
                   ).add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        found = check_pages(args.folder)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for page, problems in found.items():
        print(f"{page}: {'; '.join(problems) if problems else 'ok'}")
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
