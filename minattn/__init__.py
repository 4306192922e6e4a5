"""minattn — attention mechanisms from scratch, twice: NumPy (the math) and PyTorch (the speed).

Naming convention, used in every file of the library:
    foo_np(...)     the NumPy reference: states the math, float64, no autograd.
    foo_torch(...)  the PyTorch version of the same function, line for line where possible;
                    takes its device and dtype from its inputs.
    Foo(nn.Module)  a trainable PyTorch module built on the *_torch functions.

Conventions (stated once, used everywhere):
    * Boolean masks: True = "may attend" (PyTorch SDPA convention).
    * A query row whose mask is all False gets zero weights and a zero output, never NaN.
    * Sliding windows use the one-sided half-width w: token i may see j iff |i - j| <= w.
    * Shapes are written (B, H, N, d): batch, heads, sequence length, feature size.
    * Anything random takes a seed or a generator.
"""

__version__ = "0.1.0"
