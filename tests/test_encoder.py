"""The pure-torch BERT encoder (minattn/encoder.py) and the course's copy of it
(minattn/course/encoder.py): loading, padding, pooling, the token-state cache; parity with
`transformers` when it happens to be installed, and always with reference outputs it computed
once (tests/fixtures/encoder_reference.npz); the real MiniLM when fetched.

A tiny random BERT (2 layers, D = 16) with a tiny WordPiece tokenizer is written to a temporary
folder in the same format as data/minilm/, so the loading path is tested without the real files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from minattn.course import data
from minattn.course.encoder import hidden_states, load_minilm, token_states
from minattn.encoder import BertConfig, MiniLMEncoder, TopLayers, bert_name, embed, encode_batch
from minattn.task_heads import mean_pool_torch as mean_pool

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
            layer_norm_eps=1e-12, hidden_act="gelu", model_type="bert")
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "log", "ran", "far", "away", "big", "red",
         "##s", "##ing", ".", ","]


def random_bert_state(cfg: BertConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """A random checkpoint named the way Hugging Face's BertModel names its weights."""
    gen = torch.Generator().manual_seed(seed)
    model = MiniLMEncoder(cfg)
    state = {}
    for ours, t in model.state_dict().items():
        value = torch.randn(t.shape, generator=gen) * 0.2
        if ours.endswith("norm.weight"):
            value = 1 + value
        state[bert_name(ours)] = value
    return state


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """<tmp>/minilm/ holding config.json, model.safetensors, tokenizer.json for a tiny BERT."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    root = tmp_path_factory.mktemp("data")
    folder = root / "minilm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    cfg = BertConfig.from_json(folder / "config.json")
    save_file(random_bert_state(cfg), str(folder / "model.safetensors"))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=24)  # the shipped trap: fixed padding
    tok.save(str(folder / "tokenizer.json"))
    return root


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_minilm(data_dir=tiny_dir)


# ============================================================================ loading
def test_loads_every_weight(tiny_dir, tiny):
    from safetensors.torch import load_file

    encoder, _ = tiny
    state = load_file(str(tiny_dir / "minilm" / "model.safetensors"))
    assert len(state) == len(encoder.state_dict())
    for ours, t in encoder.state_dict().items():
        assert torch.equal(t, state[bert_name(ours)]), ours
    assert not encoder.training


def test_bad_checkpoints_are_refused():
    cfg = BertConfig(**{k: v for k, v in TINY.items() if k in BertConfig.__dataclass_fields__})
    state = random_bert_state(cfg)
    del state["encoder.layer.1.output.dense.bias"]
    with pytest.raises(ValueError, match="missing.*encoder.layer.1.output.dense.bias"):
        MiniLMEncoder(cfg).load_bert_state_dict(state)
    state = random_bert_state(cfg)
    state["embeddings.word_embeddings.weight"] = torch.zeros(3, 16)
    with pytest.raises(ValueError, match="wrong shape.*\\(40, 16\\)"):
        MiniLMEncoder(cfg).load_bert_state_dict({"bert." + k: v for k, v in state.items()})


def test_missing_model_names_the_script(tmp_path):
    with pytest.raises(data.DatasetMissing, match="data_scripts/minilm.py"):
        load_minilm(data_dir=tmp_path)


def test_tokenizer_pads_to_longest_not_fixed(tiny):
    _, tok = tiny
    ids, mask = encode_batch(tok, ["the cat sat", "a big red dog ran far away ."])
    assert ids.shape == (2, 10) and mask.dtype == torch.bool  # not the fixed 24
    assert mask.sum(1).tolist() == [5, 10] and ids[0, 0] == 2 and ids[0, 4] == 3
    with pytest.raises(ValueError, match="non-empty list of strings"):
        encode_batch(tok, "the cat")


def test_bad_inputs(tiny):
    encoder, tok = tiny
    ids, mask = encode_batch(tok, ["the cat", "the dog sat on the mat"])
    with pytest.raises(ValueError, match="right-padded"):
        encoder(ids, mask.flip(1))
    with pytest.raises(ValueError, match="int64"):
        encoder(ids.int(), mask)
    with pytest.raises(ValueError, match="^attention_mask: .*L = 8"):
        encoder(ids, mask[:, :3])


# ============================================================================ padding and pooling
@pytest.mark.exercise("7.1")  # the sentence embedding is lesson 07's mean_pool_torch
def test_mean_pool_ignores_what_is_in_padding():
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(3, 6, 4, generator=gen, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6, [1] + [0] * 5], dtype=torch.bool)
    pooled = mean_pool(states, mask)
    assert torch.allclose(pooled[0], states[0, :3].mean(0), atol=1e-12)
    assert torch.allclose(pooled[1], states[1].mean(0), atol=1e-12)
    assert torch.equal(pooled[2], states[2, 0])  # one token: itself
    noisy = states.masked_fill(~mask[..., None], 1e6)
    assert torch.allclose(mean_pool(noisy, mask), pooled, atol=1e-12)
    with pytest.raises(ValueError, match="mask"):
        mean_pool(states, mask[:, :4])
    with pytest.raises(ValueError, match="first token"):  # a sentence of no token: refused
        mean_pool(states, torch.zeros_like(mask))


@pytest.mark.exercise("7.1")  # embed reads lesson 07's mean_pool_torch
def test_same_sentence_vector_with_and_without_padding(tiny):
    encoder, tok = tiny
    alone = embed(encoder, tok, ["the cat sat"], normalize=False)
    padded = embed(encoder, tok, ["the cat sat", "a big red dog ran far away on the log ."],
                   normalize=False)
    assert torch.allclose(alone[0], padded[0], atol=1e-6)
    ids, mask = encode_batch(tok, ["the cat sat"])
    extra = torch.cat([ids, torch.zeros(1, 7, dtype=torch.long)], 1)  # 7 more [PAD]s
    extra_mask = torch.cat([mask, torch.zeros(1, 7, dtype=torch.bool)], 1)
    with torch.no_grad():
        assert torch.allclose(mean_pool(encoder(extra, extra_mask), extra_mask), alone,
                              atol=1e-6)
        # Without the mask the padding leaks in: the test above can fail.
        leaky = encoder(extra, torch.ones_like(extra_mask)).mean(1)
    assert not torch.allclose(leaky, alone, atol=1e-3)


def test_explicit_attention_path_matches_and_ignores_padding(tiny):
    encoder, tok = tiny
    ids, mask = encode_batch(tok, ["the cat", "the dog sat on the mat"])
    with torch.no_grad():
        fast, _ = encoder.run(ids, mask)
        slow, weights = encoder.run(ids, mask, need_weights=True)
    assert torch.allclose(fast[-1], slow[-1], atol=1e-5)
    w = weights[0]  # (B, H, L, L)
    assert w.shape == (2, 4, 8, 8)
    assert torch.all(w[0, :, :, 4:] == 0)  # no weight on the padded keys of sentence 0
    assert torch.allclose(w.sum(-1), torch.ones(2, 4, 8), atol=1e-6)


# ============================================================================ token-state cache
def test_token_state_cache_round_trip(tiny, tmp_path, monkeypatch):
    encoder, tok = tiny
    texts = ["the cat sat", "a dog ran far away", "the mat", "big red logs"]
    cache = token_states(encoder, tok, texts, "toy", batch_size=3, data_dir=tmp_path)
    files = list((tmp_path / "cache").glob("toy-*.npz"))
    assert len(files) == 1 and len(cache) == 4
    assert cache.lengths().tolist() == [5, 7, 4, 6]  # "logs" -> log ##s
    states, mask = cache.batch([1, 3])
    ids, ref_mask = encode_batch(tok, [texts[1], texts[3]])
    with torch.no_grad():
        ref = encoder(ids, ref_mask)
    assert torch.equal(mask, ref_mask)
    assert torch.allclose(states[mask], ref[ref_mask], atol=2e-2, rtol=1e-2)  # float16 on disk

    def boom(*args, **kwargs):
        raise AssertionError("the cache should have been read, not recomputed")

    monkeypatch.setattr(encoder, "forward", boom)
    again = token_states(encoder, tok, texts, "toy", data_dir=tmp_path)
    assert np.array_equal(again.states, cache.states)
    monkeypatch.undo()
    token_states(encoder, tok, texts[:3], "toy", data_dir=tmp_path)  # other texts: new file
    assert len(list((tmp_path / "cache").glob("toy-*.npz"))) == 2
    with pytest.raises(ValueError, match="out of range"):
        cache.batch([4])


def test_hidden_states_of_any_layer_and_of_pairs(tiny, tmp_path):
    encoder, tok = tiny
    pairs = [("the cat sat", "a dog"), ("the mat", "big red logs ran far")]
    cache = hidden_states(encoder, tok, pairs, "toy-pairs", [1, 0], data_dir=tmp_path)
    assert sorted(cache) == [0, 1] and len(list((tmp_path / "cache").glob("toy-pairs-*"))) == 2
    ids, mask, types = encode_batch(tok, pairs, with_types=True)
    # [CLS] A [SEP] B [SEP]: type 0 up to the first [SEP], 1 after
    assert types[0][mask[0]].tolist() == [0, 0, 0, 0, 0, 1, 1, 1] and ids[0, 4] == 3
    with torch.no_grad():
        states = encoder.run(ids, mask, token_type_ids=types)[0]
        untyped = encoder.run(ids, mask)[0]
    for layer in (0, 1):
        got, got_mask = cache[layer].batch([0, 1])
        assert torch.equal(got_mask, mask)
        assert torch.allclose(got[mask], states[layer][mask], atol=2e-2, rtol=1e-2)  # float16
    assert not torch.allclose(untyped[1][mask], states[1][mask], atol=1e-2)  # the types count
    last = token_states(encoder, tok, ["the cat"], "toy", data_dir=tmp_path)  # = the last layer
    assert np.array_equal(last.states, hidden_states(encoder, tok, ["the cat"], "toy", [2],
                                                     data_dir=tmp_path)[2].states)
    with pytest.raises(ValueError, match="layers"):
        hidden_states(encoder, tok, ["the cat"], "toy", [3], data_dir=tmp_path)
    with pytest.raises(ValueError, match="pairs of strings"):
        encode_batch(tok, [("the cat", "a dog", "the mat")])


def test_top_layers_continue_the_encoder_and_train_apart_from_it(tiny):
    encoder, tok = tiny
    ids, mask = encode_batch(tok, ["the cat sat on the mat", "a dog"])
    with torch.no_grad():
        states = encoder.run(ids, mask)[0]
        short = encoder.run(ids, mask, last_layer=1)[0]
    assert len(short) == 2 and torch.allclose(short[1], states[1])
    top = TopLayers(encoder, 1)
    assert top.first == 1
    out = top(states[1], mask)
    assert torch.allclose(out[mask], states[2][mask], atol=1e-6)  # the same numbers as the encoder
    out[mask].sum().backward()
    torch.optim.SGD(top.parameters(), lr=0.1).step()
    assert not torch.allclose(top(states[1], mask)[mask], states[2][mask], atol=1e-3)
    with torch.no_grad():  # a copy: the encoder itself did not move
        assert torch.allclose(encoder(ids, mask)[mask], states[2][mask])
    for n in (0, 3):  # of a 2-layer encoder
        with pytest.raises(ValueError, match=r"^n: expected int in 1 \.\. encoder\.config\."
                           r"num_hidden_layers = 2, got int"):
            TopLayers(encoder, n)


# ============================================================================ transformers parity
def hf_model(state_or_dir, cfg_dict):
    import transformers

    config = transformers.BertConfig(**cfg_dict)
    model = transformers.BertModel(config, add_pooling_layer=False)
    model.load_state_dict(state_or_dir, strict=False)
    model.config._attn_implementation = "eager"
    return model.eval()


def test_matches_transformers_tiny(tiny_dir, tiny):
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    encoder, tok = tiny
    ref = hf_model(load_file(str(tiny_dir / "minilm" / "model.safetensors")), TINY)
    ids, mask = encode_batch(tok, ["the cat sat on the mat .", "a dog", "big red logs ran"])
    with torch.no_grad():
        ours, _ = encoder.run(ids, mask)
        theirs = ref(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
    for a, b in zip(ours, theirs.hidden_states):
        assert (a - b).abs()[mask].max() < 1e-5


@pytest.mark.realdata
@pytest.mark.skipif(not data.available("minilm"), reason="python data_scripts/minilm.py")
def test_matches_transformers_minilm():
    """float32: within 1e-5 (measured 1e-5 at worst over 64 sentences, values up to ~10);
    float64: the same function, to rounding."""
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    encoder, tok = load_minilm()
    folder = data.dataset_dir("minilm")
    ref = hf_model(load_file(str(folder / "model.safetensors")),
                   json.loads((folder / "config.json").read_text()))
    ids, mask = encode_batch(tok, ["Attention is all you need.",
                                   "A short one", "The quick brown fox jumps over the lazy dog."])
    for dtype, atol, rtol in ((torch.float32, 1e-5, 1e-5), (torch.float64, 1e-10, 0.0)):
        with torch.no_grad():
            ours, _ = encoder.to(dtype).run(ids, mask)
            theirs = ref.to(dtype)(input_ids=ids, attention_mask=mask.long(),
                                   output_hidden_states=True).hidden_states
        for layer, (a, b) in enumerate(zip(ours, theirs)):
            assert torch.allclose(a[mask], b[mask], atol=atol, rtol=rtol), (dtype, layer)


@pytest.mark.realdata
@pytest.mark.skipif(not data.available("minilm"), reason="python data_scripts/minilm.py")
def test_matches_committed_transformers_reference():
    """The external oracle without transformers installed: outputs of all-MiniLM-L6-v2 computed
    once by transformers.BertModel (tests/fixtures/make_encoder_reference.py regenerates them).
    Measured: token states within 2.0e-6 (values up to 6.1), pooled embeddings within 1.3e-7."""
    from pathlib import Path

    ref = np.load(Path(__file__).parent / "fixtures" / "encoder_reference.npz")
    encoder, tok = load_minilm()
    sentences = [str(s) for s in ref["sentences"]]
    ids, mask = encode_batch(tok, sentences)
    assert np.array_equal(ids.numpy(), ref["input_ids"])  # same tokenizer, padded to the longest
    assert np.array_equal(mask.numpy(), ref["attention_mask"])
    with torch.no_grad():
        states = encoder(ids, mask).numpy()
    real = ref["attention_mask"]
    assert np.abs(states[real] - ref["states"][real]).max() < 1e-5
    assert np.abs(embed(encoder, tok, sentences).numpy() - ref["pooled"]).max() < 1e-6


# ============================================================================ the real encoder
@pytest.mark.exercise("7.1")  # embed reads lesson 07's mean_pool_torch
@pytest.mark.realdata
@pytest.mark.skipif(not data.available("minilm"), reason="python data_scripts/minilm.py")
def test_related_sentences_are_closer():
    encoder, tok = load_minilm()
    e = embed(encoder, tok, ["A man is playing a guitar.", "Someone plays a musical instrument.",
                             "The stock market fell sharply today.", "Share prices dropped a lot.",
                             "The cat sleeps on the sofa."])
    sim = e @ e.T
    assert torch.allclose(e.norm(dim=1), torch.ones(5), atol=1e-5)
    assert sim[0, 1] > 0.4 and sim[2, 3] > 0.4
    for a, b in ((0, 1), (2, 3)):
        others = [c for c in range(5) if c not in (a, b)]
        assert sim[a, b] > sim[a, others].max() + 0.2 and sim[a, b] > sim[b, others].max() + 0.2


@pytest.mark.exercise("7.1")  # embed reads lesson 07's mean_pool_torch
@pytest.mark.cuda
def test_runs_on_the_device_of_its_inputs(tiny_dir):
    cpu_encoder, tok = load_minilm(data_dir=tiny_dir)
    gpu_encoder, _ = load_minilm(device="cuda", data_dir=tiny_dir)
    texts = ["the cat sat on the mat .", "a dog"]
    on_gpu = embed(gpu_encoder, tok, texts)
    assert on_gpu.device.type == "cuda"
    assert torch.allclose(on_gpu.cpu(), embed(cpu_encoder, tok, texts), atol=1e-4)


@pytest.mark.exercise("7.1")  # embed reads lesson 07's mean_pool_torch
def test_embed_batches_by_length_but_keeps_input_order(tiny):
    encoder, tok = tiny
    texts = ["a big red dog ran far away on the log .", "the cat", "the dog sat on the mat"]
    together = embed(encoder, tok, texts, batch_size=2)  # batches: (1, 2), (0,)
    one_by_one = torch.cat([embed(encoder, tok, [t]) for t in texts])
    assert torch.allclose(together, one_by_one, atol=1e-6)


def test_a_damaged_token_state_cache_is_recomputed(tiny, tmp_path, capsys):
    encoder, tok = tiny
    texts = ["the cat sat", "a dog ran far away"]
    first = token_states(encoder, tok, texts, "toy", data_dir=tmp_path)
    (path,) = (tmp_path / "cache").glob("toy-*.npz")
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped byte inside the stored states: the zip CRC fails
    path.write_bytes(bytes(data))
    again = token_states(encoder, tok, texts, "toy", data_dir=tmp_path)
    assert "damaged" in capsys.readouterr().out
    assert np.array_equal(again.states, first.states)
    assert np.array_equal(again.offsets, first.offsets)
    path.write_bytes(b"PK\x03\x04 truncated")  # not a zip at all
    again = token_states(encoder, tok, texts, "toy", data_dir=tmp_path)
    assert np.array_equal(again.ids, first.ids)
