"""IBM Model 1 (Brown et al. 1993) and its bag-of-words proxy (Snell et al. 2021), lesson 06 —
read top down:

    reference   count tables, the EM as a loop over sentence pairs (NumPy), its batched torch twin
    proxy       the bag-of-words proxy and its predicted logit velocity at initialisation
    index       a corpus as flat arrays for the fast path (plumbing, written for speed)
    fast        the same EM as bincounts on a sparse table: `em_fast_np`, `e_step_fast_torch`, ...

The corpora lesson 06 reads (permutations, two word sets, a hidden dictionary) are lesson 05's:
`minattn.lstm_attention.data`.
"""

from .fast import (
    alignment_matrix_fast_np,
    check_sparse_table,
    count_table_fast_np,
    e_step_fast_np,
    e_step_fast_torch,
    em_fast_np,
    em_fast_torch,
    entry_index,
    m_step_fast_np,
    m_step_fast_torch,
    nltk_table_fast_np,
    position_entries_np,
    rows_np,
    split_pairs_np,
    target_weights_np,
    tensors_torch,
    to_dense_np,
    top_translations_fast_np,
    uniform_table_fast_np,
    viterbi_fast_np,
)
from .index import PACK_BITS, IndexedBitext, index_bitext
from .proxy import (
    BagOfWordsProxy,
    bag_matrices_np,
    proxy_agreement_torch,
    proxy_logit_velocity_torch,
    proxy_loss_torch,
    proxy_prediction_np,
)
from .reference import (
    MIN_PROB,
    MODES,
    NULL,
    Bitext,
    alignment_matrix_np,
    check_bitext,
    check_corpus,
    check_counts,
    check_covered,
    check_mode,
    check_nonnegative,
    check_pair_index,
    check_sentences,
    check_table,
    count_table_np,
    e_step_np,
    e_step_torch,
    em_np,
    em_torch,
    m_step_np,
    m_step_torch,
    make_bitext,
    nltk_bitext,
    nltk_table_np,
    padded_torch,
    token_weights_np,
    token_weights_torch,
    top_translations_np,
    uniform_table_np,
    viterbi_np,
)

__all__ = [
    "NULL", "MODES", "MIN_PROB", "Bitext", "check_corpus", "check_sentences", "make_bitext",
    "check_table", "check_nonnegative", "check_bitext", "check_covered", "check_mode",
    "uniform_table_np", "count_table_np", "token_weights_np", "e_step_np", "m_step_np",
    "check_counts", "em_np", "alignment_matrix_np", "check_pair_index", "viterbi_np",
    "top_translations_np", "nltk_bitext", "nltk_table_np", "padded_torch", "token_weights_torch",
    "e_step_torch", "m_step_torch", "em_torch", "bag_matrices_np", "BagOfWordsProxy",
    "proxy_loss_torch", "proxy_logit_velocity_torch", "proxy_prediction_np",
    "proxy_agreement_torch", "PACK_BITS", "IndexedBitext", "index_bitext", "check_sparse_table",
    "target_weights_np", "uniform_table_fast_np", "count_table_fast_np", "e_step_fast_np",
    "m_step_fast_np", "em_fast_np", "viterbi_fast_np", "split_pairs_np", "position_entries_np",
    "alignment_matrix_fast_np", "to_dense_np", "rows_np", "entry_index", "top_translations_fast_np",
    "nltk_table_fast_np", "tensors_torch", "e_step_fast_torch", "m_step_fast_torch",
    "em_fast_torch",
]
