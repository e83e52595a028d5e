"""One plotly.js per page, loaded without holding up anywidget: the FigureWidget front end.

plotly 6's FigureWidget is an anywidget whose front-end module (``_esm``) is plotly's whole
5 MB widget bundle. anywidget evaluates each widget model's ``_esm`` on its own and gives a
model 2 s to load and initialize it (anywidget >= 0.9.16, ``Runtime``); past that the model's
``ready`` promise stays rejected ("[anywidget] Failed to initialize model.") and every later
message from the kernel to that model is dropped: the figure never follows its controls.

In JupyterLab the figures arrive one cell at a time, so each bundle has the page to itself.
Voila (and a reloaded JupyterLab page) creates every widget model at once after the notebook
ran: the classroom app's 14 figures meant 14 evaluations of the same 5 MB of JavaScript racing
each other, 3-18 s each on a 2-core machine, and every model missed its 2 s.

And each figure's state carried those 5 MB: a page that connects to a kernel holding 14 figures
(Voila's first paint, a reloaded JupyterLab page) waited for 75 MB of widget state to be
serialised, sent and parsed before it could draw anything (20-30 s on the busy 2-core machine).

So, once ``trnlab.widgets`` is imported, every FigureWidget (a learner's own too) sends a small
loader instead of the bundle:
* the bundle travels once per kernel, in one model without a view (:class:`PlotlyBundle`,
  created with the first figure and recreated if closed); a figure's loader names that model;
* the bundle is imported once per page and shared by every figure model;
* a model's ``initialize`` does not wait for it (so anywidget's 2 s cannot run out): changes
  the kernel sends meanwhile (plotly's one-shot ``_py2js_*`` edits) are kept and handed to
  plotly's own model, in order, once the bundle is there; a view renders after that.
The bundle is plotly's, unchanged; only how often it travels and is evaluated changes.

Evaluating the bundle is still one long task on the page's main thread, the longer the slower
the machine. anywidget's 2 s are wall time from the model's creation, and a figure model whose
small loader had not finished loading when that task began ran out of them: its ``ready``
stayed rejected, anywidget dropped the layout, data and every later message the kernel sent
it, and it drew an empty, dead chart (the lab 03 stepper's engine timeline, in each of 3 runs
of ``benchmarks/bench_browser.py``'s page with its CPU throttled 8x; a CI failure). So:
* the first loader to run on a page gives models anywidget creates from then on 60 s instead of
  2 s to initialize (only anywidget's own 2 s request, recognised by its caller; nothing else on
  the page is touched), so a model made while the bundle loads waits for it rather than dies;
* the bundle is not evaluated until every figure model the page already holds (a reloaded page
  and Voila create them all at once, some before any loader ran) has initialized (at most 20 s).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import ipywidgets
import traitlets
from plotly.basewidget import BaseFigureWidget

__all__ = ["PlotlyBundle", "install"]

# After KEY (a page-wide name for the shared import), BUNDLE (the model id of the kernel's
# PlotlyBundle) and FIG (this figure's token). The widget manager may register the bundle's
# model after a figure's (Voila creates them all at once), so the loader asks again until it
# is there.
_LOADER = """\
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Figures of this page whose loader has initialized (by FIG, each figure's token).
const INITIALIZED = (globalThis[KEY + ":initialized"] ??= new Set());
// anywidget's Runtime asks AbortSignal.timeout(2000) for a model's whole load and initialize;
// from the first loader on, that one request (told by its caller's file) gets 60 s.
if (!AbortSignal[KEY]) {
  const timeout = AbortSignal.timeout.bind(AbortSignal);
  AbortSignal[KEY] = true;
  AbortSignal.timeout = (ms) =>
    timeout(ms === 2000 && /\\/anywidget\\//.test(new Error().stack ?? "") ? 60000 : ms);
}
const tokenOf = (model) => /const FIG = "([0-9a-f]+)";/.exec(String(model.get("_esm") ?? ""))?.[1];
// Wait (at most 20 s) until every figure model the manager holds has initialized; a model
// still being created (its promise pending) may be a figure, so it is waited for too.
async function othersInitialized(manager) {
  const start = Date.now(), creating = {};
  while (manager._models && Date.now() - start < 20000) {
    const models = await Promise.all(Object.values(manager._models).map((p) =>
      Promise.race([p.catch(() => null), sleep(200).then(() => creating)])));
    const waiting = models.filter((m) => {
      if (m === creating) return true;
      const token = m && String(m.get("_esm") ?? "").includes(KEY) && tokenOf(m);
      return token && !INITIALIZED.has(token);
    });
    if (!waiting.length) return;
    await sleep(50);
  }
}
const PY2JS = ["addTraces", "deleteTraces", "moveTraces", "restyle", "relayout", "update",
  "animate", "removeLayoutProps", "removeTraceProps"].map((k) => "_py2js_" + k);
async function source(manager) {
  const start = Date.now();
  for (;;) {
    try {
      const bundle = await manager.get_model(BUNDLE);
      if (bundle) return bundle.get("source");
    } catch (err) {
      if (Date.now() - start > 300000) throw new Error(`trnlab: no plotly bundle model ${BUNDLE}: ${err}`);
    }
    await sleep(50);
  }
}
const shared = (manager) => (globalThis[KEY] ??= (async () => {
  const text = await source(manager);
  await othersInitialized(manager);
  const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
  try { return await import(/* webpackIgnore: true */ url); }
  finally { URL.revokeObjectURL(url); }
})());

// plotly's model, handed a view of the real one whose change handlers can be replayed.
function replayable(model) {
  const handlers = new Map(), override = new Map();
  return {
    get: (k) => (override.has(k) ? override.get(k) : model.get(k)),
    set: (...a) => model.set(...a),
    on: (ev, cb) => {
      if (!handlers.has(ev)) handlers.set(ev, []);
      handlers.get(ev).push(cb);
      model.on(ev, cb);
    },
    off: (...a) => model.off(...a),
    send: (...a) => model.send(...a),
    save_changes: () => model.save_changes(),
    get widget_manager() { return model.widget_manager; },
    replay(k, v) {
      override.set(k, v);
      try { for (const cb of handlers.get("change:" + k) ?? []) cb(); }
      finally { override.delete(k); }
    },
  };
}

export default () => {
  let inner = null, loaded = null;
  return {
    // Not awaiting plotly.js here: anywidget drops a model that takes over 2 s to initialize.
    initialize({ model, experimental }) {
      INITIALIZED.add(FIG);
      const pending = [], keep = {};
      for (const k of PY2JS) {
        keep[k] = () => { const v = model.get(k); if (v !== null && v !== undefined) pending.push([k, v]); };
        model.on("change:" + k, keep[k]);
      }
      loaded = shared(model.widget_manager).then(async (plotly) => {
        inner = plotly.default();
        const m = replayable(model);
        await inner.initialize?.({ model: m, experimental });
        for (const k of PY2JS) model.off("change:" + k, keep[k]);
        for (const [k, v] of pending) m.replay(k, v);
      });
    },
    async render(ctx) {
      await loaded;
      return inner.render(ctx);
    },
  };
};
"""


class PlotlyBundle(ipywidgets.Widget):
    """plotly's widget bundle, held once per kernel for every FigureWidget's loader (no view)."""

    source = traitlets.Unicode().tag(sync=True)


_bundle: PlotlyBundle | None = None
_source = ""
_key = ""


def _loader() -> str:
    """A FigureWidget's ``_esm``: the shared loader, naming the kernel's live bundle model."""
    global _bundle
    if _bundle is None or _bundle.comm is None:  # first figure, or closed (Widget.close_all())
        _bundle = PlotlyBundle(source=_source)
    head = f"const KEY = {json.dumps(_key)};\nconst BUNDLE = {json.dumps(_bundle.model_id)};\n"
    return f'{head}const FIG = "{uuid.uuid4().hex}";\n{_LOADER}'  # FIG: this figure's token


def install() -> None:
    """Make every FigureWidget created from now on send the shared loader (idempotent)."""
    global _source, _key
    esm = BaseFigureWidget.__dict__.get("_esm")
    if esm is None or getattr(BaseFigureWidget, "_trnlab_shared_esm", False):
        return
    _source = Path(esm).read_text() if isinstance(esm, Path) else str(esm)  # FileContents: text
    _key = "__trnlab_plotly_widget_" + hashlib.sha256(_source.encode()).hexdigest()[:16]
    # anywidget reads ``_esm`` once per instance (AnyWidget.__init__): a property gives each
    # figure the loader for the bundle model alive when it is made.
    BaseFigureWidget._esm = property(lambda self: _loader())
    BaseFigureWidget._trnlab_shared_esm = True
