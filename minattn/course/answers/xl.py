"""Answers to lesson 04's predict-then-check and experiment exercises (Transformer-XL)."""


def farthest_token_back() -> int:
    """A Transformer-XL with 2 layers, segments of 16 tokens and a memory of 16 reads a long
    text segment after segment. The LAST token of a segment: what is the largest d such that
    changing the token d positions before it can change its prediction?"""
    # BEGIN EXERCISE 4.3 predict: how far back the last token sees (2 layers, S = M = 16) (~10 min)
    n_layers, seg_len, mem_len = 2, 16, 16
    # the token itself sits at index S − 1 of its segment and sees S − 1 earlier tokens of it;
    # each layer reaches M further back, through the memory of the layer below
    return (seg_len - 1) + n_layers * mem_len  # 47
    # END EXERCISE


def experiment_memory_zero_gap() -> float:
    """Lesson 04, section 5: the trained XL evaluated with memory 0 (each segment read on its
    own, like the vanilla model). Report XL's validation bpc at memory 0 minus the vanilla
    model's (each segment alone), means over the seeds (negative: XL is better even without
    its memory)."""
    # BEGIN EXERCISE 4.4 experiment: validation bpc, XL at memory 0 minus vanilla (~5 min)
    # the "mean ± SE" column of section 5's table, full mode on a CPU (PTB characters):
    # "XL, memory 0" and "vanilla, each segment alone"
    xl_memory_zero, vanilla = 2.545, 2.656
    return xl_memory_zero - vanilla
    # END EXERCISE
