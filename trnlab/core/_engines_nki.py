"""Instructions recorded for ``trnlab.nki`` (a mixin of KernelContext): the engine-level row of
an NKI instruction whose values the front end computes itself.

``trnlab.nki`` runs a kernel's numerics on its own N-D tensors (NKI's semantics: NaN sentinels,
strided views, any free-dimension layout) and records each instruction here for the timeline:
which engine, which tile regions it reads and writes (for the dependencies), and how many
elements per partition it streams (for the cost). Vector, Scalar and GpSimd instructions map
onto the operations the scheduler already charges (``tensor_scalar`` for one-input ALU work,
``reduce`` for free-axis reductions and statistics, ``gpsimd`` for GpSimd work...); the Vector
and Scalar engines may write PSUM, as NKI's instructions may.
"""

from __future__ import annotations

from . import _program as P
from ._errors import KernelArgumentError

__all__ = ["NKI_OPS", "NkiOps"]

#: Operation names a recorded NKI instruction can take (the scheduler's cost rules).
NKI_OPS = {
    "tensor_tensor": P.TENSOR_TENSOR,
    "tensor_scalar": P.TENSOR_SCALAR,
    "activation": P.ACTIVATION,
    "reduce": P.REDUCE,
    "copy": P.COPY,
    "memset": P.MEMSET,
    "gpsimd": P.GPSIMD_OP,
    "tensor_tensor_scan": P.TENSOR_SCAN,
}
_ENGINES = {"vector": P.VECTOR, "scalar": P.SCALAR, "gpsimd": P.GPSIMD}


class NkiOps:
    """The recording entry point of ``trnlab.nki``; relies on EngineOps' ``_elementwise``."""

    def nki_op(
        self, op: str, engine: str, out, ins=(), elements: int | None = None, func: int = -1
    ) -> int:
        """Record one Vector / Scalar / GpSimd instruction without computing its values.

        Parameters
        ----------
        op : str
            A key of :data:`NKI_OPS`: the cost rule the instruction is charged by.
        engine : str
            ``"vector"``, ``"scalar"`` or ``"gpsimd"``.
        out : View
            The region written (SBUF, or PSUM for the Vector and Scalar engines).
        ins : sequence of View
            Up to three regions read (a strided NKI view is passed as its bounding region, so
            dependencies are never missed).
        elements : int, optional
            Elements per partition the engine streams (default: the output's free size).
        func : int
            Activation function index (the Scalar engine reloads its table when it changes;
            0, identity, needs none).

        Returns
        -------
        int
            The instruction's index.
        """
        code = NKI_OPS.get(op)
        eng = _ENGINES.get(engine)
        if code is None or eng is None:
            raise KernelArgumentError(
                f"nki_op records one of {', '.join(NKI_OPS)} on one of {', '.join(_ENGINES)}; "
                f"got {op!r} on {engine!r}"
            )
        if len(ins) > 3:
            raise KernelArgumentError(
                f"an instruction row holds at most 3 inputs; {op} got {len(ins)}"
            )
        return self._elementwise(
            code, eng, out, ins, None, op, aux=func, elements=elements, check=False, psum_out=True
        )
