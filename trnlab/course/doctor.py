"""What a learner's environment is missing, and exactly how to fix it.

Each check returns a :class:`Check` (name, ok, detail, fix); none of them raises, so the
report always appears, even in a half-installed environment. In a notebook::

    from trnlab.course import doctor
    doctor.report()          # an HTML table: a symbol and a colour per row

and in a terminal ``python -m trnlab.course doctor`` prints the same as text and exits
non-zero when something is missing.
"""

from __future__ import annotations

import html
import importlib
import importlib.metadata as metadata
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KERNEL", "PACKAGES", "Check", "Report", "checks", "cli", "report"]

#: The Jupyter kernel the labs are saved with (Makefile: ``ipykernel install --name trnlab``).
KERNEL = "trnlab"
#: Python the project supports (pyproject ``requires-python``).
MIN_PYTHON = (3, 10)
#: Packages the labs need: import name -> distribution name.
PACKAGES = {
    "numpy": "numpy",
    "numba": "numba",
    "ipywidgets": "ipywidgets",
    "plotly": "plotly",
    "anywidget": "anywidget",
    "jupyterlab": "jupyterlab",
    "notebook": "notebook",
    "ipykernel": "ipykernel",
    "threadpoolctl": "threadpoolctl",
}
#: JupyterLab extensions that draw plotly figures and anywidget dashboards, by folder name
#: under ``share/jupyter/labextensions``.
LAB_EXTENSIONS = {"plotly": "jupyterlab-plotly", "anywidget": "anywidget"}
#: Renderers that need nothing from the internet (plotly.js comes from the installed packages).
OFFLINE_RENDERERS = {"plotly_mimetype", "jupyterlab", "nteract", "vscode", "notebook"}

_INSTALL = "run `make env` in the project root (or: .venv/bin/python -m pip install -e .)"
_KERNEL_FIX = (
    f"{Path(sys.executable).name} -m ipykernel install --sys-prefix --name {KERNEL} "
    '--display-name "Python (trnlab)"   (or run `make env` in the project root)'
)


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, whether it is fine, what was seen, and how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def __str__(self) -> str:
        mark = "ok     " if self.ok else "MISSING"
        line = f"[{mark}] {self.name}: {self.detail}"
        return line if self.ok or not self.fix else f"{line}\n          fix: {self.fix}"


def _short(path: str | Path) -> str:
    """A path relative to the working directory when it is close by (``../.venv/bin/python``
    from labs/), else in full: reports stay readable and do not spell out a home folder."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return rel if rel.count("..") <= 1 else str(path)


# Individual checks ----------------------------------------------------------------------------
def check_python() -> Check:
    v = sys.version_info
    found = f"Python {v.major}.{v.minor}.{v.micro} at {_short(sys.executable)}"
    if (v.major, v.minor) >= MIN_PYTHON:
        return Check("Python", True, found)
    need = ".".join(map(str, MIN_PYTHON))
    return Check(
        "Python",
        False,
        f"{found}; trnlab needs {need} or later",
        f"install Python {need}+ and run `make lab PYTHON=python3.X` to rebuild .venv with it",
    )


def _requirement(dist: str) -> str:
    """trnlab's version range for ``dist`` (from the installed metadata), or ''."""
    try:
        from packaging.requirements import Requirement

        wanted = dist.lower().replace("_", "-")
        for line in metadata.requires("trnlab") or ():
            req = Requirement(line)
            if req.name.lower().replace("_", "-") == wanted and "extra" not in str(req.marker):
                return ",".join(sorted(str(s) for s in req.specifier))
    except Exception:  # trnlab not installed, or packaging missing: no range to check
        pass
    return ""


def _in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies ``spec`` (True when it cannot be told)."""
    if not spec:
        return True
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # packaging is nearly always there; without it, skip the range
        return True
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except Exception:
        return True


def check_package(module: str, dist: str | None = None) -> Check:
    """The package imports, and its version is in trnlab's range."""
    dist = dist or module
    spec = _requirement(dist)
    fix = f"{_INSTALL}; or just this one: pip install '{dist}{spec}'"
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install raising anything
        return Check(module, False, f"cannot be imported ({type(exc).__name__}: {exc})", fix)
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = str(getattr(mod, "__version__", "unknown"))
    if not _in_range(version, spec):
        return Check(module, False, f"version {version} installed; trnlab needs {spec}", fix)
    return Check(module, True, f"version {version}" + (f" (needs {spec})" if spec else ""))


def check_packages() -> list[Check]:
    return [check_package(m, d) for m, d in PACKAGES.items()]


def _labextensions_dirs() -> list[Path]:
    """Where JupyterLab looks for prebuilt extensions (this environment first)."""
    dirs = [Path(sys.prefix) / "share" / "jupyter" / "labextensions"]
    try:
        from jupyter_core.paths import jupyter_path

        dirs += [Path(p) for p in jupyter_path("labextensions")]
    except Exception:
        pass
    return list(dict.fromkeys(dirs))


def check_widget_frontend() -> list[Check]:
    """jupyterlab_widgets and the plotly / anywidget lab extensions are installed."""
    out = []
    try:
        version = metadata.version("jupyterlab_widgets")
        out.append(Check("widget front end", True, f"jupyterlab_widgets {version}"))
    except metadata.PackageNotFoundError:
        out.append(
            Check(
                "widget front end",
                False,
                "jupyterlab_widgets is not installed: dashboards would show as text "
                "('VBox(children=...)') instead of controls",
                f"{_INSTALL}; or: pip install jupyterlab_widgets, then restart JupyterLab",
            )
        )
    dirs = _labextensions_dirs()
    for package, folder in LAB_EXTENSIONS.items():
        found = next((d / folder for d in dirs if (d / folder).is_dir()), None)
        name = f"{package} lab extension"
        if found is not None:
            out.append(Check(name, True, f"found in {_short(found.parent)}"))
        else:
            out.append(
                Check(
                    name,
                    False,
                    f"no '{folder}' under {_short(dirs[0])}: {package} output would not draw in JupyterLab",
                    f"reinstall {package} into this environment (pip install --force-reinstall "
                    f"{package}), then restart JupyterLab",
                )
            )
    return out


def _kernel_specs() -> dict[str, str]:
    """Registered kernels: name -> resource directory."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().find_kernel_specs()


def _kernel_python(name: str) -> str | None:
    """The Python executable a registered kernel starts, if it names one."""
    from jupyter_client.kernelspec import KernelSpecManager

    argv = KernelSpecManager().get_kernel_spec(name).argv
    return argv[0] if argv else None


def check_kernel() -> Check:
    """A kernel called ``trnlab`` is registered with Jupyter."""
    try:
        specs = _kernel_specs()
    except Exception as exc:
        return Check(
            f"'{KERNEL}' kernel",
            False,
            f"could not list Jupyter kernels ({type(exc).__name__}: {exc})",
            _INSTALL,
        )
    if KERNEL in specs:
        return Check(f"'{KERNEL}' kernel", True, f"registered in {_short(specs[KERNEL])}")
    others = ", ".join(sorted(specs)) or "none"
    return Check(
        f"'{KERNEL}' kernel",
        False,
        f"not registered (registered kernels: {others}); the labs are saved with it",
        _KERNEL_FIX,
    )


def _tiny(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * x[i]
    return total


def check_numba() -> Check:
    """numba can compile and run a tiny function."""
    fix = f"{_INSTALL}; numba needs a matching llvmlite (pip install --force-reinstall numba)"
    try:
        import numpy as np
        from numba import njit

        t0 = time.perf_counter()
        value = njit(_tiny)(np.arange(4.0))
        seconds = time.perf_counter() - t0
    except Exception as exc:
        return Check("numba compiles", False, f"{type(exc).__name__}: {exc}", fix)
    if value != 14.0:
        return Check(
            "numba compiles", False, f"a compiled sum of squares gave {value}, not 14", fix
        )
    return Check("numba compiles", True, f"a tiny function compiled and ran in {seconds:.2f} s")


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _same_python(a: str, b: str) -> bool:
    # Compare without resolving symlinks: a venv's python links to the system one.
    pa, pb = Path(os.path.abspath(a)), Path(os.path.abspath(b))
    return pa == pb or pa.parent.parent == pb.parent.parent


def check_running_kernel() -> Check:
    """In a notebook: the running kernel is this environment's ``trnlab`` kernel."""
    name = "running in the trnlab kernel"
    shell = _ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return Check(name, True, "not in a notebook (checked only inside one)")
    fix = "Kernel menu > Change Kernel... > Python (trnlab); if it is not listed: " + _KERNEL_FIX
    try:
        python = _kernel_python(KERNEL)
    except Exception:
        return Check(
            name, False, f"this notebook runs {_short(sys.executable)}; no '{KERNEL}' kernel", fix
        )
    if python and _same_python(python, sys.executable):
        return Check(name, True, f"this notebook runs {_short(sys.executable)}")
    return Check(
        name,
        False,
        f"this notebook runs {_short(sys.executable)}, the '{KERNEL}' kernel runs {python}",
        fix,
    )


def check_plotly_renderer() -> Check:
    """In a notebook: plotly renders from installed files, not from a CDN."""
    name = "plotly renderer offline"
    shell = _ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return Check(name, True, "not in a notebook (the labs set it in their setup cell)")
    fix = 'in the setup cell: import plotly.io as pio; pio.renderers.default = "plotly_mimetype"'
    try:
        import plotly.io as pio

        default = str(pio.renderers.default)
    except Exception as exc:
        return Check(name, False, f"plotly.io unavailable ({type(exc).__name__}: {exc})", fix)
    parts = [p for p in default.split("+") if p]
    online = [p for p in parts if p not in OFFLINE_RENDERERS]
    if parts and not online:
        return Check(name, True, f"pio.renderers.default = {default!r}")
    return Check(
        name,
        False,
        f"pio.renderers.default = {default!r}: {', '.join(online) or 'none'} "
        "loads plotly.js from the internet or a browser tab, so charts may not show offline",
        fix,
    )


#: Every check, in the order the report lists them; each returns a Check or a list of them.
CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_python,
    lambda: check_package("trnlab"),
    check_packages,
    check_widget_frontend,
    check_kernel,
    check_numba,
    check_running_kernel,
    check_plotly_renderer,
)


def checks() -> list[Check]:
    """Run every check; a check that itself fails becomes a failed :class:`Check`, never raises."""
    out: list[Check] = []
    for fn in CHECKS:
        try:
            found = fn()
        except Exception as exc:
            label = getattr(fn, "__name__", "check").replace("check_", "").replace("_", " ")
            out.append(
                Check(
                    label,
                    False,
                    f"the check itself failed ({type(exc).__name__}: {exc})",
                    "please report this with the output of `python -m trnlab.course doctor`",
                )
            )
            continue
        out.extend(found if isinstance(found, list) else [found])
    return out


@dataclass(frozen=True)
class Report:
    """The checks, shown as an HTML table in notebooks and as text in terminals."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def missing(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def summary(self) -> str:
        n, bad = len(self.checks), len(self.missing)
        if not bad:
            return f"All {n} checks passed: this environment is ready for the labs."
        names = ", ".join(c.name for c in self.missing)
        return f"{bad} of {n} checks need attention ({names}); each row says how to fix it."

    def __str__(self) -> str:
        return "\n".join([*(str(c) for c in self.checks), "", self.summary()])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        # Okabe-Ito bluish green / vermillion, each with a symbol and a word: not colour alone.
        rows = []
        for c in self.checks:
            colour, symbol, word = (
                ("#009E73", "&#10004;", "ok") if c.ok else ("#D55E00", "&#10008;", "missing")
            )
            rows.append(
                f"<tr><td style='color:{colour};font-weight:bold;white-space:nowrap'>"
                f"{symbol} {word}</td><td style='text-align:left'>{html.escape(c.name)}</td>"
                f"<td style='text-align:left'>{html.escape(c.detail)}</td>"
                f"<td style='text-align:left'><code>{html.escape(c.fix)}</code></td></tr>"
            )
        head = "".join(
            f"<th style='text-align:left'>{h}</th>" for h in ("", "check", "found", "how to fix")
        )
        colour = "#009E73" if self.ok else "#D55E00"
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='border-left:4px solid {colour};padding:4px 8px'>"
            f"{html.escape(self.summary())}</p>"
        )


def report() -> Report:
    """Run every check; display the result in a notebook, or ``print`` it in a terminal."""
    return Report(tuple(checks()))


def cli(argv: list[str] | None = None) -> int:
    """``python -m trnlab.course doctor``: print every check; exit 1 if something is missing."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m trnlab.course doctor",
        description="Check this environment for the labs and say how to fix what is missing.",
    )
    parser.parse_args(sys.argv[1:] if argv is None else argv)
    r = report()
    print(r)
    return 0 if r.ok else 1
