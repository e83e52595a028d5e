"""The environment check: everything passes in the project's environment; whatever is
missing is reported with how to fix it, and no check ever raises."""

from __future__ import annotations

import sys

from trnlab.course import doctor


def test_everything_passes_in_this_environment(capsys):
    report = doctor.report()
    assert report.ok, str(report)
    names = {c.name for c in report.checks}
    assert set(doctor.PACKAGES) <= names
    assert {"Python", "widget front end", "'trnlab' kernel", "numba compiles"} <= names
    assert doctor.cli([]) == 0
    assert "All" in capsys.readouterr().out


def test_missing_package_is_reported_with_the_fix(monkeypatch, capsys):
    monkeypatch.setitem(doctor.PACKAGES, "no_such_module_trnlab", "no-such-dist-trnlab")
    report = doctor.report()
    assert not report.ok
    [bad] = report.missing
    assert bad.name == "no_such_module_trnlab"
    assert "cannot be imported" in bad.detail
    assert "pip install 'no-such-dist-trnlab'" in bad.fix and "make env" in bad.fix
    assert doctor.cli([]) == 1
    out = capsys.readouterr().out
    assert "MISSING" in out and "fix:" in out and "1 of" in out


def test_unregistered_kernel_is_reported_with_the_install_command(monkeypatch):
    monkeypatch.setattr(doctor, "_kernel_specs", lambda: {"python3": "/somewhere"})
    check = doctor.check_kernel()
    assert not check.ok
    assert "python3" in check.detail
    assert "ipykernel install" in check.fix and "--name trnlab" in check.fix


def test_version_outside_the_range_is_reported(monkeypatch):
    monkeypatch.setattr(doctor, "_requirement", lambda dist: ">=999")
    check = doctor.check_package("numpy")
    assert not check.ok and "needs >=999" in check.detail and "pip install" in check.fix


def test_missing_lab_extension_and_widgets_front_end(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "_labextensions_dirs", lambda: [tmp_path])
    real = doctor.metadata.version

    def version(dist):
        if dist == "jupyterlab_widgets":
            raise doctor.metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(doctor.metadata, "version", version)
    found = {c.name: c for c in doctor.check_widget_frontend()}
    assert not any(c.ok for c in found.values())
    assert "jupyterlab_widgets" in found["widget front end"].fix
    assert "jupyterlab-plotly" in found["plotly lab extension"].detail


def test_old_python_is_reported(monkeypatch):
    monkeypatch.setattr(doctor, "MIN_PYTHON", (sys.version_info.major, sys.version_info.minor + 1))
    check = doctor.check_python()
    assert not check.ok and "needs" in check.detail and check.fix


def test_a_check_that_raises_becomes_a_failed_row(monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_python, broken))
    report = doctor.report()
    assert [c.ok for c in report.checks] == [True, False]
    assert "boom" in report.checks[1].detail and report.checks[1].fix


def test_kernel_listing_that_fails_does_not_raise(monkeypatch):
    def fail():
        raise OSError("no jupyter paths")

    monkeypatch.setattr(doctor, "_kernel_specs", fail)
    check = doctor.check_kernel()
    assert not check.ok and "no jupyter paths" in check.detail and check.fix


def test_notebook_checks(monkeypatch):
    class Kernel:
        pass

    class Shell:
        kernel = Kernel()

    monkeypatch.setattr(doctor, "_ipython", lambda: Shell())
    import plotly.io as pio

    monkeypatch.setattr(pio.renderers, "default", "notebook_connected")
    check = doctor.check_plotly_renderer()
    assert not check.ok and "plotly_mimetype" in check.fix
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")
    assert doctor.check_plotly_renderer().ok

    assert doctor.check_running_kernel().ok  # this venv's python runs the trnlab kernel
    monkeypatch.setattr(doctor, "_kernel_python", lambda name: "/opt/other/bin/python")
    check = doctor.check_running_kernel()
    assert not check.ok and "Change Kernel" in check.fix


def test_html_report_uses_symbols_and_words_not_colour_alone(monkeypatch):
    report = doctor.Report(
        (doctor.Check("a", True, "fine"), doctor.Check("b", False, "gone", "install b"))
    )
    page = report._repr_html_()
    assert "&#10004; ok" in page and "&#10008; missing" in page and "install b" in page
    assert "1 of 2 checks" in str(report)
