"""Real-browser harness: a loopback JupyterLab or Voila server and Debian's Chromium via Playwright.

Used by the browser tests (``tests/browser``) and the browser benchmark
(``benchmarks/bench_browser.py``). Nothing here downloads a browser: Chromium comes from the
system (``apt-get install chromium``) and Playwright drives it through ``executable_path``.

Every wait is on a condition with a load-aware budget (``waiting.py``): bounded, stretched
when the machine is busy, and every failure says what was awaited on the page and what was seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .waiting import budget_ms, budget_s, wait_until

ROOT = Path(__file__).resolve().parents[2]
LABS_DIR = ROOT / "labs"
APP = ROOT / "apps" / "dashboards.ipynb"
LAB_GLOB = "[0-9][0-9]_*.ipynb"
KERNEL = "trnlab"

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Voila 0.5's "lab" template links Font Awesome from cdn.jsdelivr.net (its only off-box request;
# icons only, the page works without them). The only requests allowed to leave the machine.
VOILA_TEMPLATE_CDN = re.compile(r"^https://cdn\.jsdelivr\.net/npm/@fortawesome/fontawesome-free@")
# Budgets in seconds on an idle machine (waiting.py stretches them with the load).
SERVER_START_S = 45  # a cold JupyterLab answers in ~5-20 s on a busy 2-core machine
SERVER_STOP_S = 10
ACTION_S = 30  # Playwright's own waits: an element to appear, to be clickable, a navigation
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
LOCAL_SCHEMES = {"data", "blob"}

# Console messages that are not failures. Keep this tiny and say why for each entry.
BENIGN_CONSOLE = (
    # Chromium logs a 404 for /favicon.ico-like resources as a console error; voila and
    # JupyterLab both request optional files (e.g. a custom.css / workspace) that may be
    # absent. These are the server saying "no such optional file", not a broken page.
    re.compile(r"Failed to load resource: the server responded with a status of 404"),
)
#: JupyterLab's own icon fonts (/static/lab/*.woff2), fetched by its CSS without the token.
#: On a loaded machine the request can overtake the login cookie and draw a 403 (seen once in
#: a browser-test run, the page otherwise complete): JupyterLab's glyphs, not trnlab's output.
LAB_FONT_403 = (re.compile(r"/static/lab/[^/?]+\.woff2?(\?|$)"), "status of 403")


# Finding the browser ---------------------------------------------------------------------------
def chromium_path() -> str | None:
    """Debian's Chromium, or None."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def missing() -> str | None:
    """Why the browser tests cannot run here (with how to fix it), or None if they can."""
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append(
            "the playwright python package is missing (pip install -e '.[test]'; "
            "never `playwright install`: the system chromium is used)"
        )
    if chromium_path() is None:
        problems.append(
            "no chromium executable on PATH or at /usr/bin/chromium "
            "(Debian/Ubuntu: `sudo apt-get install chromium`, or `make browser` as root)"
        )
    return "; ".join(problems) or None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def artifacts_dir() -> Path:
    out = Path(os.environ.get("TRNLAB_ARTIFACTS") or ROOT / "test-artifacts" / "browser")
    out.mkdir(parents=True, exist_ok=True)
    return out


def labs() -> list[Path]:
    return sorted(LABS_DIR.glob(LAB_GLOB))


#: Labs whose dashboards ``test_widgets_drawn.py`` drives: that module runs them (once, in its
#: own JupyterLab) and checks they ran clean; ``test_labs_run.py`` runs the others (a lab in
#: both cost a second Run All, in a second JupyterLab).
WIDGET_LABS = (
    "03_tiled_matmul.ipynb",
    "05_write_a_kernel.ipynb",
    "06_numeric_formats.ipynb",
    "08_neuronlink_and_collectives.ipynb",
    "09_scale_to_ultraservers.ipynb",
)


def check_ran_clean(executed, lab: Path, artifacts: Path) -> None:
    """A lab run top to bottom in JupyterLab: a screenshot, no error output, no console or
    page error, no request off this machine."""
    page, watch, seconds = executed.get(lab.name)
    plots = page.locator(".js-plotly-plot")
    if plots.count():  # the screenshot shows the first chart, not only the last cell
        plots.first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"jupyterlab-{lab.stem}.png"))
    # Every chart of the labs has a title; one drawn without it is a figure model that never
    # received its layout and data (widgets/_plotly_esm.py): an empty chart that cannot redraw.
    empty = plots.filter(has_not=page.locator(".gtitle"))
    wait_until(lambda: empty.count() == 0, f"{lab.name}: every chart drawn with its title and "
               "data (an untitled chart lost its layout)", DRAW_S,
               seen=lambda: charts_seen(page))  # fmt: skip
    errors = error_outputs(page)
    assert not errors, f"{lab.name}: error output on the page after Run All:\n" + "\n".join(errors)
    problems = watch.problems()
    assert not problems, f"{lab.name} (ran in {seconds:.0f} s): " + "\n".join(problems)


# Servers ---------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A Jupyter or Voila server on loopback, in its own process group."""

    kind: str
    proc: subprocess.Popen
    port: int
    token: str
    log: Path
    home: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}" + (
            f"{sep}token={self.token}" if self.token else ""
        )

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def wait_ready(self, probe: str, base: float = SERVER_START_S) -> None:
        last = "no answer yet"

        def answers() -> bool:
            nonlocal last
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.kind} exited with code {self.proc.returncode} before answering on "
                    f"port {self.port}; its log ends:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url(probe), timeout=budget_s(5)) as r:
                    if r.status == 200:
                        return True
                    last = f"HTTP {r.status}"
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            return False

        try:
            wait_until(
                answers, f"{self.kind} to answer {probe} on 127.0.0.1:{self.port}", base,
                seen=lambda: f"last answer {last}; its log ends:\n{self.log_tail()}",
            )  # fmt: skip
        except AssertionError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(budget_s(SERVER_STOP_S))  # its kernels shut down first
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(SERVER_STOP_S)


def _isolated_env(home: Path) -> dict[str, str]:
    """Jupyter config, data, runtime and workspaces in ``home``: nothing of the user's leaks in."""
    env = dict(os.environ)
    dirs = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_WORKSPACES_DIR": home / "workspaces",
        "JUPYTERLAB_SETTINGS_DIR": home / "settings",
        "IPYTHONDIR": home / "ipython",
    }
    for key, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[key] = str(path)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("JUPYTER_TOKEN", None)
    # The news/announcements toast would ask to fetch jupyter.org and cover the page.
    # Start the notebook's own kernel (trnlab) on open instead of asking in a dialog.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text(
        json.dumps({"autoStartDefaultKernel": True})
    )
    (home / "config" / "labconfig").mkdir(parents=True, exist_ok=True)
    (home / "config" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    return env


def _spawn(
    kind: str,
    cmd: list[str],
    home: Path,
    port: int,
    token: str,
    cwd: Path,
    env: dict[str, str] | None = None,
) -> Server:
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"{kind}.log"
    fh = open(log, "wb")
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**_isolated_env(home), **(env or {})},
        stdout=fh,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stop() takes the kernels with it
    )
    fh.close()
    return Server(kind, proc, port, token, log, home)


def _root_flag() -> list[str]:
    return ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []


def start_lab(root_dir: Path, home: Path) -> Server:
    """JupyterLab (and Notebook 7, same server) serving ``root_dir`` on a free loopback port."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *_root_flag(),
    ]  # fmt: skip
    server = _spawn("jupyterlab", cmd, home, port, token, root_dir)
    server.wait_ready("api/status")
    return server


# The app's Voila settings (a preheated kernel pool; Notebook 7's extension left out, since Voila
# cannot load it) live in apps/voila.json, which Voila reads from its working directory: the
# Makefile's `app` target and these tests both start Voila in apps/.
VOILA_STARTED = re.compile(r"Kernel started: ([0-9a-f-]{36})")
VOILA_TAKEN = re.compile(r"Using pre-heated kernel: ([0-9a-f-]{36})")
POOL_S = 90  # a preheated kernel runs the app notebook in ~10-40 s on a busy 2-core machine


def start_voila(
    notebook: Path, home: Path, args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Server:
    """Voila serving one notebook on a free loopback port (no token: voila has none).

    Ready when it answers a static file (a request for the page itself would take a kernel).
    ``args`` are added to Voila's command line, ``env`` to its environment.
    """
    port = free_port()
    cmd = [
        sys.executable, "-m", "voila", notebook.name, "--no-browser",
        f"--port={port}", "--Voila.ip=127.0.0.1", "--Voila.port_retries=0", *args,
    ]  # fmt: skip
    server = _spawn("voila", cmd, home, port, "", notebook.parent, env)
    server.wait_ready("voila/templates/lab/static/materialcolors.css")
    return server


def _kernel_model(server: Server, kernel_id: str) -> dict | None:
    try:
        with urllib.request.urlopen(server.url(f"api/kernels/{kernel_id}"), timeout=5) as r:
            return json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return None  # shut down, or not answering yet


def wait_voila_pool(server: Server, base: float = POOL_S) -> str:
    """Wait until a preheated kernel has run the whole notebook and waits for a learner.

    That kernel is one Voila has started and not yet handed to a page (its log says which),
    idle, whose last activity stays the same between two looks (a cell boundary shows idle for
    a moment; the next cell moves the activity stamp). Returns its id.
    """
    seen: dict[str, tuple] = {}
    states: list[str] = []

    def heated() -> str | None:
        states.clear()
        log = server.log.read_text(errors="replace")
        taken = set(VOILA_TAKEN.findall(log))
        for kid in VOILA_STARTED.findall(log):
            if kid in taken:
                continue
            model = _kernel_model(server, kid)
            if model is None:
                continue
            key = (model["execution_state"], model["last_activity"], model["connections"])
            states.append(f"{kid[:8]}: {key[0]}, {key[2]} page(s)")
            if key[0] == "idle" and key[2] == 0 and seen.get(kid) == key:
                return kid
            seen[kid] = key
        return None

    return wait_until(
        heated, "a Voila kernel to finish preheating the app (idle, no page attached)", base,
        seen=lambda: f"kernels {states or 'none started'}; log ends:\n{server.log_tail()}",
        poll=0.5,
    )  # fmt: skip


# Browser ---------------------------------------------------------------------------------------
@dataclass
class Watch:
    """What a page did that a test must check: console errors, page errors, off-box requests."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        def on_console(msg):
            url = (msg.location or {}).get("url", "")
            if any(p.search(url) for p in self.allowed):
                return
            if LAB_FONT_403[0].search(url) and LAB_FONT_403[1] in msg.text:
                return
            if msg.type == "error" and not any(p.search(msg.text) for p in BENIGN_CONSOLE):
                loc = msg.location or {}
                self.console_errors.append(f"{msg.text} (at {loc.get('url', '?')})")

        page.on("console", on_console)
        page.on("pageerror", lambda err: self.page_errors.append(str(err)))
        page.on("request", lambda req: self.requests.append(req.url))

    allowed: tuple[re.Pattern, ...] = ()  # off-box URLs tolerated (see VOILA_TEMPLATE_CDN)

    def off_box(self) -> list[str]:
        """Requests that left the machine (anything but loopback, data: and blob:)."""
        out = []
        for url in self.requests:
            if any(p.search(url) for p in self.allowed):
                continue
            scheme = url.split(":", 1)[0].lower()
            if scheme in LOCAL_SCHEMES:
                continue
            host = urllib.parse.urlsplit(url).hostname or ""
            if scheme in ("http", "https", "ws", "wss") and host in LOCAL_HOSTS:
                continue
            out.append(url)
        return out

    def problems(self) -> list[str]:
        """Everything wrong, one line each (empty when the page behaved)."""
        out = [f"console error: {m}" for m in self.console_errors]
        out += [f"page error: {m}" for m in self.page_errors]
        out += [f"request left the machine: {u}" for u in self.off_box()]
        return out


@contextlib.contextmanager
def chromium(profile: Path | None = None) -> Iterator[object]:
    """A Playwright browser context on Debian's Chromium with a fresh profile."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError(missing() or "chromium not found")
    with contextlib.ExitStack() as stack:
        if profile is None:
            profile = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trnlab-chr-")))
        pw = stack.enter_context(sync_playwright())
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=exe,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
            service_workers="block",
        )
        context.set_default_timeout(budget_ms(ACTION_S))
        context.set_default_navigation_timeout(budget_ms(ACTION_S))
        try:
            yield context
        finally:
            context.close()


def copy_labs(dest: Path) -> Path:
    """A throwaway copy of labs/ with outputs cleared (the tests run cells in it, never in the
    committed notebooks; cleared, so every execution count and output on the page is new)."""
    shutil.copytree(LABS_DIR, dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for nb_path in dest.glob(LAB_GLOB):
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb["metadata"].pop("widgets", None)
        nb_path.write_text(json.dumps(nb, indent=1))
    return dest


# JupyterLab / Notebook 7 pages -------------------------------------------------------------------
# Errors in the outputs: JupyterLab renders an error output as stderr text (the same mime type as
# a warning), so a traceback is told by its text; ipywidgets and the plotly renderer print their
# own failures into the output area.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)
_RENDER_FAILURE = re.compile(
    r"Error displaying widget|Error rendering output|Javascript Error|Failed to display"
)


def _is_error(output: dict) -> bool:
    if output["mime"] == "application/vnd.jupyter.stderr" and _TRACEBACK.search(output["text"]):
        return True
    return bool(_RENDER_FAILURE.search(output["text"]))


# One snapshot of the notebook as a learner sees it: prompts of the code cells, the kernel's
# status indicator, and the text of every stderr / error-looking output.
_SNAPSHOT_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook')
          || document.querySelector('.jp-Notebook');
  if (!nb) return null;
  const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
      .map(e => e.textContent.trim());
  const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const outs = [...nb.querySelectorAll('.jp-OutputArea-output')]
      .map(e => ({mime: e.dataset.mimeType || '', text: e.innerText || ''}));
  return {prompts, status: ind ? ind.dataset.status : null, outputs: outs};
}"""


def notebook_url(server: Server, name: str, ui: str = "lab") -> str:
    if ui == "lab":  # a workspace per notebook: nothing restored from another test's layout
        return server.url(f"lab/workspaces/t-{Path(name).stem}/tree/{name}")
    return server.url(f"notebooks/{name}")


def kernel_state(server: Server, name: str) -> str | None:
    """The server's view of the notebook's kernel: its execution state, or None if none runs."""
    try:
        with urllib.request.urlopen(server.url("api/sessions"), timeout=budget_s(5)) as r:
            sessions = json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    for s in sessions:
        if s.get("path", "").lstrip("/") == name and s.get("kernel"):
            return s["kernel"].get("execution_state")
    return None


OPEN_S = 60  # a notebook page loaded and its kernel started, idle machine, with a margin


def open_notebook(page, server: Server, name: str, ui: str = "lab", base: float = OPEN_S) -> None:
    """Open a notebook and wait until its kernel (trnlab) is running and idle (server and page)."""
    page.goto(notebook_url(server, name, ui), wait_until="domcontentloaded")
    state, indicator = None, None

    def idle() -> bool:
        nonlocal state, indicator
        state = kernel_state(server, name)
        ind = page.locator(".jp-Notebook-ExecutionIndicator")
        indicator = ind.first.get_attribute("data-status") if ind.count() else None
        cells = page.locator(".jp-Notebook .jp-Cell").count()
        if state == "idle" and indicator in ("idle", None if ui != "lab" else "idle") and cells:
            return True
        _accept_kernel_dialog(page)
        return False

    wait_until(
        idle, f"{name} ({ui}) to open with its trnlab kernel idle", base,
        seen=lambda: f"kernel state {state!r} on the server, page indicator {indicator!r}, "
        f"page title {page.title()!r}",
    )  # fmt: skip


def _accept_kernel_dialog(page) -> bool:
    """If JupyterLab asks which kernel to use, keep its preselected choice (the notebook's own)."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and "kernel" in dialog.first.inner_text().lower():
        dialog.locator(".jp-mod-accept").first.click()
        return True
    return False


def run_all_cells(page, name: str, base: float = 30) -> None:
    """Run > Run All Cells, through the menu bar as a learner would, and see it start."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

    def started() -> bool:
        snap = page.evaluate(_SNAPSHOT_JS)
        if snap and any(p != "[ ]:" for p in snap["prompts"]):
            return True
        _accept_kernel_dialog(page)
        return False

    wait_until(
        started, f"{name}: Run > Run All Cells to start (a cell queued or running)", base,
        seen=lambda: "every prompt still shows [ ]",
    )  # fmt: skip


def error_outputs(page) -> list[str]:
    snap = page.evaluate(_SNAPSHOT_JS) or {"outputs": []}
    return [o["text"].strip()[:1500] for o in snap["outputs"] if _is_error(o)]


RUN_ALL_S = 120  # the longest lab runs top to bottom in ~40 s on an idle 2-core machine


def wait_until_run(page, server: Server, name: str, base: float = RUN_ALL_S) -> int:
    """Wait until every code cell shows an execution count and the kernel is idle.

    Fails at once (with the traceback) if an error appears: Run All stops at an error.
    Returns the number of code cells.
    """
    snap, state = None, None

    def finished() -> int:
        nonlocal snap, state
        snap = page.evaluate(_SNAPSHOT_JS)
        if not snap:
            return 0
        errors = [o["text"] for o in snap["outputs"] if _is_error(o)]
        if errors:
            raise AssertionError(f"{name}: an output shows an error:\n{errors[0][:2000]}")
        done = [re.fullmatch(r"\[\d+\]:", p) for p in snap["prompts"]]
        if snap["prompts"] and all(done) and snap["status"] in ("idle", None):
            state = kernel_state(server, name)
            if state == "idle":
                return len(done)
        return 0

    return wait_until(
        finished, f"{name}: every code cell to show an execution count [n], kernel idle", base,
        seen=lambda: f"prompts {snap and snap['prompts']} (page indicator "
        f"{snap and snap['status']!r}, server kernel state {state!r})",
    )  # fmt: skip


def open_and_run(
    page, server: Server, name: str, ui: str = "lab", base: float = RUN_ALL_S
) -> float:
    """Open a notebook, Run All Cells, wait for every cell; the seconds the run took."""
    open_notebook(page, server, name, ui)
    t0 = time.monotonic()
    run_all_cells(page, name)
    wait_until_run(page, server, name, base)
    return time.monotonic() - t0


# Reading what is drawn -------------------------------------------------------------------------
# A plotly figure's drawn content: traces, shapes (e.g. a cursor line), title and annotations;
# hover labels and the mode bar are left out (they change with the mouse, not the data).
_FIGURE_JS = """(plot) => {
  const parts = [...plot.querySelectorAll(
      '.cartesianlayer .overplot, .shapelayer, .gtitle, .annotation-text, .legend .traces')];
  return parts.map(p => p.outerHTML).join('\\n');
}"""


def figure(scope, title: str):
    """The plotly figure in ``scope`` (a page or a locator) whose drawn title contains ``title``."""
    page = getattr(scope, "page", scope)
    return scope.locator(".js-plotly-plot").filter(has=page.locator("text.gtitle", has_text=title))


DRAW_S = 20  # a dashboard or chart appears after its cell ran (a second or two idle)


def chart_titles(scope) -> list[str]:
    """The title of every plotly chart drawn in ``scope`` (a page or a locator), in page order;
    '' for an untitled one (an empty chart: its model never received its layout and data)."""
    return scope.locator(".js-plotly-plot").evaluate_all(
        "plots => plots.map(p => p.querySelector('.gtitle')?.textContent ?? '')"
    )


def charts_seen(scope) -> str:
    """The charts drawn in ``scope``, by title, for a failure message."""
    titles = [t or "(untitled: empty)" for t in chart_titles(scope)]
    return f"{len(titles)} chart(s) drawn there: {titles}"


def one(locator, what: str, base: float = DRAW_S, scope=None):
    """Wait until ``locator`` finds something, then require exactly one; return it.

    A widget draws after its kernel went idle (its model reaches the browser later, and long
    work runs off the UI thread), so looking once right after Run All can miss it on a busy
    machine: every lookup of a dashboard, chart or control waits for it first. A failure says
    which charts ``scope`` (if given) shows instead."""

    def seen() -> str:
        return f"{locator.count()} found" + (f"; {charts_seen(scope)}" if scope is not None else "")

    wait_until(locator.count, f"{what} drawn", base, seen=seen)
    found = locator.count()
    assert found == 1, f"expected one {what}; found {found}"
    return locator


def dashboard(page, marker):
    """The output area holding one dashboard, told by something only it has (a locator made
    from ``page``: a control's title, a figure's title)."""
    return page.locator(".jp-OutputArea-output").filter(has=marker)


def slider(scope, label: str):
    """The handle (role=slider) of the ipywidgets slider described as ``label``."""
    page = getattr(scope, "page", scope)
    box = scope.locator(".widget-slider").filter(
        has=page.locator("label.widget-label", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))
    )
    return box.get_by_role("slider")


def drawn(plot) -> str:
    """What the figure shows, as SVG text (compare two of these to see a change)."""
    return plot.first.evaluate(_FIGURE_JS)


CHANGE_S = 20  # a dashboard redraws after a control changes (well under 1 s idle)


def wait_for_change(read, before, what: str, action: str, base: float = CHANGE_S):
    """Poll ``read()`` until it differs from ``before``; return it, or fail saying what stayed."""
    now = before

    def changed() -> bool:
        nonlocal now
        now = read()
        return now != before

    shown = before if len(str(before)) < 400 else str(before)[:400] + "..."
    wait_until(changed, f"{what} to change on the page after {action}", base,
               seen=lambda: f"it still shows: {shown}")  # fmt: skip
    return now
