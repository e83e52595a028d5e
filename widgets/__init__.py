"""trnlab dashboards (imported as ``trnlab.widgets``): thin ipywidgets + plotly views over
model objects, and the course palette ``OKABE_ITO`` (colour-blind safe). Each dashboard's model object (``*_model.py``) is plain Python and is tested
without a browser.
"""

from . import _plotly_esm
from ._errors import SettingError
from ._style import OKABE_ITO
from .chip_explorer import ChipExplorer
from .chip_model import METRICS, ChipComparison
from .collective_explorer import CollectiveExplorer
from .collective_model import CollectiveModel
from .dashboard_tabs import DashboardTabs
from .format_explorer import FormatExplorer
from .format_model import FormatComparison
from .kernel_profile import KernelProfile
from .matmul_stepper import MatmulStepper
from .memory_traffic import MemoryTraffic
from .scale_explorer import ScaleExplorer
from .scale_model import ScaleModel

_plotly_esm.install()  # one plotly.js per page for every FigureWidget (see the module)

__all__ = [
    "METRICS",
    "OKABE_ITO",
    "ChipComparison",
    "ChipExplorer",
    "CollectiveExplorer",
    "CollectiveModel",
    "DashboardTabs",
    "FormatComparison",
    "FormatExplorer",
    "KernelProfile",
    "MatmulStepper",
    "MemoryTraffic",
    "ScaleExplorer",
    "ScaleModel",
    "SettingError",
]
