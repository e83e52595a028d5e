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

So, once ``trnlab.widgets`` is imported, every FigureWidget (a learner's own too) sends a
loader with plotly's own bundle inside it as a string:
* the bundle is imported once per page and shared by every figure model;
* a model's ``initialize`` does not wait for it (so anywidget's 2 s cannot run out): changes
  the kernel sends meanwhile (plotly's one-shot ``_py2js_*`` edits) are kept and handed to
  plotly's own model, in order, once the bundle is there; a view renders after that.
The bundle is plotly's, unchanged; only how often and when it is evaluated changes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from plotly.basewidget import BaseFigureWidget

__all__ = ["install"]

# After KEY (a page-wide name for the shared import) and SOURCE (plotly's bundle).
_LOADER = """\
const PY2JS = ["addTraces", "deleteTraces", "moveTraces", "restyle", "relayout", "update",
  "animate", "removeLayoutProps", "removeTraceProps"].map((k) => "_py2js_" + k);
const shared = () => (globalThis[KEY] ??= (async () => {
  const url = URL.createObjectURL(new Blob([SOURCE], { type: "text/javascript" }));
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
      const pending = [], keep = {};
      for (const k of PY2JS) {
        keep[k] = () => { const v = model.get(k); if (v !== null && v !== undefined) pending.push([k, v]); };
        model.on("change:" + k, keep[k]);
      }
      loaded = shared().then(async (plotly) => {
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


def _loader(bundle: str) -> str:
    key = "__trnlab_plotly_widget_" + hashlib.sha256(bundle.encode()).hexdigest()[:16]
    return f"const KEY = {json.dumps(key)};\nconst SOURCE = {json.dumps(bundle)};\n{_LOADER}"


def install() -> None:
    """Make every FigureWidget created from now on send the shared loader (idempotent)."""
    esm = BaseFigureWidget.__dict__.get("_esm")
    if esm is None or getattr(BaseFigureWidget, "_trnlab_shared_esm", False):
        return
    bundle = Path(esm).read_text() if isinstance(esm, Path) else str(esm)  # FileContents: text
    BaseFigureWidget._esm = _loader(bundle)
    BaseFigureWidget._trnlab_shared_esm = True
