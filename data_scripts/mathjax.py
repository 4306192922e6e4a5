"""MathJax 2.7 for reading the course offline, from jupyter-server-mathjax 0.2.6 (its wheel).

    python data_scripts/mathjax.py   ->   data/mathjax/mathjax.whl  (the verified wheel, 3 MB)

`make course` writes each executed lesson as a static HTML page; the equations in its markdown
need MathJax, which nbconvert loads from a CDN by default — so offline they would show as raw
LaTeX. With this file present, the course runner unpacks the wheel's `static/` folder (MathJax
itself, 9.6 MB) into notebooks/mathjax/ and the pages load it from there. Without it the pages
fall back to the CDN. The package's own code (a Jupyter server extension) is never run.
"""

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import prepare, run_main  # noqa: E402

NAME = "mathjax"
PACKAGE = ("jupyter-server-mathjax", "0.2.6")
FILES = {"mathjax.whl": "416389dde2010df46d5fbbb7adb087a5607111070af65a1445391040f2babb5e"}


def build(archive: Path, stage: Path) -> dict:
    shutil.copyfile(archive, stage / "mathjax.whl")
    return {"member": "jupyter_server_mathjax/static/", "version": "MathJax 2.7"}


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
