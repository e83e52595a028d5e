"""Published training and inference runs, with their inputs, for calibration and validation.

Each case records what its source printed (the measured figure and the configuration) and
trnlab's reading of it where the source leaves something out (``notes``). ``role`` is
``"calibration"`` for the one case per chip generation that fits ``decode_layer_overhead``;
every other case is a validation case the model was not fitted to. The runner is
``benchmarks/bench_validation.py``, which writes ``docs/validation.md``.

Sources (keys of the catalogue's sources.toml):

- ``korthikanti-2022``: Korthikanti et al., "Reducing Activation Recomputation in Large
  Transformer Models", Table 5 (iteration times on DGX A100 80 GB, as Calculon's validation
  lists them; configurations from Calculon's validation files).
- ``llama3-2024``: Llama Team, "The Llama 3 Herd of Models", Table 4 (405B on H100).
- ``ndoc-trn1-training-perf``: Neuron docs, Trn1/Trn1n training performance tables.
- ``ndoc-trn1-inference-perf``: Neuron docs, Trn1 inference performance (decoder latency).
- ``ndoc-trn2-llama-tutorials``: Neuron docs, Llama 3.3 70B and Llama 3.1 405B on Trn2
  tutorials (baseline rows of their performance comparison tables).
- ``megatron-core-scaling-2024``: the Megatron-LM README's weak-scaling table of GPT models
  on H100 (Megatron-Core r0.8, 2024).

The configurations the Neuron table leaves out (recomputation, flash attention, dropout) come
from the example scripts each row links to (``nemo-neuron-scripts``, ``nxd-llama-tutorials``,
``nxd-llama2-7b-script``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from trnlab import catalog

from ._memory import RECOMPUTE
from ._plan import Parallelism
from ._workloads import ModelSpec

__all__ = ["DECODE_CASES", "TRAINING_CASES", "DecodeCase", "TrainingCase"]


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048):
    """A GPT-style model as Megatron-LM runs it: GELU MLP of 4h, biases, tied embeddings,
    learned positions, Megatron's padded vocabulary of 51,200."""
    return ModelSpec(
        name, layers, hidden, heads, heads, 4 * hidden, vocab, seq, gated_ffn=False,
        tied_embeddings=True, learned_positions=True, biases=True,
        source="Korthikanti et al. 2022 / Calculon model files",
    )  # fmt: skip


@dataclass(frozen=True)
class TrainingCase:
    """A published training run: its configuration and one measured figure."""

    key: str
    source: str
    system: str
    nodes: int
    model: ModelSpec | str
    parallel: Parallelism
    global_batch: int
    seq_len: int
    dtype: str
    measure: str  # "step_s", "seq_per_s" or "mfu"
    published: float
    notes: str = ""
    # Settings the source does not publish: the plan tries each combination and keeps the
    # fastest that fits, as a framework's tuning would (e.g. (("virtual_stages", (1, 2, 4)),)).
    unpublished: tuple[tuple[str, tuple], ...] = ()

    def system_obj(self):
        base = catalog.system(self.system)
        return base if self.nodes == 1 else catalog.cluster(base, self.nodes)


@dataclass(frozen=True)
class DecodeCase:
    """A published decode measurement (time per output token, P50)."""

    key: str
    source: str
    system: str
    model: str
    tp: int
    batch: int
    prompt: int
    output: int
    weight_format: str
    tpot_ms: float
    role: str = "validation"
    notes: str = ""
    extra: dict = field(default_factory=dict)
    compiled: int | None = None  # the decode graph's sequence length, when not prompt + output
    kv_sharding: str = "replicate_to_tp"  # how the framework held KV heads it could not split


_KORTHIKANTI = [
    # (model, tp, pp, batch, micro-batch, virtual stages, full s, seqsel s)
    (_gpt("megatron-22b", 48, 6144, 64), 8, 1, 4, 4, 1, 1.42, 1.10),
    (_gpt("gpt3-175b", 96, 12288, 96), 8, 8, 64, 1, 3, 18.13, 13.75),
    (_gpt("turing-530b", 105, 20480, 128), 8, 35, 280, 1, 3, 49.05, 37.83),
    (_gpt("megatron-1t", 128, 25600, 160), 8, 64, 512, 1, 1, 94.42, 71.49),
]


def _korthikanti_cases():
    out = []
    for m, tp, pp, batch, mb, v, full, seqsel in _KORTHIKANTI:
        common = dict(tp=tp, pp=pp, dp=1, zero=0, micro_batch=mb, virtual_stages=v,
                      flash_attention=False, megatron_state=True, dropout=True,
                      fused_loss=False)  # fmt: skip
        for mode, value, par in (
            ("full", full, Parallelism(recompute="full", sequence_parallel=False, **common)),
            ("seqsel", seqsel, Parallelism(recompute="selective", **common)),
        ):
            out.append(
                TrainingCase(
                    key=f"{m.name} {mode}",
                    source="korthikanti-2022",
                    system="dgx-a100",
                    nodes=tp * pp // 8,
                    model=m,
                    parallel=par,
                    global_batch=batch,
                    seq_len=2048,
                    dtype="fp16",
                    measure="step_s",
                    published=value,
                    notes="full: full recomputation, tensor parallelism by all-reduce; seqsel: "
                    "sequence parallelism + selective recomputation (Korthikanti et al. Table 5); the "
                    "loss as Megatron-LM's eager cross-entropy (megatron-cross-entropy)",
                )
            )
    return out


def _nemo(tp: int, pp: int, dp: int, recompute: str, dropout: bool = True) -> Parallelism:
    """How NeMo Megatron ran on trn1 in 2023 (its example scripts): sequence parallelism,
    ZeRO-1, the attention core unfused (no flash attention), GPT's dropout of 0.1."""
    return Parallelism(tp=tp, pp=pp, dp=dp, zero=1, recompute=recompute,
                       flash_attention=False, dropout=dropout)  # fmt: skip


_TRN1 = "ndoc-trn1-training-perf"
TRAINING_CASES: tuple[TrainingCase, ...] = (
    *_korthikanti_cases(),
    *(
        TrainingCase(
            key=f"llama3-405b {gpus} H100 {label}",
            source="llama3-2024",
            system="p5.48xlarge",
            nodes=gpus // 8,
            model="llama3-405b",
            parallel=Parallelism(tp=8, cp=cp, pp=16, dp=gpus // (8 * cp * 16), zero=1),
            global_batch=2048 if seq == 8192 else 128,
            seq_len=seq,
            dtype="bf16",
            measure="mfu",
            published=mfu,
            notes="Meta's H100 cluster (8 GPUs per server, 400 Gb/s per GPU over RoCE) is read "
            "as p5.48xlarge, the same GPUs and per-GPU network; the virtual stages and the "
            "recomputation are not published: the plan tries 1, 2, 4 and none, selective, "
            "full, and keeps the fastest that fits",
            unpublished=(("virtual_stages", (1, 2, 4)), ("recompute", RECOMPUTE)),
        )
        for gpus, cp, seq, mfu, label in (
            (8192, 1, 8192, 0.43, "8k context"),
            (16384, 1, 8192, 0.41, "8k context"),
            (16384, 16, 131072, 0.38, "128k context"),
        )
    ),
    TrainingCase(
        key="llama3.1-8b trn1 32 nodes",
        source=_TRN1,
        system="trn1.32xlarge",
        nodes=32,
        model="llama3-8b",
        parallel=Parallelism(tp=16, dp=32, zero=1, recompute="selective"),
        global_batch=1024,
        seq_len=8192,
        dtype="bf16",
        measure="seq_per_s",
        published=47.95,
        notes="NeuronX Distributed; TP=32 NeuronCores = 16 chips; DP=32; sequence parallelism, "
        "selective recomputation and flash attention as its tutorial runs them "
        "(nxd-llama-tutorials); SDK 2.24",
    ),
    TrainingCase(
        key="llama3.1-70b trn1 32 nodes",
        source=_TRN1,
        system="trn1.32xlarge",
        nodes=32,
        model="llama3-70b",
        parallel=Parallelism(tp=16, pp=8, dp=4, zero=1, recompute="selective"),
        global_batch=1024,
        seq_len=8192,
        dtype="bf16",
        measure="seq_per_s",
        published=7.94,
        notes="NeuronX Distributed; TP=32 cores = 16 chips, PP=8, DP=4; sequence parallelism, "
        "selective recomputation and flash attention (nxd-llama-tutorials); SDK 2.24",
    ),
    TrainingCase(
        key="gpt3-175b trn1 32 nodes",
        source=_TRN1,
        system="trn1.32xlarge",
        nodes=32,
        model="gpt3-175b",
        parallel=_nemo(16, 8, 4, "selective"),
        global_batch=1024,
        seq_len=2048,
        dtype="bf16",
        measure="seq_per_s",
        published=12.7,
        notes="NeMo Megatron; TP=32 cores = 16 chips, PP=8, DP=4; selective recomputation, "
        "sequence parallelism, dropout 0.1, no flash attention (nemo-neuron-scripts: "
        "gpt_175b.sh); SDK 2.13 (published MFU 33.1%)",
    ),
    TrainingCase(
        key="llama2-7b trn1 16 nodes",
        source=_TRN1,
        system="trn1.32xlarge",
        nodes=16,
        model="llama2-7b",
        parallel=Parallelism(tp=4, dp=64, zero=1, recompute="selective", flash_attention=False),
        global_batch=1024,
        seq_len=4096,
        dtype="bf16",
        measure="seq_per_s",
        published=81,
        notes="NeuronX Distributed; TP=8 cores = 4 chips, DP=64; the table gives no sequence "
        "length: its script runs 4,096 with sequence parallelism and selective recomputation, "
        "without flash attention in that release (nxd-llama2-7b-script); SDK 2.15",
    ),
    TrainingCase(
        key="llama2-13b trn1 32 nodes",
        source=_TRN1,
        system="trn1.32xlarge",
        nodes=32,
        model="llama2-13b",
        parallel=_nemo(4, 4, 32, "full", dropout=False),
        global_batch=1024,
        seq_len=4096,
        dtype="bf16",
        measure="seq_per_s",
        published=60,
        notes="NeMo Megatron; TP=8 cores = 4 chips, PP=4; the table's DP=4 contradicts its own "
        "note (DP = world / (TP x PP) = 32), trnlab uses 32; sequence 4,096, full "
        "recomputation, sequence parallelism, no dropout (nemo-neuron-scripts: llama_13b.sh); "
        "SDK 2.15",
    ),
    *(
        TrainingCase(
            key=f"gpt3-{name} trn1 32 nodes",
            source=_TRN1,
            system="trn1.32xlarge",
            nodes=32,
            model=_gpt(f"nemo-gpt3-{name}", layers, 8192, 64),
            parallel=_nemo(4, pp, 32 * 16 // (4 * pp), mode),
            global_batch=1024,
            seq_len=2048,
            dtype="bf16",
            measure="seq_per_s",
            published=published,
            notes=f"NeMo Megatron; {layers} layers of 8,192 with 64 heads (nemo-neuron-scripts: "
            f"gpt_{name}.sh); TP=8 cores = 4 chips, PP={pp}; {mode} recomputation, sequence "
            f"parallelism, dropout 0.1; SDK 2.15 (published MFU {mfu}%)",
        )
        for name, layers, pp, mode, published, mfu in (
            ("23b", 28, 4, "selective", 100.0, 29.65),
            ("46b", 56, 8, "full", 47.2, 27.7),
        )
    ),
)

#: Megatron-Core's H100 weak-scaling table: (size, heads, hidden, layers, tp, pp, dp, batch,
#: MFU). GPT layers with a 4h GELU MLP and untied embeddings (the parameter counts need
#: them: 1.7B = 24 x 12 x 2048^2 + 2 x 131,072 x 2048), Megatron-LM's defaults where the
#: README names no flag: learned absolute positions (which also round the 118.5B and 461.5B
#: models to the table's 119B and 462B), dropout 0.1 on the hidden states and attention,
#: the loss unfused (megatron-lm-arguments, megatron-cross-entropy).
_MCORE = (
    ("1.7b", 16, 2048, 24, 1, 1, 48, 192, 0.41),
    ("7.1b", 32, 4096, 30, 2, 1, 48, 192, 0.47),
    ("16b", 48, 6144, 32, 4, 1, 48, 192, 0.49),
    ("32b", 56, 7168, 48, 8, 1, 48, 192, 0.46),
    ("70b", 64, 8192, 84, 8, 2, 48, 384, 0.42),
    ("119b", 80, 10240, 92, 8, 4, 48, 768, 0.43),
    ("177b", 96, 12288, 96, 8, 6, 48, 1152, 0.44),
    ("314b", 128, 16384, 96, 8, 8, 48, 1536, 0.48),
    ("462b", 144, 18432, 112, 8, 16, 48, 3072, 0.47),
)
TRAINING_CASES = TRAINING_CASES + tuple(
    TrainingCase(
        key=f"megatron-core {name} H100",
        source="megatron-core-scaling-2024",
        system="p5.48xlarge",
        nodes=tp * pp * dp // 8,
        model=ModelSpec(
            f"mcore-gpt-{name}",
            layers,
            hidden,
            heads,
            heads,
            4 * hidden,
            131072,
            4096,
            gated_ffn=False,
            learned_positions=True,
            biases=True,
            source="Megatron-LM README weak-scaling table (2024)",
        ),
        parallel=Parallelism(
            tp=tp,
            pp=pp,
            dp=dp,
            zero=1,
            megatron_state=True,
            overlap_param_gather=True,
            dropout=True,
            fused_loss=False,
        ),
        global_batch=batch,
        seq_len=4096,
        dtype="bf16",
        measure="mfu",
        published=mfu,
        notes="NVIDIA's H100 cluster (8 GPUs per node, 400 Gb/s per GPU) read as p5.48xlarge; "
        "the distributed optimizer as ZeRO-1 with FP32 gradients (megatron-lm-arguments) and "
        "its weight gather under the next forward (--overlap-param-gather); Megatron-LM's "
        "defaults for what the README does not name (learned positions, dropout 0.1, the loss "
        "as the eager cross-entropy: --cross-entropy-loss-fusion is off by default and came a "
        "month before the figures, megatron-cross-entropy); micro-batch, virtual stages and "
        "recomputation are not published: the plan tries 1, 2, 4 / 1, 2, 4, 8 / none, selective, full and "
        "keeps the fastest that fits",
        unpublished=(
            ("micro_batch", (1, 2, 4)),
            ("virtual_stages", (1, 2, 4, 8) if pp > 1 else (1,)),
            ("recompute", RECOMPUTE),
        ),
    )
    for name, heads, hidden, layers, tp, pp, dp, batch, mfu in _MCORE
)

_TRN1_INF = "ndoc-trn1-inference-perf"
_TRN2_INF = "ndoc-trn2-llama-tutorials"
_NIM = "nvidia-nim-benchmarks"
_NIM_NOTE = "2 x H100 80G, TP2, FP8; NIM 1.8.0 (TensorRT-LLM); ITL at concurrency 1"
_B = "throughput-optimized table; "
_PAD = "40 heads on 32 NeuronCores, padded to 64; "
# The Trn1 table's throughput-optimized rows: the same models and lengths, batch 4 or 8. What a
# further sequence adds checks the batch rules (per-rank KV walks, overlapped walks).
# (key, model, batch, prompt, output, weight format, TPOT ms, SDK)
_TRN1_BATCHED = (
    ("llama3-8b trn1 int8 8k b8", "llama3-8b", 8, 128, 8064, "int8", 9.95, "SDK 2.18.1"),
    ("llama3-8b trn1 int8 8k long prompt b8", "llama3-8b", 8, 4096, 4096, "int8", 10.04, "SDK 2.18.1"),
    ("llama3-8b trn1 int8 4k b8", "llama3-8b", 8, 128, 3968, "int8", 7.65, "SDK 2.18.1"),
    ("llama3-70b trn1 4k b4", "llama3-70b", 4, 2048, 2048, "bf16", 32.33, "SDK 2.18.1"),
    ("llama3-70b trn1 1k b4", "llama3-70b", 4, 128, 1024, "bf16", 28.38, "SDK 2.18.1"),
    ("llama3-70b trn1 256 b4", "llama3-70b", 4, 128, 128, "bf16", 28.08, "SDK 2.18.1"),
    ("llama2-7b trn1 8k b8", "llama2-7b", 8, 128, 8064, "bf16", 10.10, "SDK 2.18"),
    ("llama2-13b trn1 8k b8", "llama2-13b", 8, 4096, 4096, "bf16", 19.86, "SDK 2.18"),
    ("llama2-13b trn1 16k b4", "llama2-13b", 4, 8192, 8192, "bf16", 21.09, "SDK 2.18"),
    ("llama2-70b trn1 256 b4", "llama2-70b", 4, 128, 128, "bf16", 26.72, "SDK 2.18"),
    ("llama2-70b trn1 512 b4", "llama2-70b", 4, 256, 256, "bf16", 26.91, "SDK 2.18"),
    ("llama2-70b trn1 1152 b4", "llama2-70b", 4, 128, 1024, "bf16", 27.21, "SDK 2.18"),
    ("llama2-70b trn1 2k b4", "llama2-70b", 4, 1024, 1024, "bf16", 28.55, "SDK 2.18"),
    ("llama2-70b trn1 3k b4", "llama2-70b", 4, 1024, 2048, "bf16", 31.67, "SDK 2.18"),
    ("llama2-70b trn1 4k b4", "llama2-70b", 4, 2048, 2048, "bf16", 31.79, "SDK 2.18"),
    ("mistral-7b trn1 16k b8", "mistral-7b", 8, 8192, 8192, "bf16", 15.44, "SDK 2.18"),
)  # fmt: skip
_INF2_INF = "ndoc-inf2-inference-perf"
# The Inf2 decoder tables (inf2.48xlarge, TP=24: 12 Inferentia2 chips x 2 NeuronCores, on a
# NeuronLink-v2 ring; Transformers NeuronX, SDK 2.18): (model, batch, prompt, output, TPOT ms).
# Nothing is fitted on them: Inferentia2's step cost is Trainium's (the same NeuronCore-v2).
_INF2 = (
    ("llama3-8b", 1, 128, 8064, 7.41), ("llama3-8b", 1, 4096, 4096, 7.47),
    ("llama3-8b", 1, 128, 3968, 6.42), ("llama3-8b", 1, 2048, 2048, 6.50),
    ("llama3-70b", 1, 2048, 2048, 34.67), ("llama3-70b", 1, 1024, 2048, 33.81),
    ("llama3-70b", 1, 1024, 1024, 33.14), ("llama3-70b", 1, 128, 1024, 32.47),
    ("llama3-70b", 1, 256, 256, 32.48), ("llama3-70b", 1, 128, 128, 32.20),
    ("llama2-7b", 1, 128, 3968, 6.47), ("llama2-7b", 1, 128, 8064, 7.34),
    ("llama2-13b", 1, 128, 3968, 9.17), ("llama2-13b", 1, 4096, 4096, 10.17),
    ("llama2-13b", 1, 8192, 8192, 13.50),
    ("llama2-70b", 1, 128, 128, 32.90), ("llama2-70b", 1, 256, 256, 33.13),
    ("llama2-70b", 1, 128, 1024, 33.15), ("llama2-70b", 1, 1024, 1024, 33.73),
    ("llama2-70b", 1, 1024, 2048, 34.82), ("llama2-70b", 1, 2048, 2048, 34.90),
    ("mistral-7b", 1, 128, 3968, 6.86), ("mistral-7b", 1, 4096, 4096, 7.87),
    ("mistral-7b", 1, 8192, 8192, 10.33),
    ("llama3-8b", 8, 128, 8064, 15.22), ("llama3-8b", 8, 4096, 4096, 15.31),
    ("llama3-8b", 8, 128, 3968, 10.45), ("llama3-8b", 8, 2048, 2048, 10.50),
    ("llama2-7b", 8, 128, 3968, 12.11), ("llama2-7b", 8, 128, 8064, 16.39),
    ("llama2-13b", 8, 128, 3968, 14.90), ("llama2-13b", 8, 4096, 4096, 20.99),
    ("llama2-13b", 4, 8192, 8192, 21.71),
    ("mistral-7b", 8, 128, 3968, 11.64), ("mistral-7b", 8, 4096, 4096, 16.55),
    ("mistral-7b", 8, 8192, 8192, 18.01),
)  # fmt: skip


def _inf2_key(model: str, batch: int, prompt: int, output: int) -> str:
    return f"{model} inf2 {prompt}+{output}" + (f" b{batch}" if batch > 1 else "")


DECODE_CASES: tuple[DecodeCase, ...] = (
    DecodeCase("llama2-7b trn1 8k", _TRN1_INF, "trn1.32xlarge", "llama2-7b", 16, 1, 128, 8064,
               "bf16", 6.70, "calibration", "TP=32 cores = 16 chips; SDK 2.18"),
    DecodeCase("llama2-13b trn1 8k", _TRN1_INF, "trn1.32xlarge", "llama2-13b", 16, 1, 4096,
               4096, "bf16", 9.84, notes=_PAD + "SDK 2.18"),
    DecodeCase("llama2-13b trn1 16k", _TRN1_INF, "trn1.32xlarge", "llama2-13b", 16, 1, 8192,
               8192, "bf16", 13.41, notes=_PAD + "SDK 2.18"),
    DecodeCase("llama2-70b trn1 256", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 128,
               128, "bf16", 25.18, notes="SDK 2.18"),
    DecodeCase("llama2-70b trn1 4k", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 2048,
               2048, "bf16", 26.85, notes="SDK 2.18"),
    DecodeCase("llama3-8b trn1 int8 8k", _TRN1_INF, "trn1.32xlarge", "llama3-8b", 16, 1, 128,
               8064, "int8", 7.03, notes="int8 weights, BF16 matmuls; SDK 2.18.1"),
    DecodeCase("llama3-70b trn1 1k", _TRN1_INF, "trn1.32xlarge", "llama3-70b", 16, 1, 128,
               1024, "bf16", 24.48, notes="SDK 2.18.1"),
    # The rest of the table's 8B and 70B rows: the same models at other sequence lengths.
    DecodeCase("llama3-8b trn1 int8 4k", _TRN1_INF, "trn1.32xlarge", "llama3-8b", 16, 1, 128,
               3968, "int8", 5.86, notes="int8 weights, BF16 matmuls; SDK 2.18.1"),
    DecodeCase("llama3-8b trn1 int8 8k long prompt", _TRN1_INF, "trn1.32xlarge", "llama3-8b",
               16, 1, 4096, 4096, "int8", 7.04, notes="int8 weights, BF16 matmuls; SDK 2.18.1"),
    DecodeCase("llama3-70b trn1 4k", _TRN1_INF, "trn1.32xlarge", "llama3-70b", 16, 1, 2048,
               2048, "bf16", 26.2, notes="SDK 2.18.1"),
    DecodeCase("llama2-70b trn1 512", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 256,
               256, "bf16", 25.27, notes="SDK 2.18"),
    DecodeCase("llama2-70b trn1 1152", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 128,
               1024, "bf16", 25.45, notes="SDK 2.18"),
    DecodeCase("llama2-70b trn1 2k", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 1024,
               1024, "bf16", 26.04, notes="SDK 2.18"),
    DecodeCase("llama2-70b trn1 3k", _TRN1_INF, "trn1.32xlarge", "llama2-70b", 16, 1, 1024,
               2048, "bf16", 26.62, notes="SDK 2.18"),
    DecodeCase("mistral-7b trn1 16k", _TRN1_INF, "trn1.32xlarge", "mistral-7b", 16, 1, 8192,
               8192, "bf16", 9.89, notes="SDK 2.18"),
    DecodeCase("llama3.3-70b trn2", _TRN2_INF, "trn2.48xlarge", "llama3-70b", 16, 1, 10000, 1500,
               "bf16", 19.6, "calibration", "TP=64 at LNC=2 = 16 chips; baseline row",
               compiled=12800),
    DecodeCase("llama3.1-405b trn2", _TRN2_INF, "trn2.48xlarge", "llama3-405b", 16, 1, 10000,
               1500, "bf16", 37.9, notes="TP=64 at LNC=2 = 16 chips; baseline row (BF16)",
               compiled=12800),
    # NVIDIA's NIM benchmarks: Llama 3.3 70B (Llama 3 70B's shapes) on 2 of a node's H100s,
    # FP8 weights, TP2, one request at a time; the first row fits the H100's step cost.
    DecodeCase("llama3.3-70b h100 500+2000", _NIM, "p5.48xlarge", "llama3-70b", 2, 1, 500,
               2000, "fp8_e4m3fn", 18.91, "calibration", _NIM_NOTE),
    DecodeCase("llama3.3-70b h100 5000+500", _NIM, "p5.48xlarge", "llama3-70b", 2, 1, 5000,
               500, "fp8_e4m3fn", 18.58, notes=_NIM_NOTE),
)  # fmt: skip
DECODE_CASES = DECODE_CASES + tuple(
    DecodeCase(key, _TRN1_INF, "trn1.32xlarge", m, 16, b, p, o, fmt, t,
               notes=_B + (_PAD if m == "llama2-13b" else "") + sdk)
    for key, m, b, p, o, fmt, t, sdk in _TRN1_BATCHED
)  # fmt: skip
DECODE_CASES = DECODE_CASES + tuple(
    DecodeCase(_inf2_key(m, b, p, o), _INF2_INF, "inf2.48xlarge", m, 12, b, p, o, "bf16", t,
               notes=(_B if b > 1 else "") + "TP=24 = 12 chips; SDK 2.18")
    for m, b, p, o, t in _INF2
)  # fmt: skip
# The Trn1 and Inf2 tables ran Transformers NeuronX (SDK 2.18), which gave every query head its
# own copy of its KV head whenever the ranks did not divide the KV heads (tnx-gqa-2024).
DECODE_CASES = tuple(
    replace(c, kv_sharding="convert_to_mha") if c.source in (_TRN1_INF, _INF2_INF) else c
    for c in DECODE_CASES
)
