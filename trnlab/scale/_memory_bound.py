"""The memory-bound work of a training step: the kernels that stream tensors through HBM.

A transformer layer's matmuls run at the chip's matmul rate (:func:`achieved_flops_per_chip`).
Everything else in the layer (the norms, the activation function, dropout, residual adds,
rotary embeddings, the softmax over materialised attention scores) and the optimizer step do
a few operations per value they touch, so they run at the memory bandwidth, not the matmul
rate. Ivanov et al. ("Data Movement Is All You Need", MLSys 2021) measured these kernels at
0.2% of BERT-large's FLOPs and about 40% of its training time; their share falls as the
hidden size grows (they scale with h, the matmuls with h^2).

The model here counts, for each such kernel, the tensors it reads and writes once each (the
roofline of a kernel that streams its operands: no kernel moves less). The tensors are those
of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
section 4.1), per token of one micro-batch on one chip:

- outside the tensor-parallel region, h-wide tensors: the two norms, the two residual adds
  (with dropout before each, Megatron's fused bias-dropout-add); sequence parallelism splits
  these over tp, plain tensor parallelism repeats them on every chip of the group;
- inside it, split over tp: the MLP activation (GELU on 4h, or SwiGLU's gate and product on
  two ffn-wide tensors), rotary embeddings on Q and K;
- the attention scores, a/tp heads x s keys per token, only where they are materialised
  (no FlashAttention): the fused scale-mask-softmax and, with dropout, the dropout on the
  probabilities;
- the loss on the last stage: the vocabulary-parallel softmax cross-entropy over V/tp logits,
  fused (its roofline) or as Megatron-LM's eager PyTorch code runs it, kernel by kernel.

Values are 2 bytes (BF16/FP16), dropout masks 1 byte, the loss's softmax 4 (FP32). A
backward kernel reads the output gradient and what the forward saved, and writes the input
gradient(s). Full recomputation reruns the forward kernels in the backward; selective
recomputation reruns the attention-score kernels.

The optimizer step (mixed-precision Adam) touches every parameter the chip updates: it reads
the gradient, the FP32 master weight, momentum and variance, and writes the three FP32
tensors and the BF16 weight; gradient clipping reads the gradients once more (Megatron-LM's
``clip_grad_norm``). Bytes per parameter: 2 g + 12 + 12 + 2 for g-byte gradients.

The bytes run at :func:`stream_bandwidth`: what a streaming elementwise kernel measured on the
chip where the catalogue has it (A100: 1,616 of 2,039 GB/s; H100: PyTorch's layer norm at
1,643 of 3,350 GB/s); on Trainium at most what the cores' DMA engines move; else the HBM
bandwidth (the roofline, an upper bound on speed).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._workloads import ModelSpec

__all__ = [
    "LayerTraffic",
    "layer_traffic",
    "loss_bytes_per_token",
    "memory_ceiling",
    "optimizer_bytes_per_param",
    "stream_bandwidth",
]

_VALUE = 2.0  # bytes of a BF16/FP16 activation
_MASK = 1.0  # bytes of a dropout mask value
_FP32 = 4.0


@dataclass(frozen=True)
class LayerTraffic:
    """HBM bytes per token of one layer's memory-bound kernels, on one chip.

    Attributes
    ----------
    forward, backward : float
        Bytes of the forward kernels and of their backward kernels.
    recompute : float
        Bytes the recomputation reruns in the backward pass (0 without recomputation).
    """

    forward: float
    backward: float
    recompute: float

    @property
    def total(self) -> float:
        """Bytes per token per layer over forward, backward and recomputation."""
        return self.forward + self.backward + self.recompute


def _kernels(m: ModelSpec, *, tp: int, seq_len: int, sequence_parallel: bool,
             flash_attention: bool, dropout: bool):  # fmt: skip
    """(forward bytes, backward bytes, score-kernel forward bytes) per token per layer."""
    h, f = m.hidden, m.ffn
    outside = 1.0 / tp if sequence_parallel else 1.0  # norms and residuals: split or repeated
    drop = _MASK if dropout else 0.0
    # Norm (LayerNorm or RMSNorm), twice: forward reads x, writes y; backward reads dy and x,
    # writes dx.
    fwd = 2 * 2 * h * _VALUE * outside
    bwd = 2 * 3 * h * _VALUE * outside
    # Residual add, twice, with dropout on the branch (Megatron's fused bias-dropout-add):
    # forward reads branch and residual, writes the sum (and the mask); backward adds the
    # two gradients that meet at the residual stream and, with dropout, masks the branch's.
    fwd += 2 * (3 * h * _VALUE + h * drop) * outside
    bwd += 2 * (3 * h * _VALUE + ((2 * h * _VALUE + h * drop) if dropout else 0.0)) * outside
    # MLP activation on the tensor-parallel slice: GELU reads and writes ffn/tp values
    # (backward reads dy and x, writes dx); SwiGLU reads gate and up, writes their product
    # (backward reads dy, gate, up; writes d gate, d up).
    ff = f * m.top_k / tp  # the top_k experts a token visits (one FFN when dense)
    if m.gated_ffn:
        fwd += 3 * ff * _VALUE
        bwd += 5 * ff * _VALUE
    else:
        fwd += 2 * ff * _VALUE
        bwd += 3 * ff * _VALUE
    # Rotary embeddings on the tensor-parallel slice of Q and K (models without learned
    # positions): read and write each, forward and backward.
    if not m.learned_positions:
        k_heads = m.kv_heads / tp if tp <= m.kv_heads else 1  # a KV head is not split
        qk = h / tp + k_heads * m.head_dim
        fwd += 2 * qk * _VALUE
        bwd += 2 * qk * _VALUE
    # Attention scores, materialised without FlashAttention: a/tp heads x s keys per query.
    scores = 0.0
    if not flash_attention:
        per_token = m.heads / tp * seq_len  # each query scores all s keys (also under cp)
        # scale-mask-softmax: forward reads the scores, writes the probabilities; backward
        # reads dy and y, writes dx. Dropout on the probabilities: forward reads, writes the
        # output and the mask; backward reads dy and the mask, writes dx.
        scores = 2 * per_token * _VALUE + (2 * per_token * _VALUE + per_token * drop) * dropout
        fwd += scores
        bwd += 3 * per_token * _VALUE + (2 * per_token * _VALUE + per_token * drop) * dropout
    return fwd, bwd, scores


def layer_traffic(
    m: ModelSpec,
    *,
    tp: int = 1,
    seq_len: int,
    recompute: str = "none",
    flash_attention: bool = True,
    sequence_parallel: bool = True,
    dropout: bool = False,
) -> LayerTraffic:
    """HBM bytes per token of one layer's memory-bound kernels on one chip.

    Parameters
    ----------
    m : ModelSpec
        The model (its widths, FFN kind and position encoding).
    tp : int
        Tensor-parallel degree (context parallelism changes the tokens a chip holds, not
        the bytes per token).
    seq_len : int
        Tokens per sequence (the keys each query scores).
    recompute : {"none", "selective", "full"}
        What the backward pass reruns.
    flash_attention : bool
        True: the attention scores never reach HBM (FlashAttention); False: the softmax (and
        dropout) read and write them.
    sequence_parallel : bool
        Norms, dropout and residual adds split over tp (True) or repeated on every chip of
        the tensor-parallel group (False, and always when tp = 1 it makes no difference).
    dropout : bool
        Dropout on the attention and MLP outputs (and on the attention probabilities when
        they are materialised), as Megatron-LM's GPT runs train; Llama-style runs use none.

    Returns
    -------
    LayerTraffic
    """
    sp = sequence_parallel and tp > 1
    fwd, bwd, scores = _kernels(m, tp=tp, seq_len=seq_len, sequence_parallel=sp,
                                flash_attention=flash_attention, dropout=dropout)  # fmt: skip
    rerun = {"none": 0.0, "selective": scores, "full": fwd}[recompute]
    return LayerTraffic(fwd, bwd, rerun)


#: Bytes per logit of Megatron-LM's eager vocabulary-parallel cross-entropy, one PyTorch kernel
#: per operation (megatron-cross-entropy): forward, cast the BF16/FP16 logits to FP32 (read 2,
#: write 4; in gpt_model.py before the 2024 code, inside the loss after), their maximum (read
#: 4), subtract it (read 4, write 4), exp (read 4, write 4), the sum (read 4), divide into the
#: softmax, kept for the backward (read 4, write 4); backward, scale the softmax by the loss's
#: gradient (read 4, write 4), and autograd's cast of that gradient back to the logits' 16-bit
#: type for the output layer's backward (read 4, write 2).
_EAGER_LOSS = (_VALUE + _FP32) + _FP32 + 2 * _FP32 + 2 * _FP32 + _FP32 + 2 * _FP32
_EAGER_LOSS += 2 * _FP32 + (_FP32 + _VALUE)


def loss_bytes_per_token(m: ModelSpec, tp: int = 1, *, fused: bool = True) -> float:
    """The vocabulary-parallel cross-entropy on the last stage, per token, forward and
    backward, over the V/tp logits one chip holds.

    ``fused`` (a fused kernel, or a compiler that fuses the graph, the roofline): read the
    logits and write their FP32 softmax; read it back and write the logits' gradient, 12
    bytes per logit. ``fused=False``: Megatron-LM's eager loss, each step its own kernel
    (:data:`_EAGER_LOSS`, 52 bytes per logit), as Megatron-LM runs without
    ``--cross-entropy-loss-fusion`` (off by default)."""
    v = m.vocab / tp
    if not fused:
        return v * _EAGER_LOSS
    return v * (_VALUE + _FP32) + v * (_FP32 + _VALUE)


def optimizer_bytes_per_param(grad_bytes: float = 2.0) -> float:
    """HBM bytes per parameter of one mixed-precision Adam step with gradient clipping:
    read the gradient twice (norm, update), read and write FP32 master, momentum and
    variance, write the BF16 weight."""
    return 2 * grad_bytes + 3 * _FP32 * 2 + _VALUE


def memory_ceiling(chip) -> float:
    """The most bytes per second the chip's compute can draw from HBM: on Trainium what the
    NeuronCores' DMA engines can move when that is below the HBM bandwidth (every byte between
    HBM and a core goes through them: 2 cores x 272 GB/s = 544 GB/s on a Trainium chip with
    820 GB/s of HBM); on other chips the HBM bandwidth."""
    if chip.core is not None and chip.cores:
        return min(float(chip.hbm_bandwidth), chip.cores * chip.core.dma_bandwidth)
    return float(chip.hbm_bandwidth)


def stream_bandwidth(chip) -> float:
    """Bytes per second a streaming kernel moves on ``chip``: its measured
    ``stream_bandwidth`` where the catalogue has one, else :func:`memory_ceiling`."""
    fig = chip.figures.get("stream_bandwidth")
    return float(fig.value) if fig is not None else memory_ceiling(chip)
