"""NKI, the Neuron Kernel Interface, on trnlab's NeuronCore model.

A kernel written for a Trainium instance runs here after changing only its imports::

    import trnlab.nki as nki                # import nki
    import trnlab.nki.language as nl        # import nki.language as nl
    import trnlab.nki.isa as nisa           # import nki.isa as nisa

    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        nl.store(out, nl.add(x, y))
        return out

    nki.simulate(add_kernel)(a, b)                 # numpy outputs, as NKI's simulator
    run = nki.profile(add_kernel, chip="trn2")(a, b)   # a trnlab.core.Run: the timeline

``nki.simulate`` follows NKI's contract (numpy in, numpy out, NaN sentinels in uninitialised
memory, hardware-rule errors); ``nki.profile`` adds what the NKI simulator does not do: the
engine timeline, latency, SBUF/PSUM occupancy and the roofline, from trnlab's calibrated
model (docs/fidelity.md says how close it is to hardware). docs/nki.md lists what is
modelled; any other NKI API raises :class:`NotModelledError`.
"""

from __future__ import annotations

from . import isa, language
from ._errors import NotModelledError, missing
from ._kernel import HBMArg, Kernel, hbm, jit, profile, record_into, simulate
from ._tensor import NkiTensor


def trace(fn=None, **kwargs):
    """``@nki.trace`` of older editions (the API reference's examples still use it with
    ``nki.simulate_kernel``): the same kernel as :func:`jit`."""
    return jit(fn, **kwargs)


def simulate_kernel(kernel, *args, **kwargs):
    """``nki.simulate_kernel(kernel, *args)`` of older editions: ``nki.simulate(kernel)(*args)``
    (numpy arrays in, the kernel's outputs as numpy arrays out)."""
    return simulate(kernel)(*args, **kwargs)


__all__ = [
    "HBMArg",
    "Kernel",
    "NkiTensor",
    "NotModelledError",
    "hbm",
    "isa",
    "jit",
    "language",
    "profile",
    "record_into",
    "simulate",
    "simulate_kernel",
    "trace",
]

_MODELLED = (
    "jit",
    "simulate",
    "simulate_kernel",
    "trace",
    "profile (trnlab)",
    "hbm (trnlab)",
    "language",
    "isa",
    "typing",
)
# (nki.compiler is a stub module: trnlab.nki.compiler, whose every directive raises.)
_KNOWN = frozenset({"benchmark", "baremetal", "collectives", "kernels", "tensor"})


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in ("typing", "compiler"):  # loaded when a kernel asks for it (compiler: a stub
        import importlib  # whose every directive says it is not modelled)

        return importlib.import_module(f"{__name__}.{name}")
    if name == "benchmark":
        from ._errors import NotModelledError as E

        return _raise(
            E(
                "nki.benchmark (measuring on a NeuronDevice) is not modelled: trnlab has no "
                "device. nki.profile(kernel, chip=...)(*args) gives the model's latency "
                "(run.total_latency includes the launch overhead a benchmark measures)."
            )
        )
    raise missing("nki", name, _MODELLED, _KNOWN)


def _raise(e):
    raise e
