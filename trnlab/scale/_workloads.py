"""Transformer workloads: shapes, parameter counts and FLOPs per token.

A :class:`ModelSpec` is a frozen record of a decoder-only transformer (dense or
mixture-of-experts). Parameter counts are computed from the shapes and checked in tests
against the totals the model authors publish; FLOPs per token follow PaLM's accounting
(Chowdhery et al. 2022, Appendix B): 6N + 12·L·H·Q·T for training.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, replace

from trnlab._checks import flag
from trnlab._errors import TrnlabError

__all__ = ["PRESETS", "ModelSpec", "model", "models"]


class WorkloadError(TrnlabError):
    """An impossible or inconsistent workload; the message says what to change."""


#: How a tensor-parallel group holds KV heads it cannot split (:meth:`ModelSpec.kv_heads_on`).
KV_SHARDINGS = ("replicate_to_tp", "convert_to_mha")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer.

    Attributes
    ----------
    name : str
    layers, hidden, heads, kv_heads, ffn, vocab : int
        Shapes: layers L, model width h, attention heads, key/value heads (grouped-query
        attention when fewer than ``heads``), FFN inner width, vocabulary size.
    seq_len : int
        Training sequence length (tokens).
    experts, top_k : int
        Mixture-of-experts: experts per layer and experts each token uses (1, 1 for dense).
    gated_ffn : bool
        SwiGLU-style FFN with three matrices (Llama, Mixtral); False for GELU with two (GPT-3).
    tied_embeddings : bool
        Input embedding reused as the output projection (GPT-3).
    learned_positions : bool
        A learned position table of ``seq_len x hidden`` (GPT-3); False for rotary embeddings.
    source : str
        Where the shapes come from.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    experts: int = 1
    top_k: int = 1
    gated_ffn: bool = True
    tied_embeddings: bool = False
    learned_positions: bool = False
    biases: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        for field in (
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "ffn",
            "vocab",
            "seq_len",
            "experts",
            "top_k",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WorkloadError(
                    f"{self.name}: {field} must be a whole number >= 1, not {value!r}"
                )
        if self.hidden % self.heads:
            raise WorkloadError(
                f"{self.name}: hidden size {self.hidden} is not divisible by {self.heads} heads; "
                f"choose heads dividing {self.hidden}"
            )
        if self.heads % self.kv_heads:
            raise WorkloadError(
                f"{self.name}: {self.heads} query heads cannot share {self.kv_heads} key/value heads "
                f"evenly; kv_heads must divide heads"
            )
        if self.top_k > self.experts:
            raise WorkloadError(f"{self.name}: top_k={self.top_k} exceeds experts={self.experts}")
        for field in ("gated_ffn", "tied_embeddings", "learned_positions", "biases"):
            flag(getattr(self, field), f"{self.name}: {field}", WorkloadError)

    # Shapes -----------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    def with_(self, **changes) -> ModelSpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # Parameters -------------------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """Per layer: Q and O are h x h; K and V are h x (kv_heads x head_dim)."""
        kv = self.kv_heads * self.head_dim
        bias = (2 * self.hidden + 2 * kv) if self.biases else 0
        return 2 * self.hidden * self.hidden + 2 * self.hidden * kv + bias

    def kv_heads_on(self, ranks: int, sharding: str = "replicate_to_tp") -> int:
        """K/V heads a tensor-parallel group of ``ranks`` holds, copies and padding included.

        Ranks that divide the KV heads split them. Otherwise a head cannot be split and is
        copied: ``"replicate_to_tp"`` copies each until every rank has one when the ranks are a
        multiple of the KV heads (NxD Inference's default ``REPLICATE_TO_TP_DEGREE``,
        ndoc-nxdi-gqa; NxD Training's ``kv_size_multiplier``, ndoc-nxd-gqa-training), and
        otherwise, like ``"convert_to_mha"``, gives every padded query head its own copy (NxD
        Inference's ``CONVERT_TO_MHA``; Transformers NeuronX up to SDK 2.18 whenever the ranks
        do not divide the KV heads, tnx-gqa-2024)."""
        if sharding not in KV_SHARDINGS:
            raise WorkloadError(
                f"kv_sharding = {sharding!r} is not a way to shard the KV heads; choose "
                f"{' or '.join(repr(k) for k in KV_SHARDINGS)}"
            )
        if self.kv_heads % ranks == 0:
            return self.kv_heads
        if sharding == "replicate_to_tp" and ranks % self.kv_heads == 0:
            return ranks
        return self.q_heads_on(ranks)

    def q_heads_on(self, ranks: int) -> int:
        """Query heads a tensor-parallel group of ``ranks`` computes, padding included: the
        frameworks pad the heads to a multiple of the ranks (Transformers NeuronX pads them to
        the TP degree; NxD Inference pads them interleaved with their KV heads, ndoc-nxdi-gqa):
        ``ranks x ceil(heads / ranks)``."""
        return ranks * math.ceil(self.heads / ranks)

    def tp_extra_params(self, ranks: int, sharding: str = "replicate_to_tp") -> int:
        """Per layer: the attention weights a group of ``ranks`` holds beyond the model's own:
        the K and V projections of the heads :meth:`kv_heads_on` copies, and the Q and O
        projections of the query heads :meth:`q_heads_on` pads (0 when the ranks divide both)."""
        copies = self.kv_heads_on(ranks, sharding) - self.kv_heads
        padding = self.q_heads_on(ranks) - self.heads
        return 2 * self.hidden * self.head_dim * (copies + padding)

    def tp_extra_forward_flops(
        self, ranks: int, context: int, sharding: str = "replicate_to_tp"
    ) -> tuple[float, float]:
        """Forward FLOPs per token beyond the model's own on ``ranks`` tensor-parallel ranks, as
        (projections, attention): the :meth:`tp_extra_params` weights' matmuls, and the padded
        query heads' attention over ``context`` keys."""
        linear = 2 * self.tp_extra_params(ranks, sharding) * self.layers
        attn = self._attention_flops(context) * (self.q_heads_on(ranks) - self.heads) / self.heads
        return linear, attn

    @property
    def expert_params(self) -> int:
        """One FFN (one expert): 3 matrices h x ffn when gated (SwiGLU), else 2."""
        mats = 3 if self.gated_ffn else 2
        bias = (self.ffn + self.hidden) if self.biases else 0
        return mats * self.hidden * self.ffn + bias

    @property
    def layer_params(self) -> int:
        norms = 2 * self.hidden * (2 if self.biases else 1)  # two norms (LayerNorm has a bias)
        router = self.hidden * self.experts if self.is_moe else 0
        return self.attention_params + self.experts * self.expert_params + router + norms

    @property
    def embedding_params(self) -> int:
        table = self.vocab * self.hidden
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        head = 0 if self.tied_embeddings else table
        return table + positions + head + self.hidden  # + final norm

    @property
    def params(self) -> int:
        """Total parameters N (all experts)."""
        return self.layers * self.layer_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters a token uses: all but the experts it is not routed to."""
        unused = (self.experts - self.top_k) * self.expert_params
        return self.params - self.layers * unused

    @property
    def matmul_params(self) -> int:
        """Active parameters a token multiplies: all but the embedding lookup table (unless
        tied to the output head, which multiplies it), learned positions and norms."""
        table = 0 if self.tied_embeddings else self.vocab * self.hidden
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        norms = (2 * self.layers + 1) * self.hidden * (2 if self.biases else 1)
        return self.active_params - table - positions - norms

    # FLOPs per token ---------------------------------------------------------------------------
    def _attention_flops(self, context: int) -> int:
        # QK^T and AV: 2 matmuls x 2 FLOP x heads x head_dim x context, per layer, forward
        # (PaLM, Chowdhery et al. 2022, App. B; no causal discount, as PaLM counts it).
        return 4 * self.layers * self.heads * self.head_dim * context

    def training_flops_per_token(self, recompute=False, seq_len: int | None = None) -> float:
        """Training FLOPs per token: 6N + 12·L·H·Q·T (forward 1/3, backward 2/3).

        N counts the active parameters a token multiplies (:attr:`matmul_params`: embedding
        lookups are not matmuls). Recomputation adds what it reruns: ``"selective"`` the
        attention core's forward (4·L·H·Q·T), ``"full"`` (or True) the whole forward
        (8N + 16·L·H·Q·T in all). These are hardware FLOPs; MFU counts ``recompute="none"``.
        """
        from ._memory import recompute_mode

        t = seq_len or self.seq_len
        forward = 2 * self.matmul_params + self._attention_flops(t)
        extra = {"none": 0, "selective": self._attention_flops(t), "full": forward}
        return 3 * forward + extra[recompute_mode(recompute)]

    def model_flops_per_token(self, seq_len: int | None = None) -> float:
        """The MFU convention: 6N + 12·L·H·Q·T, no recomputation (PaLM, App. B)."""
        return self.training_flops_per_token("none", seq_len)

    def prefill_flops_per_token(self, prompt: int) -> float:
        """Inference prefill: one forward pass, 2N + 4·L·H·Q·T per prompt token."""
        return 2 * self.matmul_params + self._attention_flops(prompt)

    def decode_flops_per_token(self, context: int) -> float:
        """Inference decode: 2N + 4·L·H·Q·c for a token generated at context length c."""
        return 2 * self.matmul_params + self._attention_flops(context)

    def training_flops(self, tokens: float, recompute=False) -> float:
        """Total training FLOPs for ``tokens`` tokens (about 6·N·D)."""
        if isinstance(tokens, bool) or not (
            isinstance(tokens, int | float) and tokens > 0 and tokens < float("inf")
        ):
            raise WorkloadError(f"a token budget must be positive and finite, not {tokens!r}")
        return tokens * self.training_flops_per_token(recompute=recompute)

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """KV cache per token of context: K and V, per layer, kv_heads x head_dim values."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


_LLAMA3 = "Llama Team, 'The Llama 3 Herd of Models', 2024, Table 3"
_LLAMA2 = (
    "Touvron et al., 'Llama 2: Open Foundation and Fine-Tuned Chat Models', 2023 (model cards)"
)
PRESETS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, source=_LLAMA3),
        ModelSpec("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, source=_LLAMA3),
        ModelSpec("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, source=_LLAMA3),
        ModelSpec(
            "gpt3-175b",
            96,
            12288,
            96,
            96,
            4 * 12288,
            50257,
            2048,
            gated_ffn=False,
            tied_embeddings=True,
            learned_positions=True,
            biases=True,
            source="Brown et al., 'Language Models are Few-Shot Learners', 2020, Table 2.1",
        ),
        ModelSpec(
            "mixtral-8x7b",
            32,
            4096,
            32,
            8,
            14336,
            32000,
            32768,
            experts=8,
            top_k=2,
            source="Jiang et al., 'Mixtral of Experts', 2024",
        ),
        ModelSpec(
            "olmoe-1b-7b",
            16,
            2048,
            16,
            16,
            1024,
            50304,
            4096,
            experts=64,
            top_k=8,
            source="Muennighoff et al., 'OLMoE: Open Mixture-of-Experts Language Models', 2024, "
            "Table 1: a fine-grained MoE, 64 small experts per layer, 8 active",
        ),
        ModelSpec("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, source=_LLAMA2),
        ModelSpec("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, source=_LLAMA2),
        ModelSpec("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, source=_LLAMA2),
        ModelSpec(
            "mistral-7b",
            32,
            4096,
            32,
            8,
            14336,
            32000,
            32768,
            source="Jiang et al., 'Mistral 7B', 2023, Table 1",
        ),
        ModelSpec(
            "mixtral-8x22b",
            56,
            6144,
            48,
            8,
            16384,
            32768,
            65536,
            experts=8,
            top_k=2,
            source="Mistral AI, Mixtral-8x22B model card, 2024",
        ),
    )
}


def models() -> list[str]:
    """Names of the preset models."""
    return list(PRESETS)


def model(name: str | ModelSpec) -> ModelSpec:
    """A preset model by name (``"llama3-70b"``), or a :class:`ModelSpec` passed through."""
    if isinstance(name, ModelSpec):
        return name
    key = str(name).strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    near = difflib.get_close_matches(key, list(PRESETS), n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    raise WorkloadError(
        f"unknown model {name!r}.{hint} Presets: {', '.join(PRESETS)}; or build a ModelSpec."
    )
